// `import ReactorCore` is all a user writes: the reactive vocabulary (AnyPublisher,
// CurrentValueSubject, AnyCancellable, ...) comes with it.
#if canImport(Combine)
@_exported import Combine
#else
@_exported import OpenCombine
#endif
