#!/usr/bin/env python3
"""Every ```swift block of README.md, made into something CI compiles.

Each block is one of these, told by an HTML comment on the line before its fence:

  (no comment)                        a whole program: a target of its own
  <!-- snippet: NAME -->              the same, named so later blocks can use it
  <!-- snippet: NAME after OTHER -->  compiled in OTHER's target: OTHER's code beside it as
                                      Context.swift, OTHER's imports put before it
  <!-- snippet: NAME test after OTHER -->  the same, as a test target (XCTest)
  <!-- snippet: file PATH -->         must equal the file PATH, which CI builds and runs
  <!-- snippet: in PATH -->           must appear, line for line, in the file PATH
  <!-- snippet: NAME in PATH -->      the same, and named so later blocks can use it

Targets are written to Tests/Fixtures/OwnServer/ReadmeSnippets/ (git-ignored), whose
Package.swift adds one target per folder there: the README's examples build in the same
package, and the same build, as the fixture server. Swift 6 mode, warnings are errors.

Usage: readme_snippets.py   (from the repository root; exits 1 on a stale file/in block)
"""
import os
import re
import shutil
import sys

README = "README.md"
OUT = "Tests/Fixtures/OwnServer/ReadmeSnippets"
MARKER = re.compile(r"<!--\s*snippet:\s*(.*?)\s*-->")


def blocks(text):
    """(line number, marker or None, code) for every ```swift block."""
    lines = text.split("\n")
    found = []
    index = 0
    while index < len(lines):
        if lines[index].strip() == "```swift":
            start = index
            marker = None
            back = start - 1
            while back >= 0 and not lines[back].strip():
                back -= 1
            if back >= 0:
                match = MARKER.fullmatch(lines[back].strip())
                marker = match.group(1) if match else None
            index += 1
            code = []
            while index < len(lines) and lines[index].strip() != "```":
                code.append(lines[index])
                index += 1
            found.append((start + 1, marker, "\n".join(code) + "\n"))
        index += 1
    return found


def imports(code):
    return [line for line in code.split("\n") if re.match(r"\s*(@testable\s+)?import\s+\w+", line)]


def target_name(name):
    return "Readme" + "".join(part.capitalize() for part in re.split(r"[^A-Za-z0-9]+", name) if part)


def main():
    with open(README) as handle:
        text = handle.read()
    os.makedirs(OUT, exist_ok=True)
    # Files are rewritten only when they change, so an unchanged README rebuilds nothing.
    wanted = {}
    named = {}
    problems = []
    written = 0
    for line, marker, code in blocks(text):
        words = (marker or "").split()
        where = f"README.md:{line}"
        for verb in ("file", "in"):
            if verb not in words:
                continue
            at = words.index(verb)
            path = words[at + 1] if at + 1 < len(words) else ""
            if not os.path.isfile(path):
                problems.append(f"{where}: '{path}' is no file")
                break
            with open(path) as handle:
                source = handle.read()
            if verb == "file" and source != code:
                problems.append(f"{where}: the block differs from {path} (copy the file into the README)")
            if verb == "in" and code not in source:
                problems.append(f"{where}: the block does not appear in {path} (copy it from there)")
            if at > 0:
                named[words[0]] = code
            break
        else:
            words = words or [f"block{line}"]
        if "file" in words or "in" in words:
            continue
        name = words[0] if words else f"block{line}"
        is_test = "test" in words[1:2]
        context = None
        if "after" in words:
            other = words[words.index("after") + 1] if words.index("after") + 1 < len(words) else ""
            if other not in named:
                problems.append(f"{where}: 'after {other}' names no earlier snippet")
                continue
            context = named[other]
        named[name] = code
        target = target_name(name) + ("Tests" if is_test else "")
        folder = os.path.join(OUT, target)
        header = f"// README.md line {line}, written by scripts/readme_snippets.py: edit the README, not this.\n"
        if context is not None:
            wanted[os.path.join(folder, "Context.swift")] = header + context
            code = "\n".join(imports(context)) + "\n" + code
        # Top-level code goes in main.swift; an @main type or a test case may not.
        has_entry = "@main" in code or is_test
        filename = "Snippet.swift" if has_entry else "main.swift"
        wanted[os.path.join(folder, filename)] = header + code
        written += 1
    for folder in os.listdir(OUT):
        if not any(path.startswith(os.path.join(OUT, folder) + os.sep) for path in wanted):
            shutil.rmtree(os.path.join(OUT, folder))
    for path, content in wanted.items():
        os.makedirs(os.path.dirname(path), exist_ok=True)
        for stale in os.listdir(os.path.dirname(path)):
            if os.path.join(os.path.dirname(path), stale) not in wanted:
                os.remove(os.path.join(os.path.dirname(path), stale))
        old = open(path).read() if os.path.exists(path) else None
        if old != content:
            with open(path, "w") as handle:
                handle.write(content)
    for problem in problems:
        print(problem)
    print(f"{written} README snippet target(s) written to {OUT}")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
