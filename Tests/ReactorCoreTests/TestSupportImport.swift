// `Locked` and the rest of Tests/Support, visible to every file of this target.
@_exported import TestSupport
