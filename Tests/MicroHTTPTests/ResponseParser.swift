import Foundation

/// Incremental HTTP/1.1 response parser for the tests: Content-Length, chunked, or
/// close-delimited bodies.
struct ResponseParser {
    private(set) var status: Int?
    private(set) var headers: [(String, String)] = []
    private(set) var body: [UInt8] = []
    private(set) var isComplete = false
    private var buffer: [UInt8] = []
    private var position = 0
    private var chunked = false
    private var contentLength: Int?
    private var chunkRemaining: Int?   // nil: a chunk-size line is due
    private var needChunkCRLF = false
    /// A response to HEAD: the head is all there is.
    var headOnly = false

    func header(_ name: String) -> String? {
        headers.first { $0.0.lowercased() == name.lowercased() }?.1
    }
    var bodyText: String { String(decoding: body, as: UTF8.self) }

    mutating func feed(_ bytes: UnsafeRawBufferPointer) {
        buffer.append(contentsOf: bytes)
        parse()
    }
    mutating func feed(_ bytes: [UInt8]) { bytes.withUnsafeBytes { feed($0) } }

    mutating func endOfStream() {
        if status != nil && !chunked && contentLength == nil { isComplete = true }
    }

    private func find(_ pattern: [UInt8], from start: Int) -> Int? {
        buffer.withUnsafeBufferPointer { bytes -> Int? in
            guard bytes.count >= pattern.count else { return nil }
            var i = start
            outer: while i + pattern.count <= bytes.count {
                for k in 0..<pattern.count where bytes[i + k] != pattern[k] {
                    i += 1
                    continue outer
                }
                return i
            }
            return nil
        }
    }

    private mutating func parse() {
        if status == nil {
            guard let end = find([13, 10, 13, 10], from: 0) else { return }
            let head = String(decoding: buffer[0..<end], as: UTF8.self)
            var lines = head.components(separatedBy: "\r\n")
            let statusLine = lines.removeFirst().split(separator: " ")
            status = statusLine.count > 1 ? Int(statusLine[1]) : 0
            for line in lines {
                guard let colon = line.firstIndex(of: ":") else { continue }
                headers.append((String(line[..<colon]),
                                line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)))
            }
            chunked = header("Transfer-Encoding")?.lowercased().contains("chunked") ?? false
            contentLength = header("Content-Length").flatMap { Int($0) }
            position = end + 4
            if headOnly || (!chunked && contentLength == 0) { isComplete = true }
        }
        while !isComplete {
            if chunked {
                if needChunkCRLF {
                    guard buffer.count - position >= 2 else { break }
                    position += 2
                    needChunkCRLF = false
                }
                if let remaining = chunkRemaining {
                    let available = min(remaining, buffer.count - position)
                    guard available > 0 else { break }
                    body.append(contentsOf: buffer[position..<position + available])
                    position += available
                    if remaining == available {
                        chunkRemaining = nil
                        needChunkCRLF = true
                    } else {
                        chunkRemaining = remaining - available
                    }
                } else {
                    guard let lineEnd = find([13, 10], from: position) else { break }
                    let sizeText = String(decoding: buffer[position..<lineEnd], as: UTF8.self)
                        .split(separator: ";").first.map(String.init) ?? ""
                    let size = Int(sizeText.trimmingCharacters(in: .whitespaces), radix: 16) ?? 0
                    position = lineEnd + 2
                    if size == 0 { isComplete = true } else { chunkRemaining = size }
                }
            } else {
                body.append(contentsOf: buffer[position...])
                position = buffer.count
                if let contentLength, body.count >= contentLength { isComplete = true }
                break
            }
        }
        if position > 65_536 {
            buffer.removeFirst(position)
            position = 0
        }
    }
}
