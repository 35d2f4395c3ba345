import ConcurrencyPrimitives

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The file a generated admin token is written to (mode 0600, never through a symbolic link),
/// held under an exclusive `flock` while its server runs: a second server started in the same
/// folder finds it locked and leaves it alone, so the running server's token stays valid.
final class AdminTokenFile: Sendable {
    enum Failure: Error {
        /// Another running server holds the file.
        case inUse
        case cannotWrite(String)
    }

    /// Closing it releases the flock.
    private let descriptor: Locked<Int32?>

    private init(descriptor: Int32) { self.descriptor = Locked(descriptor) }

    /// Locks `path` (made if missing), then replaces what it holds with `token` and a newline.
    static func claim(_ path: String, token: String) -> Result<AdminTokenFile, Failure> {
        // No O_TRUNC: the file is emptied only once the lock is ours.
        let fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { return .failure(.cannotWrite(errorText())) }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            let failure: Failure = errno == EWOULDBLOCK ? .inUse : .cannotWrite(errorText())
            close(fd)
            return .failure(failure)
        }
        let bytes = Array((token + "\n").utf8)
        guard fchmod(fd, 0o600) == 0, ftruncate(fd, 0) == 0,
            bytes.withUnsafeBytes({ write(fd, $0.baseAddress, $0.count) }) == bytes.count
        else {
            let failure = Failure.cannotWrite(errorText())
            close(fd)
            return .failure(failure)
        }
        return .success(AdminTokenFile(descriptor: fd))
    }

    /// Unlocks the file (it stays, token and all, for whoever still reads it).
    func release() {
        descriptor.withLock { held in
            if let fd = held { close(fd) }
            held = nil
        }
    }

    deinit { release() }

    private static func errorText() -> String { String(cString: strerror(errno)) }
}
