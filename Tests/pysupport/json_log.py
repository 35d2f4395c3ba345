"""What the Python test suites share about a reactord started with --log-format json."""
import json
import time


def wait_until_listening(process, lines, seconds=20):
    """Reads `process`'s stderr (JSON lines, each kept in `lines`) until reactord logs that it
    listens; returns its port. Kills the process and fails, with what it logged, otherwise."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        line = process.stderr.readline()
        if not line:
            break
        lines.append(line)
        record = json.loads(line)
        if record["message"] == "reactord listening":
            return int(record["fields"]["port"])
    process.kill()
    raise AssertionError("reactord did not log its port: " + "".join(lines))
