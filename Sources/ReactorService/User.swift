/// The global current user: one value of the service, merged into every reactor's
/// `transform(mutation:)` the way ReactorKit's global-state pattern merges a BehaviorSubject.
public struct User: Codable, Equatable, Sendable {
    public var id: String
    public var name: String

    public init(id: String, name: String) {
        self.id = id
        self.name = name
    }
}
