import XCTest

final class ReactorServicePlaceholderTests: XCTestCase {
    func testBuilds() { XCTAssertTrue(true) }
}
