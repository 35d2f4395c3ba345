import MicroHTTP

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// The benchmark server: GET /hello → {"hello":"world"} through MicroHTTP, inline on the MHD
// thread. Usage: MicroHTTPBenchmark PORT [THREADS [HEAD_TIMEOUT]] (HEAD_TIMEOUT 0: no head
// deadlines tracked, to measure what tracking them costs). Runs until SIGINT/SIGTERM.
let arguments = CommandLine.arguments
var configuration = HTTPServerConfiguration()
configuration.port = arguments.count > 1 ? UInt16(arguments[1]) ?? 8080 : 8080
configuration.threads = arguments.count > 2 ? Int(arguments[2]) ?? 1 : 1
if arguments.count > 3, let seconds = Double(arguments[3]) { configuration.headTimeout = seconds }
// The C reference's pool (reference.c: 16 KiB), so both zero the same pool per request; the
// server's own default is 8 KiB since issue 5.
configuration.connectionMemoryLimit = 16 * 1024

let body = Array(#"{"hello":"world"}"#.utf8)
var router = Router()
router.add(.GET, "/hello") { _ in .response(.json(body)) }

let server = HTTPServer(configuration: configuration, router: router)
do {
    try server.start()
} catch {
    let message = Array("MicroHTTPBenchmark: \(error)\n".utf8)
    _ = write(2, message, message.count)
    exit(1)
}
print("MicroHTTPBenchmark listening on 127.0.0.1:\(server.port)")
fflush(nil)  // every stream: Glibc's `stdout` is a global var, which Swift 6 mode refuses

var signals = sigset_t()
sigemptyset(&signals)
sigaddset(&signals, SIGINT)
sigaddset(&signals, SIGTERM)
pthread_sigmask(SIG_BLOCK, &signals, nil)
var received: Int32 = 0
sigwait(&signals, &received)
server.stop(deadline: 2)
