import XCTest

/// Asserts that `response` is an RFC 9457 problem document with `status` whose `detail`
/// mentions each of `words`, and, given a `secret` (a session id), that the body never
/// contains it.
func assertProblem(
    _ response: TestResponse?, _ status: Int, mentions words: [String] = [],
    notContaining secret: String? = nil,
    file: StaticString = #filePath, line: UInt = #line
) {
    guard let response else { return XCTFail("no response", file: file, line: line) }
    XCTAssertEqual(response.status, status, response.text, file: file, line: line)
    XCTAssertEqual(response.header("Content-Type"), "application/problem+json", file: file, line: line)
    let problem = response.object
    XCTAssertEqual(problem["status"] as? Int, status, response.text, file: file, line: line)
    XCTAssertNotNil(problem["type"] as? String, file: file, line: line)
    XCTAssertNotNil(problem["title"] as? String, file: file, line: line)
    let detail = problem["detail"] as? String ?? ""
    for word in words {
        XCTAssertTrue(detail.contains(word), "'\(detail)' should mention '\(word)'", file: file, line: line)
    }
    if let secret {
        XCTAssertFalse(response.text.contains(secret), "a problem never echoes a session id", file: file, line: line)
    }
}
