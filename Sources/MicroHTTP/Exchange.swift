/// One request's state across libmicrohttpd's calls of the access handler (its `con_cls`):
/// the body arrives in pieces; a stream or a suspended reply outlives the handler call.
/// Touched only on the connection's MHD thread.
final class Exchange {
    let handler: Handler?
    let method: HTTPMethod
    let path: String
    let parameters: [String: String]
    var body: [UInt8] = []
    /// Body bytes received so far, kept or not.
    var received = 0
    /// The body passed `bodyLimit`: the rest is read and dropped, then 413 is answered
    /// (libmicrohttpd 0.9.75 accepts a response only once the upload is complete).
    var bodyTooLarge = false
    var stream: EventStream?
    var deferred: DeferredExchange?

    init(handler: Handler?, method: HTTPMethod, path: String, parameters: [String: String]) {
        self.handler = handler
        self.method = method
        self.path = path
        self.parameters = parameters
    }
}
