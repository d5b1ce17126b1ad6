#!/usr/bin/env python3
"""Token files written the way llm.c and nanoGPT write them, with numpy only (never xtrain's code),
for tests/data/token_shards_test.cpp.

llm.c (dev/data/data_common.py, write_datafile): a header of 256 int32 — [0] magic, [1] version,
[2] token count — then the tokens: magic 20240520 / version 1 / uint16 for GPT-2, magic 20240801 /
version 7 / uint32 for Llama 3. nanoGPT (data/*/prepare.py): the uint16 ids written raw with
ndarray.tofile, as train.bin and val.bin.

Token i of each file is (i * 7919 + offset) % modulus, a closed form the C++ test recomputes.

usage: gen_llmc_shards.py OUTDIR
"""
import os
import sys

import numpy as np


def tokens(n, offset, modulus):
    return (np.arange(n, dtype=np.int64) * 7919 + offset) % modulus


def write_llmc(path, toks, magic, version, dtype):
    header = np.zeros(256, dtype=np.int32)
    header[0] = magic
    header[1] = version
    header[2] = len(toks)
    with open(path, "wb") as f:
        f.write(header.tobytes())
        f.write(np.asarray(toks, dtype=dtype).tobytes())


def main():
    out = sys.argv[1]
    llmc, llama, nano = (os.path.join(out, d) for d in ("llmc", "llama", "nanogpt"))
    for d in (llmc, llama, nano):
        os.makedirs(d, exist_ok=True)
    # GPT-2 style: two train shards and one val shard, as fineweb.py names them.
    write_llmc(os.path.join(llmc, "corpus_train_000000.bin"), tokens(1000, 1, 50257), 20240520, 1, np.uint16)
    write_llmc(os.path.join(llmc, "corpus_train_000001.bin"), tokens(500, 2, 50257), 20240520, 1, np.uint16)
    write_llmc(os.path.join(llmc, "corpus_val_000000.bin"), tokens(300, 3, 50257), 20240520, 1, np.uint16)
    # Llama 3 style: uint32 tokens above 2^16.
    write_llmc(os.path.join(llama, "corpus_train_000000.bin"), tokens(800, 4, 128256), 20240801, 7, np.uint32)
    write_llmc(os.path.join(llama, "corpus_val_000000.bin"), tokens(200, 5, 128256), 20240801, 7, np.uint32)
    # nanoGPT: raw uint16.
    tokens(1200, 6, 50257).astype(np.uint16).tofile(os.path.join(nano, "train.bin"))
    tokens(400, 7, 50257).astype(np.uint16).tofile(os.path.join(nano, "val.bin"))


if __name__ == "__main__":
    main()
