/// A subscription held in one word. `any Subscription` takes five (an inline buffer, its type
/// and its witness table), which pushed the small objects of every reactor's pipeline into
/// malloc's next chunk size. A subscription is a class in practice; anything else is boxed.
package struct SubscriptionRef {
    private let object: AnyObject

    package init(_ subscription: any Subscription) { object = subscription as AnyObject }

    private var subscription: any Subscription { object as! any Subscription }

    package func request(_ demand: Subscribers.Demand) { subscription.request(demand) }

    package func cancel() { subscription.cancel() }
}
