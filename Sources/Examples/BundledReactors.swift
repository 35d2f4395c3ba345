import ReactorService

extension ReactorServer {
    /// Registers the reactors reactord ships with; `counter` first, so it is the default.
    public func registerBundledReactors() {
        register("counter") { currentUser in CounterReactor(currentUser: currentUser) }
    }
}
