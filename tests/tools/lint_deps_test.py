#!/usr/bin/env python3
"""tools/lint_deps.py fails on planted violations and passes on the real tree. Each test copies the
repository's layer table (docs/architecture.md), src/CMakeLists.txt and src/xtrain/ into a temporary
folder, plants one kind of violation, and checks that the lint exits 1 and that what it prints beyond
the unmodified copy's output is exactly the planted findings (file:line and rule). Plain unittest, so
it runs under `python3 -m pytest` as well as on its own (ctest: `lint_deps_test`)."""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LINT = os.path.join(ROOT, "tools", "lint_deps.py")


def run_lint(root):
    p = subprocess.run([sys.executable, LINT, root], capture_output=True, text=True, timeout=120)
    return p.returncode, [line for line in p.stdout.splitlines() if "violation(s)" not in line]


class PlantedTree(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="lint_deps_test_")
        shutil.copytree(os.path.join(ROOT, "src", "xtrain"), self.path("src/xtrain"))
        shutil.copy(os.path.join(ROOT, "src", "CMakeLists.txt"), self.path("src/CMakeLists.txt"))
        os.makedirs(self.path("docs"))
        shutil.copy(os.path.join(ROOT, "docs", "architecture.md"), self.path("docs/architecture.md"))
        _, self.baseline = run_lint(self.tmp)

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def path(self, rel):
        return os.path.join(self.tmp, *rel.split("/"))

    def write(self, rel, text):
        os.makedirs(os.path.dirname(self.path(rel)), exist_ok=True)
        with open(self.path(rel), "w") as f:
            f.write(text)

    def append(self, rel, text):
        with open(self.path(rel), "a") as f:
            f.write(text)

    def lines_of(self, rel):
        with open(self.path(rel)) as f:
            return f.read().count("\n")

    def assert_finds(self, *expected):
        """The lint fails, and its new findings start with exactly `expected` ("file:line: [rule]")."""
        code, out = run_lint(self.tmp)
        new = [line for line in out if line not in self.baseline]
        self.assertEqual(code, 1, "\n".join(out))
        self.assertEqual(len(new), len(expected), "\n".join(new))
        for want in expected:
            self.assertTrue(any(line.startswith("lint: " + want) for line in new),
                            f"missing `{want}` in:\n" + "\n".join(new))
        return new

    def test_lower_area_including_a_higher_one(self):
        self.write("src/xtrain/comm/x.h", '#pragma once\n\n#include "xtrain/engine/engine.h"\n')
        new = self.assert_finds("src/xtrain/comm/x.h:3: [layer]")
        self.assertIn("comm (L2.0) may not include xtrain/engine/engine.h", new[0])

    def test_sub_levels_order_one_layer(self):
        # L3: parallel < models, zero < compress. Same sub-level, and upwards, are refused.
        self.write("src/xtrain/models/z.h", '#include "xtrain/zero/strategy.h"\n')
        self.write("src/xtrain/parallel/z.cpp", '// x\n#include "xtrain/models/gpt.h"\n')
        self.assert_finds("src/xtrain/models/z.h:1: [layer]", "src/xtrain/parallel/z.cpp:2: [layer]")

    def test_sub_levels_allow_the_lower_one(self):
        self.write("src/xtrain/compress/ok.cpp", '#include "xtrain/models/gpt.h"\n#include "xtrain/nn/block.h"\n')
        code, out = run_lint(self.tmp)
        self.assertEqual([line for line in out if line not in self.baseline], [])

    def test_options_header_that_is_not_plain(self):
        n = self.lines_of("src/xtrain/optim/options.h")
        self.append("src/xtrain/optim/options.h",
                    '#include "xtrain/optim/optimizer.h"\n#include <ATen/core/Tensor.h>\n#include "xtrain/base/error.h"\n')
        self.assert_finds(f"src/xtrain/optim/options.h:{n + 1}: [options-plain]",
                          f"src/xtrain/optim/options.h:{n + 2}: [options-plain]")

    def test_only_config_reads_higher_options(self):
        # config/ (L1) reads every area's keys; nn/ (L2) may not reach up to models/options.h.
        self.write("src/xtrain/config/t.h", '#include "xtrain/engine/options.h"\n')
        self.write("src/xtrain/nn/t.h", '#include "xtrain/nn/options.h"\n#include "xtrain/models/options.h"\n')
        new = self.assert_finds("src/xtrain/nn/t.h:2: [layer]")
        self.assertIn("only config/ reads the options of higher areas", new[0])

    def test_include_the_link_line_does_not_reach(self):
        # topology is L1, below precision (L2), but precision's DEPS are `base` only.
        self.write("src/xtrain/precision/p.cpp", '#include "xtrain/topology/process_grid.h"\n')
        self.assert_finds("src/xtrain/precision/p.cpp:1: [link]")

    def test_link_line_against_the_table(self):
        cmake = self.path("src/CMakeLists.txt")
        with open(cmake) as f:
            text = f.read()
        old = "xtrain_area(comm       DEPS base topology"
        self.assertIn(old, text)
        with open(cmake, "w") as f:
            f.write(text.replace(old, old + " engine"))
        line = text[: text.index(old)].count("\n") + 1
        new = self.assert_finds(f"src/CMakeLists.txt:{line}: [cmake-layer]")
        self.assertIn("comm (L2.0) links engine (L4)", new[0])

    def test_area_missing_from_table_and_cmake(self):
        self.write("src/xtrain/newarea/a.h", "#pragma once\n")
        self.assert_finds("src/xtrain/newarea/: [table]", "src/xtrain/newarea/: [table]")

    def test_python_layer(self):
        self.write("python/module.cpp", '#include "xtrain/engine/engine.h"\n#include "xtrain/cli/commands.h"\n')
        self.assert_finds("python/module.cpp:2: [layer]")

    def test_examples_use_installed_headers_only(self):
        self.write("examples/demo/local.h", "#pragma once\n")
        self.write("examples/demo/main.cpp",
                   '#include <vector>\n#include "local.h"\n#include "xtrain/base/error.h"\n'
                   '#include "support/fixtures.h"\n#include "xtrain/engine/trainer.cpp"\n')
        self.write("examples/demo/CMakeLists.txt", "include_directories(../../src)\n")
        self.assert_finds("examples/demo/main.cpp:4: [examples]", "examples/demo/main.cpp:5: [examples]",
                          "examples/demo/CMakeLists.txt:1: [examples]")


class RealTree(unittest.TestCase):
    def test_passes(self):
        code, out = run_lint(ROOT)
        self.assertEqual(code, 0, "\n".join(out))


if __name__ == "__main__":
    unittest.main()
