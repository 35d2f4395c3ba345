package import ConcurrencyPrimitives

/// The name ReactorService's call sites still use for the package's mutex (`Lock.make()`), once
/// ReactorCore's own lock: they move to `Mutex` with ReactorService's locks (issue 30), and this
/// file goes. ReactorCore itself uses `Mutex`.
package typealias Lock = Mutex

extension Mutex {
    /// `Mutex(recursive:)`, under its old name.
    package static func make(recursive: Bool = false) -> Mutex { Mutex(recursive: recursive) }
}
