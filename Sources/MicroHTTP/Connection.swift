internal import CMicroHTTPD

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A typed handle on one libmicrohttpd connection: with Callbacks.swift, the wall between C
/// and the rest of MicroHTTP. Its methods must be called on the connection's MHD thread,
/// except `resume` and `shutdownSocket`, which the stream and responder call from any thread
/// under their own lock (see EventStream).
// why: an MHD_Connection handle (C); libmicrohttpd allows resume and the socket from any thread.
struct Connection: @unchecked Sendable {
    let raw: OpaquePointer

    func suspend() { MHD_suspend_connection(raw) }
    func resume() { MHD_resume_connection(raw) }

    /// Streams have no idle timeout: a suspended connection never times out anyway; the
    /// disconnect watcher ends subscribers that closed, the heartbeat (with the queue bound)
    /// those that vanished without a FIN or RST or stopped reading.
    func disableTimeout() { _ = mhd_shim_set_connection_timeout(raw, 0) }

    var socket: Int32 { mhd_shim_connection_fd(raw) }

    /// Accepted past the configured connection limit (see `HTTPServer.connectionStarted`).
    var isOverLimit: Bool { mhd_shim_socket_context(raw) == overLimitMark }

    func setSendBuffer(_ bytes: Int) {
        var size = Int32(clamping: bytes)
        _ = setsockopt(socket, SOL_SOCKET, SO_SNDBUF, &size, socklen_t(MemoryLayout<Int32>.size))
    }

    func header(_ name: String) -> String? {
        MHD_lookup_connection_value(raw, .HEADER_KIND, name).map { String(cString: $0) }
    }

    /// Header fields and query arguments in one pass over libmicrohttpd's table.
    /// libmicrohttpd has already percent-decoded the arguments and turned '+' into ' ';
    /// the first value of a repeated argument wins.
    func headersAndQuery() -> (HTTPHeaders, [String: String]) {
        var collector = FieldCollector()
        collector.headers.reserveCapacity(8)  // one allocation for a typical request's fields
        _ = withUnsafeMutablePointer(to: &collector) {
            mhd_shim_get_headers_and_arguments(raw, mhdCollectField, $0)
        }
        return (HTTPHeaders(fields: collector.headers), collector.query)
    }

