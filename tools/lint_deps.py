#!/usr/bin/env python3
"""Dependency lint: the layer table in docs/architecture.md is the architecture, and the code and the
link lines must keep to it. Checked, each violation printed as `lint: file:line: [rule] message`:

  layer          an `#include "xtrain/<area>/..."` in src/xtrain/<a>/ (or python/) names an area
                 that is not strictly below <a> in the table (a sub-levelled layer `x < y, z`
                 orders its areas too). options.h headers too, except in config/, which reads
                 every area's keys and so may include any area's options.h; that is why:
  options-plain  an options.h includes an xtrain header that is neither in base/ nor an options.h,
                 or a LibTorch header (<torch/...>, <ATen/...>, <c10/...>): plain structs only
  link           the include (not an options.h: header-only) is not in the area's
                 `xtrain_area(<a> DEPS ...)` closure in src/CMakeLists.txt, so the static library
                 would not link what the code uses
  cmake-layer    a DEPS entry names an area that the table does not put below the area
  table          a folder under src/xtrain/ (or python/) missing from the table or from
                 src/CMakeLists.txt, or a table area (not marked planned with `?`) with no folder
  examples       a file under examples/ includes what `cmake --install` does not install (anything
                 but xtrain/**/*.h and files of the example itself), or its CMake points into the tree
Usage: lint_deps.py [repository root]; exit status 1 when anything is found."""
import os
import re
import sys

