import ConcurrencyPrimitives

/// A Prometheus counter: only goes up. Whole increments are kept as an integer (and shown as
/// one, `3`); fractional ones (CPU seconds) separately, so counting requests never rounds.
final class Counter: ExposedMetric {
    private let value = Locked<(whole: Int64, fraction: Double)>((0, 0))

    func increment(by amount: Int64 = 1) {
        precondition(amount >= 0, "a counter only goes up")
        value.withLock { $0.whole += amount }
    }

    func increment(by amount: Double) {
        precondition(amount >= 0, "a counter only goes up")
        value.withLock { $0.fraction += amount }
    }

    func write(name: String, labels: String, to text: inout String) {
        let (whole, fraction) = value.current
        let shown = fraction == 0 ? String(whole) : ExpositionText.number(Double(whole) + fraction)
        text += "\(name)\(ExpositionText.braced(labels)) \(shown)\n"
    }
}
