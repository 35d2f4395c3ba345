#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What a handler returns.
public enum Reply: Sendable {
    case response(Response)
    /// SSE: status 200, `Content-Type: text/event-stream`, `Cache-Control: no-cache`,
    /// `X-Accel-Buffering: no`, plus `headers`. `open` runs once, synchronously, with the new
    /// stream before any byte of it is sent; frames sent inside `open` go out first.
    case eventStream(headers: HTTPHeaders, open: @Sendable (EventStream) -> Void)
    /// Suspends the connection; the handler's work answers later from any thread.
    case deferred(@Sendable (Responder) -> Void)
}

/// Runs inline on libmicrohttpd's thread: it must not block. Work that waits returns `.deferred`.
public typealias Handler = @Sendable (Request) -> Reply

/// Routes by method and path pattern. A pattern is literal segments and `{name}` segments,
/// e.g. "/sessions/{id}/events"; when several patterns match, the one with more literal
/// segments wins (so "/sessions/new" beats "/sessions/{id}"). HEAD falls back to GET.
public struct Router: Sendable {
    private enum Segment: Sendable, Equatable {
        case literal(Substring)
        case parameter(String)
    }

    private struct Route: Sendable {
        let segments: [Segment]
        let literalCount: Int
        /// Few per route: a linear scan beats hashing the method.
        var handlers: [MethodHandler]

        func handler(for method: HTTPMethod) -> Handler? {
            for entry in handlers where entry.method == method { return entry.handler }
            return nil
        }
    }

    /// A named struct, not a tuple: a closure in a tuple stored in an Array is kept at the
    /// generic abstraction, and reading it back wraps it in a new thunk (an allocation per request).
    private struct MethodHandler: Sendable {
        let method: HTTPMethod
        let handler: Handler
    }

    private var routes: [Route] = []
    /// Routes without parameters by their exact path: most requests resolve without
    /// splitting. A short list compared by ==, cheaper than hashing for a service's few routes.
    private var literalRoutes: [(path: String, cPath: [CChar], index: Int)] = []

    public init() {}

    public mutating func add(_ method: HTTPMethod, _ pattern: String, _ handler: @escaping Handler) {
        let segments = Self.split(pattern).map { part -> Segment in
            if part.hasPrefix("{"), part.hasSuffix("}"), part.count > 2 {
                return .parameter(String(part.dropFirst().dropLast()))
            }
            return .literal(part)
        }
        if let index = routes.firstIndex(where: { $0.segments == segments }) {
            routes[index].handlers.removeAll { $0.method == method }
            routes[index].handlers.append(MethodHandler(method: method, handler: handler))
        } else {
            let literals = segments.filter { if case .literal = $0 { return true } else { return false } }.count
            routes.append(
                Route(
                    segments: segments, literalCount: literals,
                    handlers: [MethodHandler(method: method, handler: handler)]))
            if literals == segments.count {
                let path =
                    "/"
                    + segments.map { if case let .literal(text) = $0 { return String(text) } else { return "" } }
                    .joined(separator: "/")
                literalRoutes.append((path, path.utf8CString.map { $0 }, routes.count - 1))
            }
        }
    }

    /// The reply of the handler `request`'s method and path route to, its path parameters
    /// filled in; nil when no route takes it. For a request a handler passes on to another
    /// (a service retrying one it could not forward), not for libmicrohttpd's.
    public func reply(to request: Request) -> Reply? {
        guard case let .found(handler, parameters) = resolve(request.method, request.path) else { return nil }
        var routed = request
        routed.pathParameters = parameters
        return handler(routed)
    }

    enum Resolution {
        case found(Handler, parameters: [String: String])
        case notFound
        case methodNotAllowed(allow: [HTTPMethod])
    }

    /// The fast path, on libmicrohttpd's C string: a route without parameters matched by
    /// strcmp, its path returned as the route's own String (no decoding, no allocation).
    func resolveLiteral(_ method: HTTPMethod, cPath: UnsafePointer<CChar>) -> (Resolution, path: String)? {
        for literal in literalRoutes {
            let equal = literal.cPath.withUnsafeBufferPointer { strcmp($0.baseAddress!, cPath) == 0 }
            if equal { return (resolve(method, routes[literal.index], parameters: [:]), literal.path) }
        }
        return nil
    }

    func resolve(_ method: HTTPMethod, _ path: String) -> Resolution {
        for literal in literalRoutes where literal.path == path {
            return resolve(method, routes[literal.index], parameters: [:])
        }
        let parts = Self.split(path)
        var best: (route: Route, parameters: [String: String])?
        for route in routes where route.segments.count == parts.count {
            if let best, best.route.literalCount >= route.literalCount { continue }
            if let parameters = Self.match(route.segments, parts) { best = (route, parameters) }
        }
        guard let (route, parameters) = best else { return .notFound }
        return resolve(method, route, parameters: parameters)
    }

    private func resolve(_ method: HTTPMethod, _ route: Route, parameters: [String: String]) -> Resolution {
        // No `??` here: its generic parameter would wrap the handler in a thunk per request.
        if let handler = route.handler(for: method) { return .found(handler, parameters: parameters) }
        if method == .HEAD, let handler = route.handler(for: .GET) { return .found(handler, parameters: parameters) }
        return .methodNotAllowed(allow: HTTPMethod.allowed(route.handlers.map(\.method)))
    }

    private static func match(_ segments: [Segment], _ parts: [Substring]) -> [String: String]? {
        var parameters: [String: String] = [:]
        for (segment, part) in zip(segments, parts) {
            switch segment {
            case let .literal(text): if text != part { return nil }
            case let .parameter(name):
                if part.isEmpty { return nil }
                parameters[name] = String(part)
            }
        }
        return parameters
    }

    /// "/a/b/" → ["a", "b", ""]; "/" → [""]. A trailing slash is significant.
    /// Splits on the byte "/", not the Character: `split(separator:)` walks grapheme clusters
    /// (~16,000 instructions for "/sessions/{id}/actions", against ~1,600 here). A "/" is never
    /// part of a longer UTF-8 sequence, so each cut is a scalar boundary; it need not be a
    /// Character's ("/" then a combining mark is one Character), and a path is cut by its bytes.
    private static func split(_ path: String) -> [Substring] {
        let utf8 = path.utf8
        let parts = utf8.withContiguousStorageIfAvailable { bytes -> [Substring] in
            func part(_ from: Int, _ to: Int) -> Substring {
                path[utf8.index(utf8.startIndex, offsetBy: from)..<utf8.index(utf8.startIndex, offsetBy: to)]
            }
            var parts: [Substring] = []
            parts.reserveCapacity(4)
            var start = bytes.first == UInt8(ascii: "/") ? 1 : 0
            for index in start..<bytes.count where bytes[index] == UInt8(ascii: "/") {
                parts.append(part(start, index))
                start = index + 1
            }
            parts.append(part(start, bytes.count))
            return parts
        }
        if let parts { return parts }
        var copy = path  // not contiguous UTF-8 (bridged): made so, then split as above
        copy.makeContiguousUTF8()
        return split(copy)
    }
}
