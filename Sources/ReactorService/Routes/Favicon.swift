import MicroHTTP

/// `GET /favicon.ico`: every browser asks for it, and a 404 there is an error in its console.
/// The icon is drawn here (a 16×16 disc, 32-bit with alpha) rather than shipped as a binary file.
enum Favicon {
    static let response = Response(
        status: 200,
        headers: HTTPHeaders([("Content-Type", "image/x-icon"), ("Cache-Control", "public, max-age=86400")]),
        body: icon(size: 16, blue: 0xE0, green: 0x4F, red: 0x5B))

    /// An ICO file holding one bitmap: the ICO header and directory entry, a BITMAPINFOHEADER
    /// (its height counts the colour rows and the mask's), the BGRA rows bottom-up, then an
    /// all-clear AND mask (alpha does the masking).
    static func icon(size: Int, blue: UInt8, green: UInt8, red: UInt8) -> [UInt8] {
        let maskRowBytes = (size + 31) / 32 * 4
        let imageBytes = 40 + size * size * 4 + maskRowBytes * size
        var out: [UInt8] = []
        out.reserveCapacity(22 + imageBytes)
        func le16(_ value: Int) { out += [UInt8(value & 0xFF), UInt8(value >> 8 & 0xFF)] }
        func le32(_ value: Int) {
            le16(value & 0xFFFF)
            le16(value >> 16 & 0xFFFF)
        }
        le16(0)
        le16(1)
        le16(1)  // reserved, type: icon, one image
        out += [UInt8(size), UInt8(size), 0, 0]
        le16(1)
        le16(32)  // width, height, no palette; planes, bits
        le32(imageBytes)
        le32(22)  // its size and offset
        le32(40)
        le32(size)
        le32(size * 2)
        le16(1)
        le16(32)  // BITMAPINFOHEADER
        for _ in 0..<6 { le32(0) }  // no compression, sizes and palette unset
        let centre = Double(size - 1) / 2
        let radius = Double(size) / 2 - 0.5
        for row in 0..<size {
            for column in 0..<size {
                let dx = Double(column) - centre
                let dy = Double(row) - centre
                let inside = (dx * dx + dy * dy).squareRoot() <= radius
                out += inside ? [blue, green, red, 0xFF] : [0, 0, 0, 0]
            }
        }
        out += [UInt8](repeating: 0, count: maskRowBytes * size)
        return out
    }
}
