#!/usr/bin/env python3
"""Size lint: no C++/CUDA source file under the given folders over MAX_FILE_LINES lines, no function
body over MAX_FUNCTION_LINES (issue 20: files stay readable, functions read top to bottom).
Functions are found by brace matching after comments and literals are blanked: a `{` whose head
(the text since the previous `;`, `{` or `}`) holds a parameter list and no control keyword,
directly inside a namespace, class or the file. Lambdas count toward their enclosing function.
Usage: lint_sizes.py ROOT [FOLDER ...] (default folders: src examples). Prints file:line per finding
and exits 1 if there are any."""
import os
import re
import sys

MAX_FILE_LINES = 500
MAX_FUNCTION_LINES = 80
SUFFIXES = (".cpp", ".h", ".cu", ".cuh")
SCOPE = re.compile(r"\b(namespace|class|struct|union|enum)\b|extern\s*\"")
CONTROL = re.compile(r"\b(if|for|while|switch|catch|do|else|try)\b\s*(\(|$)")


def blank(text):
    """Preprocessor lines, comments, string and character literals replaced by nothing, keeping every newline."""
    out, i, n = [], 0, len(text)
    while i < n:
        at_line_start = i == 0 or text[i - 1] == "\n"
        if at_line_start and text[i:].lstrip(" \t").startswith("#"):  # a preprocessor line
            j = i
            while True:
                j = text.find("\n", j)
                if j < 0 or text[j - 1] != "\\":
                    break
                j += 1
            j = n if j < 0 else j
            out.append("\n" * text.count("\n", i, j))
            i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * text.count("\n", i, j))
            i = j
        elif text.startswith('R"', i) and re.match(r'R"[^()\\\s]{0,16}\(', text[i:]):
            delim = re.match(r'R"([^(]*)\(', text[i:]).group(1)
            j = text.find(")" + delim + '"', i)
            j = n if j < 0 else j + len(delim) + 2
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j
        elif text[i] in "\"'" and not (text[i] == "'" and i > 0 and text[i - 1].isalnum()):
            quote, j = text[i], i + 1
            while j < n and text[j] != quote and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(quote * 2)
            i = j + 1
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def long_functions(text):
    """(first line, lines) of each function body longer than MAX_FUNCTION_LINES."""
    code = blank(text)
    found, stack, head_start, line = [], [], 0, 1
    for i, c in enumerate(code):
        if c == "\n":
            line += 1
        elif c == "{":
            head = code[head_start:i]
            in_scope_only = all(kind == "scope" for kind, _ in stack)
            if SCOPE.search(head) and ")" not in head.split("{")[-1].split(":")[0]:
                kind = "scope"
            elif in_scope_only and ")" in head and not CONTROL.search(head.strip().split("\n")[-1]):
                kind = "function"
            else:
                kind = "block"
            stack.append((kind, line))
            head_start = i + 1
        elif c == "}":
            if stack:
                kind, start = stack.pop()
                if kind == "function" and line - start + 1 > MAX_FUNCTION_LINES:
                    found.append((start, line - start + 1))
            head_start = i + 1
        elif c == ";":
            head_start = i + 1
    return found


def main(root, folders):
    bad = 0
    for folder in folders:
        for dirpath, _, files in os.walk(os.path.join(root, folder)):
            for name in sorted(files):
                if not name.endswith(SUFFIXES):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, root)
                text = open(path, encoding="utf-8", errors="replace").read()
                lines = text.count("\n") + (0 if text.endswith("\n") else 1)
                if lines > MAX_FILE_LINES:
                    print(f"{rel}:1: [file-size] {lines} lines (at most {MAX_FILE_LINES}: split it by responsibility)")
                    bad += 1
                for start, length in long_functions(text):
                    print(f"{rel}:{start}: [function-size] a function of {length} lines "
                          f"(at most {MAX_FUNCTION_LINES}: split it into named steps)")
                    bad += 1
    if bad:
        print(f"lint_sizes: {bad} finding(s)")
        return 1
    print("sizes OK")
    return 0


if __name__ == "__main__":
    args = sys.argv[1:] or ["."]
    sys.exit(main(args[0], args[1:] or ["src", "examples"]))
