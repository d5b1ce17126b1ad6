#!/usr/bin/env python3
"""tools/lint_sizes.py fails on a planted over-long file and function (with file:line and rule),
ignores what only looks like a long function (a long namespace, a macro with parentheses, braces
in strings and comments), and passes on the real tree. Plain unittest (ctest: `lint_sizes_test`)."""
import os
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LINT = os.path.join(ROOT, "tools", "lint_sizes.py")


def run_lint(root, *folders):
    p = subprocess.run([sys.executable, LINT, root, *folders], capture_output=True, text=True, timeout=120)
    return p.returncode, [line for line in p.stdout.splitlines() if "finding(s)" not in line and line != "sizes OK"]


def function(name, body_lines, indent=""):
    body = "".join(f"{indent}  x += {i};\n" for i in range(body_lines))
    return f"{indent}int {name}(int x) {{\n{body}{indent}  return x;\n{indent}}}\n"


class PlantedTree(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="lint_sizes_test_")

    def tearDown(self):
        self.tmp.cleanup()

    def write(self, rel, text):
        path = os.path.join(self.tmp.name, "src", rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)

    def test_long_function_is_named_by_file_and_line(self):
        self.write("a.cpp", "// header\nnamespace n {\n" + function("short_one", 10) + function("long_one", 80) + "}\n")
        code, out = run_lint(self.tmp.name, "src")
        self.assertEqual(code, 1)
        self.assertEqual(out, ["src/a.cpp:16: [function-size] a function of 83 lines "
                               "(at most 80: split it into named steps)"])

    def test_member_function_in_a_class_counts(self):
        self.write("b.h", "struct S {\n" + function("visit", 85, indent="  ") + "};\n")
        code, out = run_lint(self.tmp.name, "src")
        self.assertEqual(code, 1)
        self.assertEqual(len(out), 1)
        self.assertIn("src/b.h:2: [function-size] a function of 88 lines", out[0])

    def test_long_file_is_named(self):
        self.write("c.cpp", "".join(function(f"f{i}", 20) for i in range(25)))
        code, out = run_lint(self.tmp.name, "src")
        self.assertEqual(code, 1)
        self.assertEqual(out, ["src/c.cpp:1: [file-size] 575 lines (at most 500: split it by responsibility)"])

    def test_what_only_looks_long_passes(self):
        text = ('#define ATTR __attribute__((target("avx2")))\n'
                "namespace n {\nnamespace {\n"
                + "".join(function(f"f{i}", 30) for i in range(5))
                + 'const char* s = "{{{{";\n/* { */\n// {\n'
                + "}  // namespace\n}  // namespace n\n")
        self.write("d.cpp", text)
        self.assertEqual(run_lint(self.tmp.name, "src"), (0, []))

    def test_real_tree_passes(self):
        self.assertEqual(run_lint(ROOT), (0, []))


if __name__ == "__main__":
    unittest.main()
