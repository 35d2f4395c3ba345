extension Duration {
    /// In seconds: the clocks, timers and stores inside count in `Double` seconds.
    var inSeconds: Double { self / .seconds(1) }
}
