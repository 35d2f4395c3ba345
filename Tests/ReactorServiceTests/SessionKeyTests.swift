import XCTest

@testable import ReactorService

/// Session ids are kept as their 128 bits; the text form must round-trip exactly.
final class SessionKeyTests: XCTestCase {
    func testRoundTripsThroughItsText() throws {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<2_000 {
            let key = SessionKey(high: generator.next(), low: generator.next())
            let text = key.string
            XCTAssertEqual(text.utf8.count, 22)
            XCTAssertTrue(SessionID.isWellFormed(text), text)
            XCTAssertEqual(SessionKey(text), key, text)
        }
        for key in [SessionKey(high: 0, low: 0), SessionKey(high: .max, low: .max), SessionKey(high: 1, low: 1 << 63)] {
            XCTAssertEqual(SessionKey(key.string), key)
        }
        XCTAssertEqual(SessionKey(high: 0, low: 0).string, "AAAAAAAAAAAAAAAAAAAAAA")
        XCTAssertEqual(SessionKey(high: .max, low: .max).string, "_____________________w")
    }

    func testRejectsWhatWasNeverIssued() {
        XCTAssertNil(SessionKey(""))
        XCTAssertNil(SessionKey("AAAAAAAAAAAAAAAAAAAAA"))  // 21
        XCTAssertNil(SessionKey("AAAAAAAAAAAAAAAAAAAAAAA"))  // 23
        XCTAssertNil(SessionKey("AAAAAAAAAAAAAAAAAAAAA="))  // not base64url
        XCTAssertNil(SessionKey("AAAAAAAAAAAAAAAAAAAAAB"))  // low 4 bits of the last set
        XCTAssertNil(SessionKey("AAAAAAAAAAAAAAAAAAAAAé"))
        XCTAssertNotNil(SessionKey("AAAAAAAAAAAAAAAAAAAAAQ"))  // last character's 2 data bits
    }
}
