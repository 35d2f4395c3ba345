/// The global current user: one value of the service, merged into every reactor's
/// `transform(mutation:)` the way ReactorKit's global-state pattern merges a BehaviorSubject.
public struct User: Codable, Equatable, Sendable {
    /// The user's identifier, as the admin set it with `PUT /user`.
    public var id: String
    /// The user's display name.
    public var name: String

    /// A user with this `id` and `name`.
    public init(id: String, name: String) {
        self.id = id
        self.name = name
    }
}
