#!/usr/bin/env python3
"""The test binary compiles each area's tests/<area>/**/*_test.cpp as one unity translation unit
(tests/CMakeLists.txt), so two test files of an area share one anonymous namespace: helpers named
alike (`make_mlp`, `kSteps`, `read`) would collide, and a using-declaration would leak into the next
file. The rule that prevents it: every test file opens its top-level namespace as
`<enclosing>::<file stem>` (tests/zero/zero_parity_test.cpp: `namespace xtrain::zero_parity_test {`),
so its helpers live in a namespace no other file shares and still see the enclosing one's names.

Usage: test_namespaces.py ROOT          prints file:line for each test file that breaks the rule, exit 1
       test_namespaces.py ROOT --fix    rewrites those files' top-level namespace lines in place"""
import os
import re
import sys

OPEN = re.compile(r"^namespace ([A-Za-z_][A-Za-z0-9_:]*) \{(.*)$")
CLOSE = re.compile(r"^\}(\s*//\s*namespace\s+)([A-Za-z_][A-Za-z0-9_:]*)\s*$")


def test_files(root):
    for folder, _, files in os.walk(os.path.join(root, "tests")):
        for name in sorted(files):
            if name.endswith("_test.cpp"):
                yield os.path.join(folder, name)


def findings(path):
    """(line number, why) for each top-level namespace line of `path` that is not `<ns>::<stem>`,
    and one finding when the file has no top-level named namespace at all."""
    stem = os.path.basename(path)[: -len(".cpp")]
    out, seen = [], False
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            m = OPEN.match(line)
            if m:
                seen = True
                if m.group(1).split("::")[-1] != stem:
                    out.append((number, f"namespace {m.group(1)} should be {m.group(1)}::{stem}"))
    if not seen:
        out.append((1, f"no top-level `namespace <ns>::{stem} {{` (the helpers would share the unity TU's namespace)"))
    return out


def fix(path):
    stem = os.path.basename(path)[: -len(".cpp")]
    with open(path, encoding="utf-8") as f:
        lines = f.readlines()
    renamed = {}
    for i, line in enumerate(lines):
        m = OPEN.match(line)
        if m and m.group(1).split("::")[-1] != stem:
            renamed[m.group(1)] = f"{m.group(1)}::{stem}"
            lines[i] = f"namespace {renamed[m.group(1)]} {{{m.group(2)}\n"
        c = CLOSE.match(line)
        if c and c.group(2) in renamed:
            lines[i] = f"}}{c.group(1)}{renamed[c.group(2)]}\n"
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(lines)


def main(argv):
    if len(argv) < 2:
        print(__doc__)
        return 2
    root, fixing = argv[1], "--fix" in argv[2:]
    bad = 0
    for path in test_files(root):
        found = findings(path)
        if found and fixing:
            fix(path)
            found = findings(path)
        for number, why in found:
            print(f"{os.path.relpath(path, root)}:{number}: {why}")
            bad += 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
