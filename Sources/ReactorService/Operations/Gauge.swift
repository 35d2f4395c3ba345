import ConcurrencyPrimitives

/// A Prometheus gauge: a value set as it changes (or read when /metrics is).
final class Gauge: ExposedMetric {
    private let value = Locked<Double>(0)

    func set(_ newValue: Double) { value.withLock { $0 = newValue } }

    func increment(by amount: Double = 1) { value.withLock { $0 += amount } }

    func decrement(by amount: Double = 1) { value.withLock { $0 -= amount } }

    func write(name: String, labels: String, to text: inout String) {
        text += "\(name)\(ExpositionText.braced(labels)) \(ExpositionText.number(value.current))\n"
    }
}
