import XCTest

final class ReactorCorePlaceholderTests: XCTestCase {
    func testBuilds() { XCTAssertTrue(true) }
}