SOURCE_EXT = (".h", ".cpp", ".cu", ".cuh", ".cc", ".hpp")
INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*([<"])([^">]+)[">]', re.M)
LAYER_BLOCK = re.compile(r"^```layers[ \t]*\n(.*?)^```", re.M | re.S)
LAYER_LINE = re.compile(r"^L(\d+):\s*(.*)$")
AREA_LINE = re.compile(r"^xtrain_area\(\s*(\w+)([^)]*)\)", re.M)
TORCH_HEADER = re.compile(r"^(torch|ATen|c10)/")
CONFIG_AREA = "config"  # reads every area's keys: may include any area's options.h


class Lint:
    def __init__(self, root):
        self.root = root
        self.found = []

    def report(self, path, line, rule, message):
        rel = os.path.relpath(path, self.root) + (f":{line}" if line else "/")
        self.found.append(f"lint: {rel}: [{rule}] {message}")


def read(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def line_of(text, offset):
    return text[:offset].count("\n") + 1


def includes(path):
    """(line, bracket, target) for every #include in a file."""
    text = read(path)
    return [(line_of(text, m.start()), m.group(1), m.group(2)) for m in INCLUDE.finditer(text)]


def xtrain_target(target):
    """("area", "rest/of/path.h") for "xtrain/<area>/...", else None."""
    parts = target.split("/")
    if len(parts) >= 3 and parts[0] == "xtrain":
        return parts[1], "/".join(parts[2:])
    return None


def source_files(folder):
    for dirpath, dirs, files in os.walk(folder):
        dirs.sort()
        for name in sorted(files):
            if name.endswith(SOURCE_EXT):
                yield os.path.join(dirpath, name)


# ---- the layer table ---------------------------------------------------------------------------

def parse_layers(lint, doc_path):
    """{area: (layer, sub-level)}, planned areas, and the line of each area in the document."""
    if not os.path.exists(doc_path):
        lint.report(doc_path, 1, "table", "no docs/architecture.md: the layer table lives there")
        return {}, set(), {}
    text = read(doc_path)
    block = LAYER_BLOCK.search(text)
    if not block:
        lint.report(doc_path, 1, "table", "no ```layers block (lines such as `L3: parallel < models, zero`)")
        return {}, set(), {}
    rank, planned, where = {}, set(), {}
    first = line_of(text, block.start(1))
    for i, raw in enumerate(block.group(1).splitlines()):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        m = LAYER_LINE.match(line)
        if not m:
            lint.report(doc_path, first + i, "table", f"cannot read `{raw}` (want `L<n>: a, b < c`)")
            continue
        for sub, group in enumerate(m.group(2).split("<")):
            for name in filter(None, (n.strip() for n in group.split(","))):
                area = name.rstrip("?")
                if area in rank:
                    lint.report(doc_path, first + i, "table", f"{area} appears twice in the layer table")
                rank[area] = (int(m.group(1)), sub)
                where[area] = first + i
                if name.endswith("?"):
                    planned.add(area)
    return rank, planned, where


def describe(rank, area):
    """`L3` or, in a sub-levelled layer, `L3.1` (sub-levels count from 0, left to right)."""
    layer, sub = rank[area]
    subs = {r[1] for r in rank.values() if r[0] == layer}
    return f"L{layer}.{sub}" if len(subs) > 1 else f"L{layer}"


def below(rank, area, target):
    return target == area or rank[target] < rank[area]


# ---- src/CMakeLists.txt ------------------------------------------------------------------------

def parse_cmake(path):
    """{area: [deps]} and {area: line} from the xtrain_area(<name> DEPS ... LIBS ...) lines."""
    text = read(path)
    deps, where = {}, {}
    for m in AREA_LINE.finditer(text):
        words, mode, names = m.group(2).split(), None, []
        for w in words:
            if w in ("DEPS", "LIBS"):
                mode = w
            elif mode == "DEPS":
                names.append(w)
        deps[m.group(1)] = names
        where[m.group(1)] = line_of(text, m.start())
    return deps, where


def closure(deps, area):
    seen, todo = set(), list(deps.get(area, []))
    while todo:
        d = todo.pop()
        if d not in seen:
            seen.add(d)
            todo.extend(deps.get(d, []))
    return seen


def check_cmake(lint, cmake_path, rank, deps, where):
    for area, names in deps.items():
        if area not in rank:
            continue  # reported by check_table
        for d in names:
            if d in rank and not below(rank, area, d):
                lint.report(cmake_path, where[area], "cmake-layer",
                            f"{area} ({describe(rank, area)}) links {d} ({describe(rank, d)}), "
                            f"which the layer table does not put below it")


# ---- the areas ---------------------------------------------------------------------------------

def check_table(lint, src, rank, planned, doc_where, deps, cmake_where, doc_path, cmake_path):
    folders = sorted(a for a in os.listdir(src) if os.path.isdir(os.path.join(src, a)))
    for area in folders:
        if area not in rank:
            lint.report(os.path.join(src, area), None, "table",
                        f"src/xtrain/{area}/ is not in the layer table of docs/architecture.md")
        if area not in deps:
            lint.report(os.path.join(src, area), None, "table",
                        f"src/xtrain/{area}/ is not declared with xtrain_area() in src/CMakeLists.txt")
    for area in sorted(set(deps) - set(rank)):
        lint.report(cmake_path, cmake_where[area], "table",
                    f"xtrain_area({area}) is not in the layer table of docs/architecture.md")
    for area in sorted(set(rank) - set(folders) - planned - {"python"}):
        lint.report(doc_path, doc_where[area], "table",
                    f"{area} is in the layer table but src/xtrain/{area}/ does not exist "
                    f"(mark a planned area `{area}?`)")


def check_options_plain(lint, path):
    for line, bracket, target in includes(path):
        x = xtrain_target(target)
        if x and x[0] != "base" and os.path.basename(x[1]) != "options.h":
            lint.report(path, line, "options-plain",
                        f"options.h includes {target}: an options.h is plain structs (config/ includes "
                        f"every area's) and may include only base/ and lower areas' options.h; "
                        f"move what needs {target} to another header of the area")
        elif bracket == "<" and TORCH_HEADER.match(target):
            lint.report(path, line, "options-plain",
                        f"options.h includes <{target}>: plain structs take no LibTorch types; "
                        f"move what needs it to another header of the area")


def check_file(lint, path, area, rank, allowed_links):
    """Layer and link rules for one file of `area`; allowed_links None: no link check."""
    if os.path.basename(path) == "options.h":
        check_options_plain(lint, path)
    for line, _, target in includes(path):
        x = xtrain_target(target)
        options = x is not None and os.path.basename(x[1]) == "options.h"
        if not x or x[0] == area or (options and area == CONFIG_AREA):
            continue
        other = x[0]
        if other not in rank:
            lint.report(path, line, "layer", f"{area}/ includes {target}: {other} is not in the layer table")
        elif not below(rank, area, other):
            lint.report(path, line, "layer",
                        f"{area} ({describe(rank, area)}) may not include {target}: "
                        f"{other} is {describe(rank, other)}, not below it (docs/architecture.md)"
                        + ("; only config/ reads the options of higher areas" if options else ""))
        elif allowed_links is not None and not options and other not in allowed_links:
            lint.report(path, line, "link",
                        f"{area}/ includes {target} but xtrain_area({area} DEPS ...) in src/CMakeLists.txt "
                        f"does not reach {other} (depends on: {', '.join(sorted(allowed_links)) or 'nothing'})")


def check_sources(lint, src, rank, deps):
    for area in sorted(os.listdir(src)):
        folder = os.path.join(src, area)
        if not os.path.isdir(folder) or area not in rank:
            continue
        links = closure(deps, area) if area in deps else set()
        for path in source_files(folder):
            check_file(lint, path, area, rank, links)


def check_python(lint, root, rank):
    folder = os.path.join(root, "python")
    if not os.path.isdir(folder):
        return
    if "python" not in rank:
        lint.report(folder, None, "table", "python/ is not in the layer table of docs/architecture.md")
        return
    for path in source_files(folder):
        check_file(lint, path, "python", rank, None)


# ---- examples/: built against the installed package ---------------------------------------------

def check_example_file(lint, src, top, path):
    for line, bracket, target in includes(path):
        if target.startswith("xtrain/"):
            if not target.endswith(".h") or not os.path.isfile(os.path.join(src, *target.split("/")[1:])):
                lint.report(path, line, "examples",
                            f"includes {target}: the installed package has only the xtrain/**/*.h headers")
            continue
        if bracket == "<":
            continue  # a system or third-party header
        local = os.path.normpath(os.path.join(os.path.dirname(path), target))
        if not os.path.isfile(local) or not local.startswith(top + os.sep):
            lint.report(path, line, "examples",
                        f"includes \"{target}\", which is not a file of this example nor an installed "
                        f"xtrain/ header: an example builds against the installed package only")


TREE_PATH = re.compile(r"(?:\.\./)+(?:src|tests|build|bench|tools)\b|\$\{(?:PROJECT|CMAKE)_SOURCE_DIR\}/\.\.")


def check_examples(lint, root):
    folder = os.path.join(root, "examples")
    if not os.path.isdir(folder):
        return
    src = os.path.join(root, "src", "xtrain")
    for name in sorted(os.listdir(folder)):
        top = os.path.join(folder, name)
        if not os.path.isdir(top):
            continue
        for path in source_files(top):
            check_example_file(lint, src, top, path)
        for dirpath, _, files in os.walk(top):
            for f in files:
                if f == "CMakeLists.txt" or f.endswith(".cmake"):
                    path = os.path.join(dirpath, f)
                    text = read(path)
                    for m in TREE_PATH.finditer(text):
                        lint.report(path, line_of(text, m.start()), "examples",
                                    f"`{m.group(0)}` reaches into the xtrain tree: use find_package(xtrain)")


def main(root):
    lint = Lint(root)
    doc_path = os.path.join(root, "docs", "architecture.md")
    cmake_path = os.path.join(root, "src", "CMakeLists.txt")
    src = os.path.join(root, "src", "xtrain")
    rank, planned, doc_where = parse_layers(lint, doc_path)
    deps, cmake_where = parse_cmake(cmake_path)
    if rank:
        check_table(lint, src, rank, planned, doc_where, deps, cmake_where, doc_path, cmake_path)
        check_cmake(lint, cmake_path, rank, deps, cmake_where)
        check_sources(lint, src, rank, deps)
        check_python(lint, root, rank)
    check_examples(lint, root)
    for f in lint.found:
        print(f)
    if lint.found:
        print(f"lint: {len(lint.found)} violation(s)")
        return 1
    print(f"lint: dependencies OK ({len(rank)} areas in the layer table)")
    return 0


if __name__ == "__main__":
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else here))