    func peer() -> String? {
        guard let address = mhd_shim_client_address(raw) else { return nil }
        switch Int32(address.pointee.sa_family) {
        case AF_INET:
            let ip = address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) {
                UInt32(bigEndian: $0.pointee.sin_addr.s_addr)
            }
            return Self.dottedQuad(ip)
        case AF_INET6:
            var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
            let ok = address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { v6 -> Bool in
                var addr = v6.pointee.sin6_addr
                return inet_ntop(AF_INET6, &addr, &text, socklen_t(text.count)) != nil
            }
            return ok ? text.withUnsafeBufferPointer { String(cString: $0.baseAddress!) } : nil
        default:
            return nil
        }
    }

    /// Formatted by hand: inet_ntop goes through sprintf and string interpolation allocates,
    /// both noticeable per request; at most 15 bytes, a String that needs no heap.
    static func dottedQuad(_ ip: UInt32) -> String {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 15) { buffer in
            var count = 0
            for shift in stride(from: 24, through: 0, by: -8) {
                let octet = Int((ip >> UInt32(shift)) & 0xff)
                if octet >= 100 {
                    buffer[count] = UInt8(48 + octet / 100)
                    count += 1
                }
                if octet >= 10 {
                    buffer[count] = UInt8(48 + (octet / 10) % 10)
                    count += 1
                }
                buffer[count] = UInt8(48 + octet % 10)
                count += 1
                if shift > 0 {
                    buffer[count] = 46
                    count += 1
                }  // "."
            }
            return String(decoding: UnsafeBufferPointer(rebasing: buffer[0..<count]), as: UTF8.self)
        }
    }

    /// Queues a complete response. `closing` adds `Connection: close` (used while stopping,
    /// so keep-alive connections drain).
    @discardableResult
    func queue(_ response: Response, closing: Bool = false) -> Bool {
        guard let mhdResponse = Self.makeResponse(response, closing: closing) else { return false }
        defer { MHD_destroy_response(mhdResponse) }
        return MHD_queue_response(raw, UInt32(response.wireStatus), mhdResponse) == .YES
    }

    /// libmicrohttpd's copy of `response`'s fields and body: one reference, the caller's to
    /// destroy once it has queued it.
    static func makeResponse(_ response: Response, closing: Bool = false) -> OpaquePointer? {
        let made = response.body.withUnsafeBytes { bytes in
            MHD_create_response_from_buffer(
                bytes.count, UnsafeMutableRawPointer(mutating: bytes.baseAddress),
                .RESPMEM_MUST_COPY)
        }
        guard let mhdResponse = made else { return nil }
        add(response.headers, to: mhdResponse)
        if closing { _ = MHD_add_response_header(mhdResponse, "Connection", "close") }
        return mhdResponse
    }

    /// A field MHD rejects (e.g. a newline in a value) is dropped rather than sent broken.
    static func add(_ headers: HTTPHeaders, to mhdResponse: OpaquePointer) {
        for (name, value) in headers {
            withTerminatedUTF8(name) { cName in
                withTerminatedUTF8(value) { cValue in _ = MHD_add_response_header(mhdResponse, cName, cValue) }
            }
        }
    }

    /// Queues the never-ending response of an event stream: chunked, read from the stream's
    /// queue by `mhdStreamReader`, one response per connection (never shared). `head`: its
    /// fields, `eventStreamHeaders` first.
    @discardableResult
    func queueStream(_ stream: EventStream, head: HTTPHeaders) -> Bool {
        let cls = Unmanaged.passRetained(stream).toOpaque()  // released by mhdStreamFree
        guard
            let mhdResponse = MHD_create_response_from_callback(
                UInt64.max /* MHD_SIZE_UNKNOWN */, EventStream.blockSize, mhdStreamReader, cls, mhdStreamFree)
        else {
            Unmanaged<EventStream>.fromOpaque(cls).release()
            return false
        }
        defer { MHD_destroy_response(mhdResponse) }
        Self.add(head, to: mhdResponse)
        // A stream's end is the connection's end: nothing is pipelined behind an SSE response.
        _ = MHD_add_response_header(mhdResponse, "Connection", "close")
        return MHD_queue_response(raw, 200, mhdResponse) == .YES
    }

    /// The head of every event stream, and of the answer to HEAD on a stream's route.
    static let eventStreamHeaders = [
        ("Content-Type", "text/event-stream"), ("Cache-Control", "no-cache"),
        ("X-Accel-Buffering", "no"),
    ]
}

/// Receives header and argument fields from MHD_get_connection_values.
struct FieldCollector {
    var headers: [(name: String, value: String)] = []
    var query: [String: String] = [:]
}

/// `string` as a NUL-terminated C string without a heap allocation: Swift's implicit
/// String-to-pointer conversion allocates for small (inline) strings such as "Content-Type",
/// once per header per response.
@inline(__always)
func withTerminatedUTF8<R>(_ string: String, _ body: (UnsafePointer<CChar>) -> R) -> R {
    var string = string
    if string.isContiguousUTF8, string.utf8.count > 15 {
        return string.withCString(body)  // a native large string already ends with NUL
    }
    let count = string.utf8.count
    return withUnsafeTemporaryAllocation(of: CChar.self, capacity: count + 1) { buffer in
        string.withUTF8 { utf8 in
            utf8.withMemoryRebound(to: CChar.self) { _ = buffer.initialize(fromContentsOf: $0) }
        }
        buffer[count] = 0
        return body(UnsafePointer(buffer.baseAddress!))
    }
}

/// Wakes a connection that waits to write to a peer that does not read: shutdown makes the
/// socket report an error, so MHD closes the connection. Only while MHD still owns the fd.
func shutdownSocket(_ fd: Int32) {
    guard fd >= 0 else { return }
    _ = shutdown(fd, Int32(SHUT_RDWR))
}
