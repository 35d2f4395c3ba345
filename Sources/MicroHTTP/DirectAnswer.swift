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
    /// Whether libmicrohttpd can build the head of `response` in a pool of `limit` bytes beside
    /// what this request's head holds; `streaming`: and then chunks of at least 128 bytes, in
    /// the same buffer once the head has left.
    func poolHolds(headOf response: Response, streaming: Bool = false, limit: Int) -> Bool {
        // The status line (libmicrohttpd's reason phrases are at most 31 bytes), Date, Connection,
        // Content-Length, the blank line, and 16 for alignment.
        var head = 17 + 31 + 37 + 24 + 18 + String(response.body.count).utf8.count + 2 + 16
        for (name, value) in response.headers { head += name.utf8.count + value.utf8.count + 4 }
        if streaming { head = max(head, 128) }
        // Bytes read past the head stay in the pool too (a pipelined request, a body's first
        // bytes when the answer comes before it is read): past half the pool, the read buffer
        // grows 128 bytes at a time, so fewer than 128 of them; before that, the other half is free.
        return head + 128 <= poolRoom(limit: limit)
    }

    /// Bytes of a pool of `limit` bytes that this request's head leaves: for reading its body,
    /// then for building the answer's head.
    func poolRoom(limit: Int) -> Int { limit - mhd_shim_head_pool_use(raw) }

    /// Writes `response` whole (its head alone for a HEAD request) with `Connection: close`,
    /// its fields as libmicrohttpd would send them, then shuts the socket's sending side: an
    /// answer libmicrohttpd may still make of what follows (a malformed chunk after an early
    /// 413) never reaches the client. The caller then has libmicrohttpd close the connection. A
    /// client that leaves its receive window full is waited for a quarter of a second at most:
    /// this is libmicrohttpd's thread. `unbounded`: the head of a body without end (an event
    /// stream's), chunked rather than of a length.
    func writeClosing(_ response: Response, headOnly: Bool, unbounded: Bool = false) {
        let status = response.wireStatus
        // RFC 9110 §8.6: no Content-Length (and no body) on 1xx and 204; none on a 304 either
        // (allowed; only the 200's length would be).
        let hasBody = !Response.isBodiless(status)
        var text = "HTTP/1.1 \(status) \(ReasonPhrase.of(status))\r\n"
        var dated = false
        for (name, value) in response.headers where Self.isSendable(name, value) {
            dated = dated || HTTPHeaders.sameName(name, "Date")
            text += "\(name): \(value)\r\n"
        }
        if !dated { text += "Date: \(Self.httpDate())\r\n" }
        if unbounded {
            text += "Transfer-Encoding: chunked\r\n"
        } else if hasBody {
            text += "Content-Length: \(response.body.count)\r\n"
        }
        text += "Connection: close\r\n\r\n"
        var bytes = Array(text.utf8)
        if hasBody && !headOnly { bytes += response.body }
        writeAll(bytes, waitingAtMost: 250)
        shutdown(socket, Int32(SHUT_WR))
    }

    /// A field libmicrohttpd would add as it is: a token for a name, no line break in the
    /// value, and none of the fields it writes itself.
    private static func isSendable(_ name: String, _ value: String) -> Bool {
        guard !name.isEmpty, !value.utf8.contains(where: { $0 == 0x0D || $0 == 0x0A }) else { return false }
        guard !name.utf8.contains(where: { $0 <= 0x20 || $0 == UInt8(ascii: ":") || $0 >= 0x7F }) else { return false }
        return !["Content-Length", "Connection", "Transfer-Encoding"].contains { HTTPHeaders.sameName(name, $0) }
    }

    private func writeAll(_ bytes: [UInt8], waitingAtMost milliseconds: Int32) {
        var sent = 0
        var waited: Int32 = 0
        while sent < bytes.count {
            let count = bytes.withUnsafeBytes {
                send(socket, $0.baseAddress! + sent, $0.count - sent, Int32(MSG_NOSIGNAL))
            }
            if count > 0 {
                sent += count
            } else if count < 0 && errno == EINTR {
                continue
            } else if count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && waited < milliseconds {
                var ready = pollfd(fd: socket, events: Int16(POLLOUT), revents: 0)
                _ = poll(&ready, 1, 10)
                waited += 10
            } else {
                return
            }
        }
    }

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
