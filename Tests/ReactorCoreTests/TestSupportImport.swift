// The shared raw-socket clients (Tests/Support), visible to every file of this target.
@_exported import TestSupport
