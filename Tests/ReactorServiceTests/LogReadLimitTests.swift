import XCTest

@testable import ReactorService

final class LogReadLimitTests: XCTestCase {
    /// At most `limit` reads at once: one more is refused, until one finishes.
    func testReadsPastTheLimitAreRefusedUntilOneFinishes() {
        let limit = LogReadLimit(limit: 2)
        XCTAssertTrue(limit.start())
        XCTAssertTrue(limit.start())
        XCTAssertFalse(limit.start())
        limit.finished()
        XCTAssertTrue(limit.start())
        XCTAssertFalse(limit.start())
    }
}
