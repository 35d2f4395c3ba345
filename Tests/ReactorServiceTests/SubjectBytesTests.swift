import XCTest

@testable import ReactorService

/// Subjects, and the tokens that carry them, told apart byte for byte: "café" precomposed and
/// decomposed are equal Swift strings, but two subjects (RFC 7519 §7.3).
final class SubjectBytesTests: XCTestCase {
    private let (composed, decomposed) = ("caf\u{E9}", "cafe\u{301}")

    func testEachSubjectHasAQuotaOfItsOwn() throws {
        let quota = SubjectQuota(limit: 1)
        XCTAssertTrue(try quota.reserve(composed))
        XCTAssertTrue(try quota.reserve(decomposed), "the other subject's place is not this one's")
        quota.opened(decomposed)
        XCTAssertEqual(quota.count(composed), 1)
        XCTAssertEqual(quota.count(decomposed), 2)
    }

    func testAVerifiedTokenIsFoundByItsOwnBytesOnly() {
        let tokens = VerifiedTokens()
        tokens.insert(Principal(subject: "s"), for: "a.b.K", now: 0)
        XCTAssertEqual(tokens.principal(for: "a.b.K")?.subject, "s")
        XCTAssertNil(tokens.principal(for: "a.b.\u{212A}"), "the Kelvin sign is not the K verified")
    }
}
