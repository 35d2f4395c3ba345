internal import CMicroHTTPD

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// An answer libmicrohttpd could not send. It builds an answer's head in what the request's
/// head left of the connection's memory pool (`connectionMemoryLimit`), and when the head does
/// not fit there it closes the connection without a word. A request head that fits the pool
/// but leaves a few hundred bytes of it (a 3.7 KB header field, a long query) is such a request:
/// its answer, with the same fields and body, is written to the socket here, and then the
/// connection closes.
extension Connection {
    /// Whether libmicrohttpd can build the head of `response` (`streaming`: and a chunk after
    /// it) in a pool of `limit` bytes beside what this request's head holds.
    func poolHolds(headOf response: Response, streaming: Bool = false, limit: Int) -> Bool {
        var head = 160 + ReasonPhrase.of(response.status).utf8.count  // status line, Date, Content-Length, Connection
        for (name, value) in response.headers { head += name.utf8.count + value.utf8.count + 4 }
        if streaming { head += 128 }  // libmicrohttpd's smallest chunk buffer
        return head <= poolRoom(limit: limit)
    }

    /// Bytes of a pool of `limit` bytes that this request's head leaves: for reading its body,
    /// then for building the answer's head.
    func poolRoom(limit: Int) -> Int { limit - mhd_shim_head_pool_use(raw) }

    /// Writes `response` whole (its head alone for a HEAD request) with `Connection: close`;
    /// the caller then has libmicrohttpd close the connection. One non-blocking send: a client
    /// that leaves its receive window full gets what fits.
    func writeClosing(_ response: Response, headOnly: Bool) {
        var text = "HTTP/1.1 \(response.status) \(ReasonPhrase.of(response.status))\r\nDate: \(Self.httpDate())\r\n"
        for (name, value) in response.headers
        where !name.utf8.contains(where: Self.endsLine) && !value.utf8.contains(where: Self.endsLine)
            && name.lowercased() != "content-length" && name.lowercased() != "connection"
        {
            text += "\(name): \(value)\r\n"
        }
        text += "Content-Length: \(response.body.count)\r\nConnection: close\r\n\r\n"
        var bytes = Array(text.utf8)
        if !headOnly { bytes += response.body }
        var sent = 0
        while sent < bytes.count {
            let count = bytes.withUnsafeBytes {
                send(socket, $0.baseAddress! + sent, $0.count - sent, Int32(MSG_NOSIGNAL))
            }
            guard count > 0 else { break }
            sent += count
        }
    }

    private static func endsLine(_ byte: UInt8) -> Bool { byte == 0x0D || byte == 0x0A }

    /// RFC 9110 §5.6.7's IMF-fixdate, as libmicrohttpd's Date field.
    private static func httpDate() -> String {
        var now = time(nil)
        var parts = tm()
        gmtime_r(&now, &parts)
        var buffer = [CChar](repeating: 0, count: 40)
        let count = strftime(&buffer, buffer.count, "%a, %d %b %Y %H:%M:%S GMT", &parts)
        return String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
