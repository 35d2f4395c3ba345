// The shared raw-socket clients and `Locked` (Tests/Support), visible to every file of this target.
@_exported import TestSupport
