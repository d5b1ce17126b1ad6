#!/usr/bin/env python3
"""Local SGD and DiLoCo against plain data parallelism at equal tokens (issue 25, part 1), on two
network-namespace "nodes" joined by a tbf-shaped link (tests/cluster/netns_cluster.py), one rank each.
Run by bench/local_sgd.sh (root: it makes namespaces).

Every run trains the same small GPT (configs/default.json with --set overrides: MODEL below) for
STEPS optimizer steps, the same batches (equal tokens), and reports, from rank 0's metrics.jsonl:
  bytes  comm/bytes at the last step: what rank 0 sent over the data-parallel group (the
         communicator's count, comm::CommStats::sent_bytes: Gloo's ring all-reduce sends 2(W-1)/W of
         the buffer per rank);
  val    val/loss of the final evaluation (after the last synchronisation: STEPS is a multiple of
         every H, so both ranks hold the same parameters);
  wall   seconds from the first to the last logged step (process start, evaluation and the end-of-run
         checkpoint excluded) and the whole launch for reference.
  usage: local_sgd.py BUILD_DIR OUT_DIR   (env STEPS=64, RATE=1gbit, ONLY="dp,avg16,...")
"""
import json
import os
import shutil
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
from multi_node import launch, set_args  # noqa: E402  (one rank per node, GLOO_SOCKET_IFNAME=eth0)
from netns_cluster import Cluster  # noqa: E402  (multi_node put tests/cluster on the path)

STEPS = int(os.environ.get("STEPS", "64"))
RATE = os.environ.get("RATE", "1gbit")
# Many parameters for little compute (seq 64, micro-batch 4): the gradient all-reduce is a visible
# part of a step on this 2-core machine.
MODEL = ["xtrain.model.layers=4", "xtrain.model.d_model=384", "xtrain.model.heads=6", "xtrain.model.seq_len=64",
         "train_micro_batch_size_per_gpu=4", "scheduler.params.warmup_num_steps=8",
         "bf16.enabled=false"]  # local SGD is fp32 only (the default recipe is bf16)
RUNS = {  # name -> xtrain.local_sgd overrides ([] = plain data parallelism)
    "dp": [],
    "avg4": ["xtrain.local_sgd.sync_every=4"],
    "avg16": ["xtrain.local_sgd.sync_every=16"],
    "diloco4": ["xtrain.local_sgd.sync_every=4", "xtrain.local_sgd.outer_optimizer.type=nesterov"],
    "diloco16": ["xtrain.local_sgd.sync_every=16", "xtrain.local_sgd.outer_optimizer.type=nesterov"],
}


def sets_for(extra):
    return ["xtrain.steps=%d" % STEPS, "xtrain.log_interval=1", "xtrain.eval_interval=0", "xtrain.eval_batches=20",
            "xtrain.save_interval=-1", "xtrain.threads=1", "xtrain.generate.tokens=0",
            "zero_optimization.stage=0"] + MODEL + extra


def measure(run_dir):
    rows = [json.loads(line) for line in open(os.path.join(run_dir, "metrics.jsonl"))]
    steps = [r for r in rows if "train/loss" in r]
    comm = [r for r in rows if "comm/bytes" in r]
    val = [r for r in rows if "val/loss" in r]
    return {"bytes": comm[-1]["comm/bytes"], "val_loss": val[-1]["val/loss"], "train_loss": steps[-1]["train/loss"],
            "train_s": steps[-1]["time"] - steps[0]["time"]}


def main(build, out):
    os.makedirs(out, exist_ok=True)
    only = [n for n in os.environ.get("ONLY", "").split(",") if n]
    print("# %s  %d cores  load %s  STEPS=%d  link %s  model %s"
          % (time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), os.cpu_count(), open("/proc/loadavg").read().split()[0],
             STEPS, RATE, " ".join(MODEL)), flush=True)
    results = {}
    with Cluster(nodes=2, rate=RATE) as c:
        for name, extra in RUNS.items():
            if only and name not in only:
                continue
            run_dir = os.path.join(out, name)
            shutil.rmtree(run_dir, ignore_errors=True)
            argv = [os.path.join(build, "xtrain"), "train"] + set_args(sets_for(extra)) + ["--output", run_dir]
            t0 = time.time()
            launch(c, 2, argv, run_dir + ".log", timeout=3600)
            r = measure(run_dir)
            r["launch_s"] = time.time() - t0
            r["load"] = open("/proc/loadavg").read().split()[0]
            results[name] = r
            print("  %-9s bytes %12.0f  val %.4f  train %.4f  wall %6.1f s (launch %6.1f s, load %s)"
                  % (name, r["bytes"], r["val_loss"], r["train_loss"], r["train_s"], r["launch_s"], r["load"]), flush=True)
    base = results.get("dp")
    print("\n| run | sync_every | outer | bytes sent (rank 0) | bytes / DP | val loss | train wall s | wall / DP |")
    print("| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: |")
    for name, r in results.items():
        h = next((e.split("=")[1] for e in RUNS[name] if "sync_every" in e), "-")
        outer = "nesterov 0.7/0.9" if "diloco" in name else ("average" if h != "-" else "-")
        rel = lambda k: "%.3f" % (r[k] / base[k]) if base else "-"  # noqa: E731
        print("| %s | %s | %s | %.0f | %s | %.4f | %.1f | %s |"
              % (name, h, outer, r["bytes"], rel("bytes"), r["val_loss"], r["train_s"], rel("train_s")))
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
