import ConcurrencyPrimitives

/// One server's metrics and their Prometheus text exposition (format 0.0.4): every family with
/// `# HELP` and `# TYPE`, families in the order first made, series in the order first made.
/// Replaces swift-prometheus, whose dependencies (swift-atomics, swift-metrics) were a large
/// part of a user's clean build for three metric kinds. Making the same name and labels twice
/// gives the same metric; a name made again as another kind is a programming error.
final class MetricsRegistry: Sendable {
    private let families = Locked<[MetricFamily]>([])

    func makeCounter(name: String, help: String, labels: [(String, String)] = []) -> Counter {
        series(name, help, .counter, labels) { Counter() }
    }

    func makeGauge(name: String, help: String, labels: [(String, String)] = []) -> Gauge {
        series(name, help, .gauge, labels) { Gauge() }
    }

    func makeDurationHistogram(
        name: String, help: String, labels: [(String, String)] = [],
        buckets: [Duration]
    ) -> DurationHistogram {
        series(name, help, .histogram, labels) { DurationHistogram(buckets: buckets) }
    }

    /// The text `GET /metrics` serves, as its bytes.
    func emitToBuffer() -> [UInt8] {
        var text = ""
        families.withLock { families in
            for family in families { family.write(to: &text) }
        }
        return Array(text.utf8)
    }

    private func series<Metric: ExposedMetric>(
        _ name: String, _ help: String, _ kind: MetricFamily.Kind,
        _ labels: [(String, String)], make: () -> Metric
    ) -> Metric {
        let labelText = ExpositionText.labels(labels)
        return families.withLock { families in
            let index =
                families.firstIndex { $0.name == name }
                ?? {
                    families.append(MetricFamily(name: name, help: help, kind: kind))
                    return families.count - 1
                }()
            precondition(
                families[index].kind == kind, "metric \(name) made as both \(families[index].kind) and \(kind)")
            if let existing = families[index].series.first(where: { $0.labels == labelText }) {
                return existing.metric as! Metric
            }
            let made = make()
            families[index].series.append((labelText, made))
            return made
        }
    }
}

/// One metric name: its help, its kind, and a series per distinct label set.
struct MetricFamily {
    enum Kind: String { case counter, gauge, histogram }

    let name: String
    let help: String
    let kind: Kind
    /// Each series' labels rendered once (`method="GET",route="/x"`, no braces), and its metric.
    var series: [(labels: String, metric: any ExposedMetric)] = []

    func write(to text: inout String) {
        text += "# HELP \(name) \(ExpositionText.help(help))\n# TYPE \(name) \(kind.rawValue)\n"
        for (labels, metric) in series { metric.write(name: name, labels: labels, to: &text) }
    }
}

/// A metric that writes its own sample lines (a histogram writes several).
protocol ExposedMetric: AnyObject, Sendable {
    func write(name: String, labels: String, to text: inout String)
}
