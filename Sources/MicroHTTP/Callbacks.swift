internal import CMicroHTTPD
internal import CMicroHTTPDHalfClose

// The C entry points libmicrohttpd calls, on its own threads. They live in a library file as
// plain (nonisolated) functions — top-level code in an executable's main.swift would be
// main-actor isolated and crash when called from MHD's thread — and only translate C to the
// typed Swift side. `cls` is the server (retained by `start`, released after MHD_stop_daemon)
// or, for the stream reader, the stream (retained by its response, released by mhdStreamFree).

func mhdAccessHandler(
    cls: UnsafeMutableRawPointer?, connection: OpaquePointer?,
    url: UnsafePointer<CChar>?, method: UnsafePointer<CChar>?, version: UnsafePointer<CChar>?,
    uploadData: UnsafePointer<CChar>?, uploadDataSize: UnsafeMutablePointer<Int>?,
    context: UnsafeMutablePointer<UnsafeMutableRawPointer?>?
) -> MHD_Result {
    guard let cls, let connection, let url, let method, let version, let uploadDataSize, let context else { return .NO }
    // The server is kept alive by start()'s retain: no retain/release per call.
    let handled = Unmanaged<HTTPServer>.fromOpaque(cls)._withUnsafeGuaranteedRef {
        $0.handle(
            Connection(raw: connection), url: url, method: method, version: version,
            upload: uploadData, uploadSize: uploadDataSize, context: context)
    }
    return handled ? .YES : .NO
}

func mhdRequestCompleted(
    cls: UnsafeMutableRawPointer?, connection: OpaquePointer?,
    context: UnsafeMutablePointer<UnsafeMutableRawPointer?>?, termination: MHD_RequestTerminationCode
) {
    guard let cls else { return }
    let server = Unmanaged<HTTPServer>.fromOpaque(cls)
    if let connection {
        server._withUnsafeGuaranteedRef {
            if $0.edge.isTracking { $0.edge.requestCompleted(Connection(raw: connection).socket) }
        }
    }
    var exchange: Exchange?
    if let context, let raw = context.pointee {
        context.pointee = nil
        // Ended before the access handler saw it: nothing of ours to finish.
        if RequestMark(raw) != nil { return }
        if raw != bodylessRequestMark { exchange = Unmanaged<Exchange>.fromOpaque(raw).takeRetainedValue() }
    }
    server._withUnsafeGuaranteedRef {
        $0.completed(
            exchange, ok: termination == .REQUEST_TERMINATED_COMPLETED_OK,
            daemonShutdown: termination == .REQUEST_TERMINATED_DAEMON_SHUTDOWN)
    }
}

func mhdConnectionNotice(
    cls: UnsafeMutableRawPointer?, connection: OpaquePointer?,
    socketContext: UnsafeMutablePointer<UnsafeMutableRawPointer?>?, code: MHD_ConnectionNotificationCode
) {
    guard let cls, let socketContext else { return }
    let socket = connection.map { Connection(raw: $0).socket } ?? -1
    Unmanaged<HTTPServer>.fromOpaque(cls)._withUnsafeGuaranteedRef {
        if code == .CONNECTION_NOTIFY_STARTED {
            mhd_half_close_serve(socket)
            if $0.connectionStarted() { socketContext.pointee = overLimitMark }
        } else {
            // Before libmicrohttpd closes the socket: the guard and the marks let go of it first.
            if $0.edge.isTracking, socket >= 0 { $0.edge.closed(socket) }
            mhd_half_close_forget(socket)
            $0.connectionClosed()
        }
    }
}

func mhdStreamReader(
    cls: UnsafeMutableRawPointer?, position: UInt64,
    buffer: UnsafeMutablePointer<CChar>?, max: Int
) -> Int {
    guard let cls, let buffer else { return -2 /* MHD_CONTENT_READER_END_WITH_ERROR */ }
    let stream = Unmanaged<EventStream>.fromOpaque(cls).takeUnretainedValue()
    return stream.read(into: UnsafeMutableRawPointer(buffer), capacity: max)
}

func mhdStreamFree(cls: UnsafeMutableRawPointer?) {
    guard let cls else { return }
    Unmanaged<EventStream>.fromOpaque(cls).release()
}

func mhdCollectField(
    cls: UnsafeMutableRawPointer?, kind: MHD_ValueKind,
    key: UnsafePointer<CChar>?, value: UnsafePointer<CChar>?
) -> MHD_Result {
    guard let cls, let key else { return .YES }
    let collector = cls.assumingMemoryBound(to: FieldCollector.self)
    let name = String(cString: key)
    let text = value.map { String(cString: $0) } ?? ""
    if kind == .GET_ARGUMENT_KIND {
        if collector.pointee.query[name] == nil { collector.pointee.query[name] = text }
    } else {
        collector.pointee.headers.append((name: name, value: text))
    }
    return .YES
}

/// One of libmicrohttpd's own answers (a 431, say), about to be made: the response to send in
/// its place (owned by the caller), see `OwnAnswers`.
func mhdOwnAnswer(raw: OpaquePointer?, status: UnsafeMutablePointer<UInt32>?) -> OpaquePointer? {
    guard let raw, let status else { return nil }
    let connection = Connection(raw: raw)
    guard let server = OwnAnswers.server(of: connection) else { return nil }
    let answer = server._withUnsafeGuaranteedRef { $0.ownAnswer(connection, status: Int(status.pointee)) }
    status.pointee = UInt32(clamping: answer.status)  // never a trap on libmicrohttpd's thread
    return Connection.makeResponse(answer)
}

/// libmicrohttpd's error log, one formatted line (shim.h's mhd_shim_log formats it).
func mhdLogLine(cls: UnsafeMutableRawPointer?, line: UnsafePointer<CChar>?) {
    guard let cls, let line else { return }
    Unmanaged<HTTPServer>.fromOpaque(cls)._withUnsafeGuaranteedRef { $0.logged(String(cString: line)) }
}
