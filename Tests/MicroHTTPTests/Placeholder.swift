import XCTest

final class MicroHTTPPlaceholderTests: XCTestCase {
    func testBuilds() { XCTAssertTrue(true) }
}
