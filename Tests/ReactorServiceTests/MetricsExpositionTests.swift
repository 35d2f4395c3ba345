import Dispatch
import XCTest

@testable import ReactorService

/// The registry's text, byte for byte, in Prometheus' exposition format 0.0.4: what
/// `GET /metrics` serves and prometheus_client parses (Tests/operations parses a live server's).
final class MetricsExpositionTests: XCTestCase {
    func testFamiliesInOrderMadeWithHelpTypeAndLabelsInOrderGiven() {
        let registry = MetricsRegistry()
        let requests = registry.makeCounter(
            name: "app_requests_total", help: "Requests.",
            labels: [("method", "GET"), ("route", "/a")])
        let posts = registry.makeCounter(
            name: "app_requests_total", help: "Requests.",
            labels: [("method", "POST"), ("route", "/a")])
        let open = registry.makeGauge(name: "app_open", help: "Open now.")
        let seconds = registry.makeCounter(name: "app_cpu_seconds_total", help: "CPU.")
        requests.increment()
        requests.increment()
        posts.increment()
        open.set(3)
        seconds.increment(by: 0.25)
        // The same name and labels is the same series, not a second line.
        registry.makeCounter(
            name: "app_requests_total", help: "Requests.",
            labels: [("method", "GET"), ("route", "/a")]
        ).increment()

        XCTAssertEqual(
            String(decoding: registry.emitToBuffer(), as: UTF8.self),
            """
            # HELP app_requests_total Requests.
            # TYPE app_requests_total counter
            app_requests_total{method="GET",route="/a"} 3
            app_requests_total{method="POST",route="/a"} 1
            # HELP app_open Open now.
            # TYPE app_open gauge
            app_open 3.0
            # HELP app_cpu_seconds_total CPU.
            # TYPE app_cpu_seconds_total counter
            app_cpu_seconds_total 0.25

            """)
    }

    func testAHistogramHasCumulativeBucketsInfSumAndCount() {
        let registry = MetricsRegistry()
        let histogram = registry.makeDurationHistogram(
            name: "app_duration_seconds", help: "Time taken.", labels: [("route", "/a")],
            buckets: [.microseconds(50), .milliseconds(1), .seconds(1), .seconds(2.5)])
        histogram.recordNanoseconds(50_000)  // on a bound: in that bucket (le is <=)
        histogram.recordNanoseconds(700_000)
        histogram.recordNanoseconds(700_000)
        histogram.recordNanoseconds(3_000_000_000)  // over every bound: only in +Inf
        histogram.record(0.000_001)

        XCTAssertEqual(
            String(decoding: registry.emitToBuffer(), as: UTF8.self),
            """
            # HELP app_duration_seconds Time taken.
            # TYPE app_duration_seconds histogram
            app_duration_seconds_bucket{route="/a",le="0.00005"} 2
            app_duration_seconds_bucket{route="/a",le="0.001"} 4
            app_duration_seconds_bucket{route="/a",le="1.0"} 4
            app_duration_seconds_bucket{route="/a",le="2.5"} 4
            app_duration_seconds_bucket{route="/a",le="+Inf"} 5
            app_duration_seconds_sum{route="/a"} 3.001451
            app_duration_seconds_count{route="/a"} 5

            """)
    }

    func testAnUnlabelledHistogramAndAnEmptyOne() {
        let registry = MetricsRegistry()
        _ = registry.makeDurationHistogram(name: "lag_seconds", help: "Lag.", buckets: [.milliseconds(5)])
        XCTAssertEqual(
            String(decoding: registry.emitToBuffer(), as: UTF8.self),
            """
            # HELP lag_seconds Lag.
            # TYPE lag_seconds histogram
            lag_seconds_bucket{le="0.005"} 0
            lag_seconds_bucket{le="+Inf"} 0
            lag_seconds_sum 0.0
            lag_seconds_count 0

            """)
    }

    /// Label values escape backslash, double quote and newline; HELP escapes backslash and
    /// newline only (the format's rules), so no value can end a line or a label early.
    func testLabelValuesAndHelpAreEscaped() {
        let registry = MetricsRegistry()
        registry.makeCounter(
            name: "odd_total", help: "A \\ backslash,\na \"quoted\" line.",
            labels: [("value", "a\"b\\c\nd")]
        ).increment()
        XCTAssertEqual(
            String(decoding: registry.emitToBuffer(), as: UTF8.self),
            #"""
            # HELP odd_total A \\ backslash,\na "quoted" line.
            # TYPE odd_total counter
            odd_total{value="a\"b\\c\nd"} 1

            """#)
    }

    /// Increments come from every request thread at once: none is lost.
    func testConcurrentIncrementsAreAllCounted() {
        let registry = MetricsRegistry()
        let counter = registry.makeCounter(name: "hits_total", help: "Hits.")
        let histogram = registry.makeDurationHistogram(name: "t_seconds", help: "T.", buckets: [.milliseconds(1)])
        DispatchQueue.concurrentPerform(iterations: 8) { _ in
            for _ in 0..<10_000 {
                counter.increment()
                histogram.recordNanoseconds(1_000)
            }
        }
        let text = String(decoding: registry.emitToBuffer(), as: UTF8.self)
        XCTAssertTrue(text.contains("\nhits_total 80000\n"), text)
        XCTAssertTrue(text.contains("\nt_seconds_count 80000\n"), text)
        XCTAssertTrue(text.contains("\nt_seconds_sum 0.08\n"), text)
    }
}
