import Examples
import ReactorService
import ReactorServiceCLI

// reactord is ReactorServer.main with the bundled reactors: a user's binary gets the same
// flags, variables, logging and signals by calling it with its own.
ReactorServer.main { server in server.registerBundledReactors() }
