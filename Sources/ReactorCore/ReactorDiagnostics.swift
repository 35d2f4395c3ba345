/// Figures about the library's own bookkeeping, for metrics and tests.
public enum ReactorDiagnostics {
    /// Reactors whose pipelines are held: live ones, plus released ones the release
    /// watcher has not swept yet (it takes a few seconds at most).
    public static var registeredReactorCount: Int { ReactorRegistry.shared.count }
}
