import MicroHTTP
import ReactorStore

/// The history routes' documents.
enum HistoryJSON {
    static let defaultPage = 100
    static let largestPage = 1_000
    /// Bytes of actions' JSON a page holds at most (an action may be as large as the body limit),
    /// and an export.
    static let largestPageBytes = 4 << 20
    static let largestExport = 64 << 20

    /// `entries` (a page read with `limit`) cut to `largestPageBytes` of actions, at a change of
    /// version; `more`: entries may follow (the page was full, or cut).
    static func bounded(_ entries: [LoggedAction], limit: Int) -> (page: ArraySlice<LoggedAction>, more: Bool) {
        var bytes = 0
        for (index, entry) in entries.enumerated() {
            bytes += entry.json?.count ?? 0
            if bytes > largestPageBytes, index > 0, entries[index - 1].version != entry.version {
                return (entries[..<index], true)
            }
        }
        return (entries[...], entries.count >= limit)
    }

    /// `{"session":..,"actions":[..],"next":V}`: `next` (the `after` of the next page) only when
    /// more may follow.
    static func page(of session: String, _ entries: ArraySlice<LoggedAction>, more: Bool) -> [UInt8] {
        var out = Array(#"{"session":"#.utf8)
        StateJSONEncoder.appendString(session, into: &out)
        out.append(contentsOf: #","actions":["#.utf8)
        for (index, entry) in entries.enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            LoggedActionJSON.append(entry, to: &out)
        }
        out.append(UInt8(ascii: "]"))
        if more, let last = entries.last {
            out.append(contentsOf: #","next":"#.utf8)
            StateJSONEncoder.appendUnsigned(last.version, into: &out)
        }
        out.append(UInt8(ascii: "}"))
        return out
    }

    /// `{"session":..,"version":V,"state":{..}}`.
    static func state(of session: String, version: UInt64, _ json: [UInt8]) -> [UInt8] {
        var out = Array(#"{"session":"#.utf8)
        StateJSONEncoder.appendString(session, into: &out)
        out.append(contentsOf: #","version":"#.utf8)
        StateJSONEncoder.appendUnsigned(version, into: &out)
        out.append(contentsOf: #","state":"#.utf8)
        out.append(contentsOf: json)
        out.append(UInt8(ascii: "}"))
        return out
    }

    /// `{"sessions":[{"session":..,"reactor":..,"owner":..,"version":V,"createdAt":..,"lastActive":..}],"next":..}`;
    /// `timed`: the store knows when each was created and last used (the memory store does not).
    static func sessions(_ page: [SessionSummary], limit: Int, timed: Bool) -> [UInt8] {
        var out = Array(#"{"sessions":["#.utf8)
        for (index, session) in page.enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            out.append(contentsOf: #"{"session":"#.utf8)
            StateJSONEncoder.appendString(session.id, into: &out)
            out.append(contentsOf: #","reactor":"#.utf8)
            StateJSONEncoder.appendString(session.kind, into: &out)
            if let owner = session.owner {
                out.append(contentsOf: #","owner":"#.utf8)
                StateJSONEncoder.appendString(owner, into: &out)
            }
            out.append(contentsOf: #","version":"#.utf8)
            StateJSONEncoder.appendUnsigned(session.version, into: &out)
            if timed {
                out.append(contentsOf: #","createdAt":""#.utf8)
                out.append(contentsOf: RFC3339.format(session.createdAt).utf8)
                out.append(contentsOf: #"","lastActive":""#.utf8)
                out.append(contentsOf: RFC3339.format(session.lastActive).utf8)
                out.append(UInt8(ascii: "\""))
            }
            out.append(UInt8(ascii: "}"))
        }
        out.append(UInt8(ascii: "]"))
        if page.count >= limit, let last = page.last {
            out.append(contentsOf: #","next":"#.utf8)
            StateJSONEncoder.appendString(last.id, into: &out)
        }
        out.append(UInt8(ascii: "}"))
        return out
    }

    /// `status` (404, 422) for a state older than the history keeps, naming the oldest kept (`oldestVersion`).
    static func notKept(_ version: UInt64, oldest: UInt64, history: Int, status: Int) -> Response {
        var response = Response.problem(
            status: status,
            detail: "the state at version \(version) is no longer kept: the "
                + "oldest kept is version \(oldest) (--history keeps each session's newest \(history) events)")
        response.body.removeLast()  // the document's closing brace: one member more
        response.body.append(contentsOf: #","oldestVersion":"#.utf8)
        StateJSONEncoder.appendUnsigned(oldest, into: &response.body)
        response.body.append(UInt8(ascii: "}"))
        return response
    }

    static let noLog = Response.problem(
        status: 404, detail: "this server keeps no action log (--action-log 0)")
}
