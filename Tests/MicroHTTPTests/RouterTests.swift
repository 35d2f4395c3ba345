import XCTest

@testable import MicroHTTP

/// Path matching on its own, without a server: segments split on "/" bytes, a trailing slash
/// significant, an empty segment never a parameter, any UTF-8 in a parameter kept whole.
final class RouterTests: XCTestCase {
    private func router() -> Router {
        var router = Router()
        let ok: Handler = { _ in .response(.text("ok")) }
        router.add(.GET, "/", ok)
        router.add(.GET, "/items/{id}", ok)
        router.add(.GET, "/items/{id}/parts/{part}", ok)
        router.add(.GET, "/items/new", ok)
        router.add(.POST, "/items/{id}/", ok)
        return router
    }

    private func parameters(_ path: String, _ method: HTTPMethod = .GET) -> [String: String]? {
        guard case let .found(_, parameters) = router().resolve(method, path) else { return nil }
        return parameters
    }

    func testParametersAreTheSegmentsBetweenSlashes() {
        XCTAssertEqual(parameters("/items/1/parts/2"), ["id": "1", "part": "2"])
        XCTAssertEqual(parameters("/items/abc-DEF_1"), ["id": "abc-DEF_1"])
        XCTAssertEqual(parameters("/"), [:])
        XCTAssertEqual(parameters("/items/new"), [:], "the literal route wins over {id}")
    }

    func testATrailingSlashIsItsOwnRoute() {
        XCTAssertNil(parameters("/items/1/"), "GET /items/{id}/ is not a route")
        XCTAssertEqual(parameters("/items/1/", .POST), ["id": "1"])
        guard case let .methodNotAllowed(allow) = router().resolve(.POST, "/items/1") else {
            return XCTFail("POST /items/1 is GET's route without its slash: 405")
        }
        XCTAssertEqual(allow, [.GET, .HEAD])
    }

    func testAnEmptySegmentIsNoParameter() {
        XCTAssertNil(parameters("/items//parts/2"))
        XCTAssertNil(parameters("/items/"))
        XCTAssertNil(parameters("//"))
    }

    func testAParameterKeepsItsUTF8Whole() {
        // "é" written as e + combining accent: splitting by bytes must not cut the cluster apart.
        XCTAssertEqual(parameters("/items/e\u{301}✓/parts/日本"), ["id": "e\u{301}✓", "part": "日本"])
        // A combining mark right after a slash makes one Character with it; the path is still
        // cut at the slash, as its bytes say.
        XCTAssertEqual(parameters("/items/\u{301}"), ["id": "\u{301}"])
    }
}
