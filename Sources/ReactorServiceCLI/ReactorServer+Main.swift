import ArgumentParser
import Logging
import ReactorService

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#endif

extension ReactorServer {
    /// A whole server binary in one call, with reactord's command line: parses the flags and
    /// `REACTORD_*` variables (`--help` lists them), exits 2 with a message naming a bad one,
    /// sends the log to stderr at `--log-level`, makes the server, lets `register` add the
    /// reactor kinds, and serves until SIGINT or SIGTERM.
    ///
    /// ```swift
    /// ReactorServer.main { server in
    ///     server.register("todo") { currentUser in TodoReactor(currentUser: currentUser) }
    /// }
    /// ```
    ///
    /// `register` runs once, on the calling thread, before the server starts; the factories it
    /// registers run on the server's threads (hence `register`'s `@Sendable`).
    ///
    /// - Parameters:
    ///   - arguments: the command line without the program's name; nil: the process's own.
    ///     `healthcheck` as the first argument asks a running server instead (the container's
    ///     `HEALTHCHECK`).
    ///   - register: adds the reactor kinds to the server before it starts.
    public static func main(
        arguments: [String]? = nil,
        registering register: (ReactorServer) throws -> Void
    ) -> Never {
        // `<binary> healthcheck`: the container's HEALTHCHECK, asking a running server (see Healthcheck).
        let given = negativeValuesAttached(arguments ?? Array(CommandLine.arguments.dropFirst()))
        if given.first == "healthcheck" {
            let healthcheck = parsed(Healthcheck.self, Array(given.dropFirst()))
            do { try healthcheck.run() } catch { fail(Healthcheck.self, error) }
            Healthcheck.exit()
        }
        let options = parsed(ServeCommand.self, given).options
        do {
            try options.bootstrapLogging()
            let server = ReactorServer(
                configuration: try options.configuration(),
                logger: Logger(label: ServeCommand.commandName))
            try register(server)
            try server.run()
        } catch {
            // Not a usage error (the port is taken, a kind failed to register): exit 1, as argument-parser does.
            fail(ServeCommand.self, error)
        }
        ServeCommand.exit()
    }

    /// `--option -1` as `--option=-1`: argument-parser reads a value that starts with a dash as an
    /// option of its own ("Missing value for '--option'"), so the option's check, which names
    /// what is wrong with the value, never saw it.
    static func negativeValuesAttached(_ arguments: [String]) -> [String] {
        var attached: [String] = []
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            if argument == "--" { return attached + arguments[index...] }
            if argument.hasPrefix("--"), !argument.contains("="), index + 1 < arguments.count,
                arguments[index + 1].hasPrefix("-"), Double(arguments[index + 1]) != nil
            {
                attached.append(argument + "=" + arguments[index + 1])
                index += 2
            } else {
                attached.append(argument)
                index += 1
            }
        }
        return attached
    }

    /// A bad flag, value or variable is a usage error: its message (naming it), then exit status
    /// 2, the usage convention of getopt-style tools. `--help` and the like exit as
    /// argument-parser says (0).
    private static func parsed<Command: ParsableCommand>(_ command: Command.Type, _ arguments: [String]?) -> Command {
        do {
            return try Command.parse(arguments)
        } catch {
            fail(command, error)
        }
    }

    /// Exits for `error`: 2 with its message for a usage error (one found after parsing too,
    /// say a bad `REACTORD_PORT` read by `healthcheck`), else as argument-parser does.
    private static func fail<Command: ParsableCommand>(_ command: Command.Type, _ error: any Error) -> Never {
        guard Command.exitCode(for: error) == .validationFailure else { Command.exit(withError: error) }
        LogOutput.standardError.write(Command.fullMessage(for: error) + "\n")
        LogOutput.standardError.flush()
        Glibc.exit(2)
    }
}

/// The command `ReactorServer.main` parses: reactord's options under the binary's own name.
struct ServeCommand: ParsableCommand {
    static var commandName: String {
        CommandLine.arguments.first.map { URL(fileURLWithPath: $0).lastPathComponent } ?? "reactord"
    }

    static var configuration: CommandConfiguration {
        CommandConfiguration(
            commandName: commandName,
            abstract: "Serves reactors over HTTP: sessions, actions, state and pulses as Server-Sent Events.",
            discussion: """
                Every option can also be set by the environment variable named in its help; the flag wins.
                '\(commandName) healthcheck' asks a server running on this host whether it is ready \
                (exit status 0) or not (1); '\(commandName) healthcheck --help' tells more.
                """)
    }

    @OptionGroup var options: ServerOptions
}
