#!/usr/bin/env python3
"""Every ```swift block of README.md and docs/*.md, made into something CI compiles.

A page's blocks are one program, as a reader assembles it: they are compiled together, in
page order, in one target per page (one main.swift, or Snippet.swift when the page has an
@main type), so a block that uses an earlier block's type compiles beside exactly that type.
A block that is not part of that program says so, and why, in an HTML comment on the line
before its fence:

  (no comment)                        part of the page's program
  <!-- snippet: NAME -->              the same, named so later blocks can refer to it
  <!-- snippet: [NAME] file PATH -->  must equal the file PATH (which CI builds and runs), and
                                      is part of the page's program
  <!-- snippet: [NAME] in PATH -->    must appear, line for line, in the file PATH, and is part
                                      of the page's program
  <!-- snippet: NAME instead of OTHER because REASON -->
                                      an alternative to the earlier block OTHER (a second entry
                                      point, say): compiled in a target of its own, the page's
                                      program so far with OTHER left out; later blocks do not
                                      see it
  <!-- snippet: NAME test after OTHER because REASON -->
                                      an XCTest case: a test target holding OTHER and it
  <!-- snippet: manifest -->          a Package.swift: evaluated (swift package dump-package)
                                      in a package folder beside a `reactord` folder that is
                                      this repository, and must depend on it by path
  <!-- snippet: skip because REASON -->  not compiled (say why)

`instead of`, `test after` and `skip` need a reason; an unknown word is an error, so a typo
cannot silently take a block out of the check. Targets are written to
Tests/Fixtures/OwnServer/ReadmeSnippets/ (git-ignored), whose Package.swift adds one target
per folder there: the examples build in the same package, and the same build, as the
fixture server. Swift 6 mode, warnings are errors.

Usage: readme_snippets.py   (from the repository root; exits 1 on a stale file/in block, a
manifest that does not evaluate, or a bad marker)
"""
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

OUT = "Tests/Fixtures/OwnServer/ReadmeSnippets"
MARKER = re.compile(r"<!--\s*snippet:\s*(.*?)\s*-->")
KEYWORDS = {"file", "in", "instead", "of", "test", "after", "manifest", "skip"}


def pages():
    return ["README.md"] + sorted(glob.glob("docs/*.md"))


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


def camel(text):
    return "".join(part[:1].upper() + part[1:] for part in re.split(r"[^A-Za-z0-9]+", text) if part)


def has_entry(code):
    return re.search(r"^\s*@main\b", code, re.M) is not None


