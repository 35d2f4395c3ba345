import XCTest

@testable import ReactorService

/// A stream found for a session keeps it in memory until it subscribes: an unload in between
/// left a `200` stream with nothing to subscribe to, closed with an empty body.
final class SubscriberReservationTests: XCTestCase {
    func testAReservedSessionStaysInMemoryUntilItsReservationGoes() {
        let hub = EventHub(historyLength: 10, metrics: ServiceMetrics())
        var reservation = hub.reserveSubscriber()
        XCTAssertNotNil(reservation)
        XCTAssertNil(hub.idleSince, "not a candidate to make room")
        XCTAssertFalse(hub.isIdle(since: .infinity))
        XCTAssertFalse(hub.endForUnload(idleSince: .infinity), "not unloaded while a stream is on its way")
        reservation = nil  // a stream that never opened
        XCTAssertNotNil(hub.idleSince)
        XCTAssertTrue(hub.endForUnload(idleSince: .infinity))
        XCTAssertNil(hub.reserveSubscriber(), "left memory: the stream looks it up again")
    }
}
