#!/usr/bin/env python3
"""tools/test_namespaces.py names a test file whose top-level namespace is not <ns>::<file stem> (and
one with none), --fix rewrites the opening and the closing comment so the file then passes, other
files are left alone, and the real tree passes. Plain unittest (ctest: `test_namespaces_test`)."""
import os
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOL = os.path.join(ROOT, "tools", "test_namespaces.py")

SHARED = """#include <gtest/gtest.h>

namespace xtrain::zero {
namespace {
int make_mlp() { return 1; }
}  // namespace
TEST(Zero, One) { EXPECT_EQ(make_mlp(), 1); }
}  // namespace xtrain::zero
"""


def run(root, *flags):
    p = subprocess.run([sys.executable, TOOL, root, *flags], capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout.splitlines()


class PlantedTree(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="test_namespaces_test_")

    def tearDown(self):
        self.tmp.cleanup()

    def write(self, rel, text):
        path = os.path.join(self.tmp.name, "tests", rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
        return path

    def test_shared_namespace_is_named_with_the_expected_one(self):
        self.write("zero/parity_test.cpp", SHARED)
        code, out = run(self.tmp.name)
        self.assertEqual(code, 1)
        self.assertEqual(out, ["tests/zero/parity_test.cpp:3: namespace xtrain::zero should be xtrain::zero::parity_test"])

    def test_file_without_named_namespace_is_reported(self):
        self.write("zero/bare_test.cpp", "#include <gtest/gtest.h>\nTEST(A, B) {}\n")
        code, out = run(self.tmp.name)
        self.assertEqual(code, 1)
        self.assertEqual(len(out), 1)
        self.assertIn("tests/zero/bare_test.cpp:1: no top-level", out[0])

    def test_fix_rewrites_open_and_close_and_then_passes(self):
        path = self.write("zero/parity_test.cpp", SHARED)
        self.write("zero/helper.cpp", SHARED)  # not a *_test.cpp: untouched
        code, _ = run(self.tmp.name, "--fix")
        self.assertEqual(code, 0)
        with open(path) as f:
            text = f.read()
        self.assertIn("\nnamespace xtrain::zero::parity_test {\n", text)
        self.assertIn("\n}  // namespace xtrain::zero::parity_test\n", text)
        self.assertIn("\n}  // namespace\n", text)  # the anonymous one keeps its comment
        with open(os.path.join(self.tmp.name, "tests", "zero", "helper.cpp")) as f:
            self.assertEqual(f.read(), SHARED)
        self.assertEqual(run(self.tmp.name), (0, []))

    def test_real_tree_passes(self):
        code, out = run(ROOT)
        self.assertEqual(code, 0, "\n".join(out))


if __name__ == "__main__":
    unittest.main()
