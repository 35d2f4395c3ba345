/// The client's address behind trusted proxies, from `Forwarded` (RFC 7239) or, without it,
/// `X-Forwarded-For`.
///
/// Each proxy appends the address it received the request from, so the list is read from the
/// right: the first address that is not itself a trusted proxy is the client (anything left of
/// it was written by the client and proves nothing). A list of trusted proxies only gives its
/// leftmost. An entry that is not an address (`unknown`, an obfuscated `_name`, garbage) ends
/// the walk: the nearest trusted proxy that wrote it, the peer or the entry right of it,
/// stands for the client then, so a client cannot pick the key it is counted by.
enum ForwardedClient {
    /// Only called for a peer in `trusted`. Returns `peer` when the headers name no client.
    static func resolve(peer: String, headers: HTTPHeaders, trusted: AddressRanges) -> String {
        let forwarded = headers.values("Forwarded")
        let hops =
            forwarded.isEmpty
            ? headers.values("X-Forwarded-For").flatMap { $0.split(separator: ",").map(trimmed) }
            : forwarded.flatMap { $0.split(separator: ",").compactMap(forParameter) }
        var client = peer
        for hop in hops.reversed() {
            guard let address = IPAddress(hop) else { break }
            client = hop
            if !trusted.contains(address) { break }
        }
        return client
    }

    /// The `for=` value of one `Forwarded` element, without quotes, brackets or port.
    private static func forParameter(_ element: Substring) -> String? {
        for pair in element.split(separator: ";") {
            let parts = pair.split(separator: "=", maxSplits: 1)
            guard parts.count == 2, trimmed(parts[0]).lowercased() == "for" else { continue }
            var value = Substring(trimmed(parts[1]))
            if value.hasPrefix("\""), value.hasSuffix("\""), value.count >= 2 { value = value.dropFirst().dropLast() }
            if value.hasPrefix("[") {
                // "[2001:db8::17]:4711"
                guard let close = value.firstIndex(of: "]") else { return "" }
                return String(value[value.index(after: value.startIndex)..<close])
            }
            // "192.0.2.60:8080"; a bare IPv6 address is not valid here, but has several colons
            if value.filter({ $0 == ":" }).count == 1, let colon = value.firstIndex(of: ":") {
                value = value[..<colon]
            }
            return String(value)
        }
        return ""  // an element without for=: not an address, ends the walk
    }

    private static func trimmed(_ text: Substring) -> String {
        String(text.drop { $0 == " " || $0 == "\t" }.reversed().drop { $0 == " " || $0 == "\t" }.reversed())
    }
}
