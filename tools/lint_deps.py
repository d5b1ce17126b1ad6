#!/usr/bin/env python3
"""Dependency lint: every `#include "xtrain/<area>/..."` in src/xtrain/<area>/ must name the area
itself, an area listed in its `xtrain_area(<area> DEPS ...)` line in src/CMakeLists.txt (directly
or transitively), or any area's options.h (plain structs, layer 0). Prints each violation."""
import os
import re
import sys


def main(root):
    cmake = open(os.path.join(root, "src", "CMakeLists.txt")).read()
    deps = {}
    for m in re.finditer(r"^xtrain_area\((\w+)(?:\s+DEPS\s+([^)]*))?\)", cmake, re.M):
        deps[m.group(1)] = (m.group(2) or "").split()

    def closure(area, seen=None):
        seen = set() if seen is None else seen
        for d in deps.get(area, []):
            if d not in seen:
                seen.add(d)
                closure(d, seen)
        return seen

    include = re.compile(r'^\s*#\s*include\s+"xtrain/(\w+)/([^"]+)"', re.M)
    bad = 0
    src = os.path.join(root, "src", "xtrain")
    for area in sorted(os.listdir(src)):
        folder = os.path.join(src, area)
        if not os.path.isdir(folder):
            continue
        if area not in deps:
            print(f"lint: src/xtrain/{area}/ is not declared with xtrain_area() in src/CMakeLists.txt")
            bad += 1
            continue
        allowed = closure(area) | {area}
        for dirpath, _, files in os.walk(folder):
            for name in files:
                if not name.endswith((".h", ".cpp", ".cu", ".cuh")):
                    continue
                path = os.path.join(dirpath, name)
                text = open(path, encoding="utf-8", errors="replace").read()
                for m in include.finditer(text):
                    target, header = m.group(1), m.group(2)
                    if target in allowed or header == "options.h":
                        continue
                    line = text[: m.start()].count("\n") + 1
                    rel = os.path.relpath(path, root)
                    print(f"lint: {rel}:{line}: {area}/ may not include xtrain/{target}/{header} "
                          f"({area} depends on: {', '.join(sorted(closure(area))) or 'nothing'})")
                    bad += 1
    if bad:
        print(f"lint: {bad} violation(s)")
        return 1
    print("lint: dependencies OK")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
