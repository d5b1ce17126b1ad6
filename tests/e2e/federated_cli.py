#!/usr/bin/env python3
"""`xtrain federated` end to end (the real program): a Dirichlet split of Fashion-MNIST over 6
clients with secure aggregation, dropout and DP writes one metrics.jsonl line per round with the
fields the README names; the contiguous split of the default GPT (Moby Dick) runs; bad flags exit 2
with a message naming the flag (the others: tests/federated/federated_test.cpp). Tiny settings
(--set): ~5 s on idle cores.
usage: federated_cli.py BUILD/xtrain SOURCE_DIR"""
import json
import os
import subprocess
import sys
import tempfile
import time

xtrain, source = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
tmp = tempfile.mkdtemp(prefix="xtrain-federated-e2e-")
env = dict(os.environ, XTRAIN_TEST="1")
env.pop("XTRAIN_SMOKE", None)
failures = []


def run(args):
    t0 = time.time()
    p = subprocess.run([xtrain, "federated"] + args, capture_output=True, text=True, env=env, cwd=tmp, timeout=120)
    print("%.1fs  xtrain federated %s" % (time.time() - t0, " ".join(args)[:100]))
    return p.returncode, p.stdout + p.stderr


def check(cond, what, output=""):
    if not cond:
        failures.append(what + ("\n" + output[-3000:] if output else ""))


tiny_mlp = ["--set", "xtrain.model.hidden=[32]", "--set", "train_batch_size=32", "--set", "xtrain.eval_batches=4"]
out_dir = os.path.join(tmp, "fed")
code, out = run(["--config", os.path.join(source, "configs", "fashion_mlp.json"), "--clients", "6", "--rounds", "3",
                 "--fraction", "0.5", "--local-steps", "2", "--split", "dirichlet:0.5", "--secure-agg",
                 "--dropout", "0.3", "--dp-clip", "1.0", "--dp-noise", "0.8", "--dp-delta", "1e-5", "--seed", "3",
                 "--output", out_dir] + tiny_mlp)
check(code == 0, "federated fashion_mlp run failed (exit %d)" % code, out)
if code == 0:
    rows = [json.loads(l) for l in open(os.path.join(out_dir, "metrics.jsonl"))]
    check(len(rows) == 3, "want 3 metrics lines, got %d" % len(rows))
    for r in rows:
        for key in ("round", "clients", "sampled", "dropped", "val_loss", "val_accuracy", "bytes_up", "bytes_down",
                    "epsilon", "max_mask_error"):
            check(key in r, "metrics.jsonl line lacks %s: %s" % (key, r))
        check(r.get("sampled") == 3, "ceil(0.5 * 6) = 3 clients sampled: %s" % r)
        check(r.get("max_mask_error", 1) < 1e-8, "masks must cancel to the fixed-point bound: %s" % r)
    check(rows[-1]["epsilon"] > rows[0]["epsilon"], "epsilon grows with rounds")
    check(os.path.getsize(os.path.join(out_dir, "model.safetensors")) > 4 * 32 * 784, "model.safetensors: the weights")
    summary = json.load(open(os.path.join(out_dir, "summary.json")))
    check(summary["rounds"] == 3 and summary["secure_agg"], "summary.json: %s" % summary)
    check("round 3/3 | clients" in out and "up " in out and "down " in out, "per-round line missing", out)
    check("no sampling amplification" in out, "the DP summary states its accounting", out)

code, out = run(["--clients", "3", "--rounds", "1", "--fraction", "1", "--local-steps", "1", "--split", "contiguous",
                 "--set", "xtrain.model.layers=1", "--set", "xtrain.model.d_model=32", "--set", "xtrain.model.heads=2",
                 "--set", "xtrain.model.seq_len=32", "--set", "train_batch_size=4", "--set", "xtrain.eval_batches=2",
                 "--set", "train_micro_batch_size_per_gpu=4",
                 "--set", "gradient_accumulation_steps=1"])
check(code == 0 and "split contiguous" in out and "round 1/1" in out, "contiguous GPT run failed (exit %d)" % code, out)

bad = [
    (["--split", "dirichlet:0.5"], "--split dirichlet needs labelled data"),  # the default config: text
    (["--fraction", "0"], "--fraction must be in (0, 1], got 0"),
    (["--split", "byclass"], "--split byclass: want iid, dirichlet:ALPHA"),
]
for extra, message in bad:
    args = ["--clients", "2", "--rounds", "1", "--fraction", "1", "--local-steps", "1",
            "--set", "xtrain.model.layers=1", "--set", "xtrain.model.d_model=32", "--set", "xtrain.model.heads=2",
            "--set", "xtrain.model.seq_len=32"]
    # a flag given twice is a CLI11 error: replace a default rather than repeat it
    for i in range(0, len(extra), 2):
        if extra[i] in args:
            args[args.index(extra[i]) + 1] = extra[i + 1]
        else:
            args += extra[i:i + 2]
    code, out = run(args)
    check(code == 2 and message in out, "%s: want exit 2 and %r, got exit %d" % (extra, message, code), out)
code, out = run(["--rounds", "1", "--fraction", "1", "--local-steps", "1"])
check(code == 2 and "--clients is required" in out, "a missing --clients: exit 2 naming it (got %d)" % code, out)

if failures:
    print("\n\n".join(failures))
    sys.exit(1)
print("federated e2e: ok (%s)" % tmp)
