import ReactorStore

/// An action log entry as the API shows it:
/// `{"number":3,"cause":"action","from":4,"version":5,"action":{..},"subject":"..","idempotencyKey":"..","time":".."}`;
/// `from` is absent when it changed nothing, `origin` (an effect's action) when not known.
enum LoggedActionJSON {
    /// `oneLine`: the action without the whitespace between its tokens, for NDJSON's one entry a
    /// line (a JSON string holds no raw line break, so only the layout between tokens can). Without
    /// it, the action as sent.
    static func append(_ entry: LoggedAction, to out: inout [UInt8], oneLine: Bool = false) {
        out.append(contentsOf: #"{"number":"#.utf8)
        StateJSONEncoder.appendUnsigned(entry.number, into: &out)
        out.append(contentsOf: #","cause":""#.utf8)
        out.append(contentsOf: entry.cause.rawValue.utf8)
        out.append(UInt8(ascii: "\""))
        if let origin = entry.origin {
            out.append(contentsOf: #","origin":"#.utf8)
            StateJSONEncoder.appendUnsigned(origin, into: &out)
        }
        if let first = entry.firstVersion {
            out.append(contentsOf: #","from":"#.utf8)
            StateJSONEncoder.appendUnsigned(first, into: &out)
        }
        out.append(contentsOf: #","version":"#.utf8)
        StateJSONEncoder.appendUnsigned(entry.version, into: &out)
        if let json = entry.json {
            out.append(contentsOf: #","action":"#.utf8)
            if oneLine {
                JSONWhitespace.appendStripped(json[...], to: &out)
            } else {
                // An entry logged before the mark was dropped where the action is read may hold it.
                out.append(contentsOf: JSONScan.withoutByteOrderMark(json[...]))
            }
        }
        if let subject = entry.subject {
            out.append(contentsOf: #","subject":"#.utf8)
            StateJSONEncoder.appendString(subject, into: &out)
        }
        if let key = entry.idempotencyKey {
            out.append(contentsOf: #","idempotencyKey":"#.utf8)
            StateJSONEncoder.appendString(key, into: &out)
        }
        out.append(contentsOf: #","time":""#.utf8)
        out.append(contentsOf: RFC3339.format(entry.time).utf8)
        out.append(contentsOf: #""}"#.utf8)
    }
}
