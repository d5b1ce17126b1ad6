#!/usr/bin/python3
"""Expected text for tests/base/utf8_test.cpp: crafted byte strings decoded by Python itself.

"python" is bytes.decode("utf-8", "backslashreplace") (the reference for escape_invalid_utf8);
"printable" additionally writes every control character (unicodedata category Cc) other than
'\\n' and '\\t' as \\xNN of its code point, as repr() does (the rule of printable_text).
Writes tests/reference/fixtures/utf8_escape.json: [{"name", "hex", "python", "printable"}],
strings stored UTF-8 encoded, so the C++ test compares bytes.
"""
import json
import os
import random
import unicodedata

CASES = [
    ("ascii", b"Call me Ishmael."),
    ("empty", b""),
    ("newline_tab_kept", b"a\nb\tc"),
    ("backslash_literal", b"a\\x41"),
    ("valid_2byte", "caf\u00e9 \u00ff".encode()),
    ("valid_3byte", "\u20ac \u4e2d \uffff \ufffd".encode()),
    ("valid_4byte", "\U0001F600 \U00010000 \U0010FFFF".encode()),
    ("valid_edges", "\u0080\u07ff\u0800\ud7ff\ue000".encode("utf-8", "surrogatepass")),
    ("truncated_2", b"a\xc3"),
    ("truncated_3", b"a\xe2\x82"),
    ("truncated_4", b"a\xf0\x9f\x98"),
    ("truncated_then_ascii", b"\xe2\x82A\xf0\x9fB"),
    ("truncated_then_valid", b"\xe2\x82\xe2\x82\xac"),
    ("overlong_2", b"\xc0\xaf \xc1\xbf"),
    ("overlong_3", b"\xe0\x80\xaf \xe0\x9f\xbf"),
    ("overlong_4", b"\xf0\x80\x80\xaf \xf0\x8f\xbf\xbf"),
    ("lone_continuation", b"\x80 \xbf x\x9b"),
    ("many_continuations", b"\x80\x81\x82\x83"),
    ("surrogates", b"\xed\xa0\x80 \xed\xbf\xbf \xed\xa0\xbd\xed\xb8\x80"),
    ("above_max", b"\xf4\x90\x80\x80 \xf5\x80\x80\x80 \xf8\x88\x80\x80\x80"),
    ("invalid_leads", b"\xfe\xff\xf5\xf6\xf7"),
    ("controls_c0", b"bell\x07 esc\x1b[31m cr\r bs\x08 nul\x00 del\x7f"),
    ("controls_c1", "\u0080 \u009b \u009f \u00a0".encode()),
    ("c1_raw_bytes", b"\x9b31m"),
]


def random_cases(n, seed=21):
    """Byte soup as an untrained byte-level model samples it, biased towards lead bytes."""
    rng = random.Random(seed)
    pool = list(range(256)) + [0xC2, 0xE0, 0xED, 0xF0, 0xF4, 0xE2, 0x82, 0xAC] * 8
    return [("random_%d" % i, bytes(rng.choice(pool) for _ in range(rng.randint(1, 40)))) for i in range(n)]


def printable(text):
    return "".join("\\x%02x" % ord(c) if unicodedata.category(c) == "Cc" and c not in "\n\t" else c
                   for c in text)


def main():
    out = []
    for name, raw in CASES + random_cases(40):
        decoded = raw.decode("utf-8", "backslashreplace")
        out.append({"name": name, "hex": raw.hex(), "python": decoded, "printable": printable(decoded)})
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "utf8_escape.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print("wrote", path, len(out), "cases")


if __name__ == "__main__":
    main()
