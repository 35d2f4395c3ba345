import ConcurrencyPrimitives

/// A Prometheus histogram of durations with fixed upper bounds: `_bucket` lines (cumulative,
/// `le` in seconds, then `+Inf`), `_sum` in seconds and `_count`. Kept in nanoseconds, so the
/// sum is exact; recording takes one lock and allocates nothing.
final class DurationHistogram: ExposedMetric {
    private let bounds: [Int64]
    private let boundTexts: [String]
    /// Per bucket, the observations that fell in it alone (not cumulative); the last is over
    /// every bound. Summed up when written.
    private let state: Locked<(counts: [Int64], sum: Int64)>

    init(buckets: [Duration]) {
        bounds = buckets.map(Self.nanoseconds).sorted()
        boundTexts = bounds.map(ExpositionText.seconds)
        state = Locked((Array(repeating: 0, count: bounds.count + 1), 0))
    }

    func recordNanoseconds(_ nanoseconds: Int64) {
        let index = bounds.firstIndex { nanoseconds <= $0 } ?? bounds.count
        state.withLock { state in
            state.counts[index] += 1
            state.sum &+= nanoseconds
        }
    }

    func record(_ seconds: Double) { recordNanoseconds(Int64(seconds * 1e9)) }

    func write(name: String, labels: String, to text: inout String) {
        let (counts, sum) = state.current
        let prefix = labels.isEmpty ? "" : labels + ","
        var cumulative: Int64 = 0
        for (index, count) in counts.enumerated() {
            cumulative += count
            let bound = index < boundTexts.count ? boundTexts[index] : "+Inf"
            text += "\(name)_bucket{\(prefix)le=\"\(bound)\"} \(cumulative)\n"
        }
        text += "\(name)_sum\(ExpositionText.braced(labels)) \(ExpositionText.seconds(sum))\n"
        text += "\(name)_count\(ExpositionText.braced(labels)) \(cumulative)\n"
    }

    private static func nanoseconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }
}
