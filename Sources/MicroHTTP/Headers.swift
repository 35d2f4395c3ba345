/// Header fields in arrival order. Names compare case-insensitively (ASCII), as HTTP says.
public struct HTTPHeaders: Sendable, Sequence {
    public typealias Element = (name: String, value: String)
    private var fields: [Element] = []

    public init() {}
    public init(_ pairs: [(String, String)]) {
        fields = pairs.map { (name: $0.0, value: $0.1) }
    }

    init(fields: [Element]) { self.fields = fields }

    /// The first value of `name`, if any.
    public subscript(name: String) -> String? {
        for field in fields where Self.sameName(field.name, name) { return field.value }
        return nil
    }

    /// Every value of `name`, in order.
    public func values(_ name: String) -> [String] {
        fields.filter { Self.sameName($0.name, name) }.map(\.value)
    }

    /// The first value of `name` and how many fields carry it, without collecting them.
    package func first(_ name: String) -> (value: String, count: Int)? {
        var found: (value: String, count: Int)?
        for field in fields where Self.sameName(field.name, name) {
            found = (found?.value ?? field.value, (found?.count ?? 0) + 1)
        }
        return found
    }

    public mutating func add(_ name: String, _ value: String) {
        fields.append((name: name, value: value))
    }

    /// Removes every field called `name`, then adds this one.
    public mutating func replace(_ name: String, _ value: String) {
        remove(name)
        add(name, value)
    }

    public mutating func remove(_ name: String) {
        fields.removeAll { Self.sameName($0.name, name) }
    }

    public var count: Int { fields.count }
    public var isEmpty: Bool { fields.isEmpty }

    public func makeIterator() -> IndexingIterator<[Element]> { fields.makeIterator() }

    /// ASCII case-insensitive equality without allocating lowercased copies.
    static func sameName(_ a: String, _ b: String) -> Bool {
        // On the bytes in place where a string has them (a native one does): zip over two
        // UTF8Views steps through their generic iterators, byte by byte.
        let compared = a.utf8.withContiguousStorageIfAvailable { x in
            b.utf8.withContiguousStorageIfAvailable { y in sameName(x, y) }
        }
        if let compared, let compared { return compared }
        return sameName(a.utf8, b.utf8)
    }

    /// The same, on bytes (a name read from the wire). A different length settles it without a
    /// byte read: most names asked for are not there.
    @inlinable
    package static func sameName(_ a: some Collection<UInt8>, _ b: some Collection<UInt8>) -> Bool {
        guard a.count == b.count else { return false }
        for (x, y) in zip(a, b) where x != y {
            let lx = (x >= 65 && x <= 90) ? x | 0x20 : x
            let ly = (y >= 65 && y <= 90) ? y | 0x20 : y
            if lx != ly { return false }
        }
        return true
    }
}
