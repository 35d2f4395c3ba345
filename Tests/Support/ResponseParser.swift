import Foundation

/// Incremental HTTP/1.1 response parser for the tests: Content-Length, chunked, or
/// close-delimited bodies. Every test client reads its responses through it.
public struct ResponseParser {
    public private(set) var status: Int?
    public private(set) var headers: [(String, String)] = []
    public private(set) var body: [UInt8] = []
    public private(set) var isComplete = false
    private var buffer: [UInt8] = []
    private var position = 0
    private var chunked = false
    private var contentLength: Int?
    private var chunkRemaining: Int?  // nil: a chunk-size line is due
    private var needChunkCRLF = false
    /// The status line as received (for checks of well-formedness).
    public private(set) var statusLine = ""
    /// The trailing bytes of a chunked body were malformed (a size line that is not hex).
    public private(set) var malformedChunk = false
    /// A response to HEAD: the head is all there is.
    public var headOnly = false

    public init() {}

    public func header(_ name: String) -> String? {
        headers.first { $0.0.lowercased() == name.lowercased() }?.1
    }
    public var bodyText: String { String(decoding: body, as: UTF8.self) }

    public mutating func feed(_ bytes: UnsafeRawBufferPointer) {
        buffer.append(contentsOf: bytes)
        parse()
    }
    public mutating func feed(_ bytes: [UInt8]) { bytes.withUnsafeBytes { feed($0) } }

    public mutating func endOfStream() {
        if status != nil && !chunked && contentLength == nil { isComplete = true }
    }

    private func find(_ pattern: [UInt8], from start: Int) -> Int? {
        buffer.withUnsafeBufferPointer { bytes -> Int? in
            guard bytes.count >= pattern.count else { return nil }
            var i = start
            outer: while i + pattern.count <= bytes.count {
                for k in 0..<pattern.count where bytes[i + k] != pattern[k] {
                    i += 1
                    continue outer
                }
                return i
            }
            return nil
        }
    }

    private mutating func parse() {
        if status == nil {
            guard let end = find([13, 10, 13, 10], from: 0) else { return }
            let head = String(decoding: buffer[0..<end], as: UTF8.self)
            var lines = head.components(separatedBy: "\r\n")
            statusLine = lines.removeFirst()
            let parts = statusLine.split(separator: " ")
            status = parts.count > 1 ? Int(parts[1]) ?? 0 : 0
            for line in lines {
                guard let colon = line.firstIndex(of: ":") else { continue }
                headers.append(
                    (
                        String(line[..<colon]),
                        line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
                    ))
            }
            chunked = header("Transfer-Encoding")?.lowercased().contains("chunked") ?? false
            contentLength = header("Content-Length").flatMap { Int($0) }
            position = end + 4
            let bodiless = status == 204 || status == 304 || (100..<200).contains(status ?? 0)
            if headOnly || bodiless || (!chunked && contentLength == 0) { isComplete = true }
        }
        while !isComplete {
            if chunked {
                if needChunkCRLF {
                    guard buffer.count - position >= 2 else { break }
                    position += 2
                    needChunkCRLF = false
                }
                if let remaining = chunkRemaining {
                    let available = min(remaining, buffer.count - position)
                    guard available > 0 else { break }
                    body.append(contentsOf: buffer[position..<position + available])
                    position += available
                    if remaining == available {
                        chunkRemaining = nil
                        needChunkCRLF = true
                    } else {
                        chunkRemaining = remaining - available
                    }
                } else {
                    guard let lineEnd = find([13, 10], from: position) else { break }
                    let sizeText =
                        String(decoding: buffer[position..<lineEnd], as: UTF8.self)
                        .split(separator: ";").first.map(String.init) ?? ""
                    guard let size = Int(sizeText.trimmingCharacters(in: .whitespaces), radix: 16) else {
                        malformedChunk = true
                        isComplete = true
                        break
                    }
                    position = lineEnd + 2
                    if size == 0 { isComplete = true } else { chunkRemaining = size }
                }
            } else {
                body.append(contentsOf: buffer[position...])
                position = buffer.count
                if let contentLength, body.count >= contentLength { isComplete = true }
                break
            }
        }
        if position > 65_536 {
            buffer.removeFirst(position)
            position = 0
        }
    }
}