class Page:
    """One page's blocks, sorted into the targets that compile them."""

    def __init__(self, path):
        self.path = path
        self.prefix = "Snippets" + camel(os.path.splitext(os.path.basename(path))[0])
        self.program = []       # (name, line, code): the page's program so far
        self.named = {}         # name -> code
        self.targets = {}       # target name -> {filename: content}
        self.problems = []

    def where(self, line):
        return f"{self.path}:{line}"

    def source(self, parts):
        return "".join(f"// {self.path} line {line}\n{code}" for _, line, code in parts)

    def header(self):
        return f"// Written by scripts/readme_snippets.py from {self.path}: edit the page, not this.\n"

    def add_program_target(self, target, parts):
        code = self.source(parts)
        filename = "Snippet.swift" if has_entry(code) else "main.swift"
        self.targets[target] = {filename: self.header() + code}

    def take(self, line, marker, code):
        text, _, reason = (marker or "").partition(" because ")
        words = text.split()
        reason = reason.strip()
        where = self.where(line)
        name = words[0] if words and words[0] not in KEYWORDS else None
        rest = words[1:] if name else words
        if name in self.named:
            self.problems.append(f"{where}: the name '{name}' is taken by an earlier block")
            return
        label = name or f"block{line}"

        def argument(word):
            at = rest.index(word)
            return rest[at + 1] if at + 1 < len(rest) else ""

        if "skip" in rest:
            if rest != ["skip"] or not reason:
                self.problems.append(f"{where}: write it as '<!-- snippet: skip because REASON -->'")
            return
        if "manifest" in rest:
            self.manifest(where, code)
            return
        if "instead" in rest:
            other = argument("of") if "of" in rest else ""
            if rest != ["instead", "of", other] or not name or not reason:
                self.problems.append(f"{where}: write it as '<!-- snippet: NAME instead of OTHER because REASON -->'")
                return
            if other not in [part[0] for part in self.program]:
                self.problems.append(f"{where}: 'instead of {other}' names no earlier block of this page's program")
                return
            parts = [part for part in self.program if part[0] != other] + [(name, line, code)]
            self.add_program_target(self.prefix + camel(name), parts)
            self.named[name] = code
            return
        if "after" in rest:
            other = argument("after")
            if rest != ["test", "after", other] or not name or not reason:
                self.problems.append(f"{where}: write it as '<!-- snippet: NAME test after OTHER because REASON -->'")
                return
            if other not in self.named:
                self.problems.append(f"{where}: 'after {other}' names no earlier block of this page")
                return
            context = self.named[other]
            target = self.prefix + camel(name) + "Tests"
            self.targets[target] = {
                "Context.swift": self.header() + context,
                "Snippet.swift": self.header() + "\n".join(imports(context)) + "\n" + f"// {self.path} line {line}\n" + code,
            }
            self.named[name] = code
            return
        for verb in ("file", "in"):
            if verb not in rest:
                continue
            path = argument(verb)
            if rest != [verb, path]:
                self.problems.append(f"{where}: write it as '<!-- snippet: [NAME] {verb} PATH -->'")
                return
            if not os.path.isfile(path):
                self.problems.append(f"{where}: '{path}' is no file")
                return
            with open(path) as handle:
                source = handle.read()
            if verb == "file" and source != code:
                self.problems.append(f"{where}: the block differs from {path} (copy the file into the page)")
            if verb == "in" and code not in source:
                self.problems.append(f"{where}: the block does not appear in {path} (copy it from there)")
            break
        else:
            if rest:
                self.problems.append(f"{where}: unknown snippet marker '{marker}'")
                return
        self.program.append((label, line, code))
        self.named[label] = code

    def manifest(self, where, code):
        """A user's Package.swift that depends on reactord by path: evaluate it beside this repository."""
        match = re.search(r'\.package\(\s*path:\s*"([^"]+)"\s*\)', code)
        if not match:
            self.problems.append(f"{where}: the manifest names no .package(path: ...)")
            return
        with tempfile.TemporaryDirectory() as folder:
            package = os.path.join(folder, "app", "UserPackage")
            os.makedirs(package)
            reactord = os.path.normpath(os.path.join(package, match.group(1)))
            os.makedirs(os.path.dirname(reactord), exist_ok=True)
            os.symlink(os.path.abspath("."), reactord)
            with open(os.path.join(package, "Package.swift"), "w") as handle:
                handle.write(code)
            run = subprocess.run(["swift", "package", "dump-package", "--package-path", package],
                                 capture_output=True, text=True)
            if run.returncode != 0:
                self.problems.append(f"{where}: the manifest does not evaluate:\n{run.stderr}{run.stdout}")
                return
            if "warning:" in run.stderr:
                self.problems.append(f"{where}: the manifest warns:\n{run.stderr}")
            dumped = json.loads(run.stdout)
            identities = {}
            for dependency in dumped.get("dependencies", []):
                for kind in dependency.values():
                    identities[kind[0]["identity"]] = os.path.realpath(kind[0].get("path") or "")
            ours = [identity for identity, path in identities.items() if path == os.path.realpath(reactord)]
            if not ours:
                self.problems.append(f"{where}: the manifest does not depend on {match.group(1)} (this repository)")
                return
            products = {product["name"] for product in self.repository_products()}
            used = []
            for target in dumped.get("targets", []):
                for dependency in target.get("dependencies", []):
                    product = dependency.get("product")
                    if not product:
                        continue
                    if product[1] not in identities:
                        self.problems.append(f"{where}: product '{product[0]}' names package '{product[1]}', which the manifest does not depend on")
                    elif product[1] == ours[0]:
                        used.append(product[0])
                        if product[0] not in products:
                            self.problems.append(f"{where}: reactord has no product '{product[0]}' (it has {', '.join(sorted(products))})")
            if not used:
                self.problems.append(f"{where}: no target of the manifest uses a product of reactord")

    @staticmethod
    def repository_products():
        run = subprocess.run(["swift", "package", "dump-package"], capture_output=True, text=True, check=True)
        return json.loads(run.stdout)["products"]

    def finish(self):
        if self.program:
            self.add_program_target(self.prefix, self.program)


def main():
    wanted = {}
    problems = []
    for path in pages():
        with open(path) as handle:
            text = handle.read()
        page = Page(path)
        for line, marker, code in blocks(text):
            page.take(line, marker, code)
        page.finish()
        problems += page.problems
        for target, files in page.targets.items():
            for filename, content in files.items():
                wanted[os.path.join(OUT, target, filename)] = content
    os.makedirs(OUT, exist_ok=True)
    # Files are rewritten only when they change, so unchanged pages rebuild nothing.
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
    targets = {os.path.dirname(path) for path in wanted}
    print(f"{len(targets)} snippet target(s) written to {OUT}")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
