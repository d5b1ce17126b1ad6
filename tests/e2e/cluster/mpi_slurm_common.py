"""Shared by test_mpirun.py and test_slurm.py: the tiny GPT run, its references (reference()), the
README line a test runs, and the SKIP convention (exit 77 with the reason).

W ranks with micro batch 4 (train_batch_size 4 W) on the nodes against the same W ranks on one
machine (bit for bit) and one process with W accumulation steps (losses to rounding: with 4 or more
ranks the ring all-reduce adds the W gradients in another order than accumulation does, so the
fingerprints differ in the last bits; measured: train loss 5.2418985 against 5.2418981).
"""
import json
import os
import re
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, os.path.join(REPO, "tests", "cluster"))

from netns_cluster import Cluster, Skip  # noqa: E402,F401  (re-exported for the tests)

SKIP_CODE = 77
T0 = time.time()
STEPS = 6

# my.json of the README lines: the tiny GPT of tests/cli/elastic_test.cpp, one checkpoint at the end.
TINY_CONFIG = {
    "train_micro_batch_size_per_gpu": 4,
    "xtrain": {"model": {"layers": 1, "d_model": 32, "heads": 2, "seq_len": 32}, "steps": STEPS,
               "save_interval": STEPS, "keep_checkpoints": 0, "eval_interval": 0, "eval_batches": 2,
               "generate": {"tokens": 0}, "monitor": {"peak_tflops": 1}},
}

# Each rank one thread: 4-6 ranks share this machine's cores.
RANK_ENV = {"OMP_NUM_THREADS": "1"}


def skip(reason):
    print(f"SKIP: {reason}", flush=True)
    sys.exit(SKIP_CODE)


def write_config(directory):
    path = os.path.join(directory, "my.json")
    with open(path, "w") as f:
        json.dump(TINY_CONFIG, f, indent=1)
    return path


def readme_line(prefix):
    """The README command (fenced block line) that starts with prefix, its comment removed."""
    with open(os.path.join(REPO, "README.md")) as f:
        for line in f:
            if line.startswith(prefix):
                return line.split("#", 1)[0].strip()
    raise AssertionError(f"README.md has no command line starting with '{prefix}' (the test runs it)")


def ckpt_dir(run):
    return os.path.join(run, "checkpoints", f"global_step{STEPS}")


def fingerprint(xtrain, run):
    r = subprocess.run([xtrain, "ckpt", "fingerprint", ckpt_dir(run)], capture_output=True, text=True,
                       timeout=60)
    if r.returncode != 0:
        raise AssertionError(f"xtrain ckpt fingerprint {ckpt_dir(run)} failed:\n{r.stdout}{r.stderr}")
    return r.stdout.strip()


def _clean_env():
    env = dict(os.environ, **RANK_ENV)
    for k in list(env):
        if k.startswith(("SLURM_", "OMPI_", "PMIX_")) or k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
            del env[k]
    return env


def _train(argv, what):
    r = subprocess.run(argv, capture_output=True, text=True, timeout=150, env=_clean_env())
    if r.returncode != 0:
        raise AssertionError(f"{what} failed:\n{r.stdout[-3000:]}{r.stderr[-3000:]}")


def losses(run):
    """(train loss, val loss) of the last step, from the run's metrics.jsonl."""
    found = {}
    with open(os.path.join(run, "metrics.jsonl")) as f:
        for line in f:
            row = json.loads(line)
            found.update({k: row[k] for k in ("train/loss", "val/loss") if k in row})
    return found["train/loss"], found["val/loss"]


def reference(xtrain, directory, world):
    """The two references of a `world`-rank run on the nodes:
    - `xtrain launch -N world` on this machine: the same ranks over loopback, the same Gloo ring, so
      the same sums in the same order: its checkpoint fingerprint must be equal, bit for bit;
    - one process on the global batch (world accumulation steps): the same mathematics, the W
      gradients summed in another order, so its losses must agree to rounding (1e-5 relative)."""
    config = write_config(directory)
    one = os.path.join(directory, f"one{world}")
    _train([xtrain, "train", "--config", config, "--set", f"gradient_accumulation_steps={world}",
            "--output", one], "the one-process reference")
    local = os.path.join(directory, f"local{world}")
    _train([xtrain, "launch", "-N", str(world), "--master-port", str(free_port()), "--", "train",
            "--config", config, "--output", local], f"xtrain launch -N {world} on this machine")
    return {"fingerprint": fingerprint(xtrain, local), "losses": losses(one)}


def exact_reference(xtrain, directory):
    """Where one process's sums are exactly those of 2 ranks: micro batch 1 (rank r's sample at step
    t is sample 2t + r of the global order, which is one process's micro batch r of step t), 2 ranks
    (a + b = b + a: no all-reduce order can matter), one thread everywhere (RANK_ENV). Returns the
    config (exact.json) and the fingerprint of one process accumulating 2 micro batches of 1, which
    2 nodes x 1 rank must give bit for bit."""
    config = dict(TINY_CONFIG, train_micro_batch_size_per_gpu=1)
    path = os.path.join(directory, "exact.json")
    with open(path, "w") as f:
        json.dump(config, f, indent=1)
    one = os.path.join(directory, "exact_one")
    _train([xtrain, "train", "--config", path, "--set", "gradient_accumulation_steps=2", "--output", one],
           "the one-process run of exact.json")
    return path, fingerprint(xtrain, one)


def check_exact(name, xtrain, run, want):
    got = fingerprint(xtrain, run)
    if got != want:
        raise AssertionError(f"{name}: fingerprint {got} != one process on the same global batch {want} "
                             "(micro batch 1, 2 ranks, one thread: the sums are the same)")
    print(f"ok ({time.time() - T0:.0f} s): {name}: fingerprint {got[:16]}... = one process, bit for bit", flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def check_run(name, proc_out, xtrain, run, expected, world, source):
    """The run's rank 0 says it is one of `world` ranks from `source`, it has the fingerprint of the
    same ranks on one machine and the losses of one process on the global batch."""
    if not re.search(rf"distributed: rank 0 of {world} \(local 0 of 2\) from {source}", proc_out):
        raise AssertionError(f"{name}: no 'rank 0 of {world} ... from {source}' in the log:\n{proc_out[-4000:]}")
    got = fingerprint(xtrain, run)
    if got != expected["fingerprint"]:
        raise AssertionError(f"{name}: fingerprint {got} != xtrain launch -N {world} on one machine "
                             f"{expected['fingerprint']}\n{proc_out[-4000:]}")
    for what, a, b in zip(("train loss", "val loss"), losses(run), expected["losses"]):
        if abs(a - b) > 1e-5 * abs(b):
            raise AssertionError(f"{name}: {what} {a!r} != one process on the global batch {b!r}")
    print(f"ok ({time.time() - T0:.0f} s): {name}: {world} ranks, fingerprint {got[:16]}... as on one machine, losses "
          f"{losses(run)} as one process {expected['losses']}", flush=True)


def main(body):
    """Run body(); Skip -> exit 77 with the reason, AssertionError -> exit 1 with the message."""
    try:
        body()
    except Skip as e:
        skip(str(e))
    except (AssertionError, subprocess.TimeoutExpired) as e:
        print(f"FAIL: {e}", flush=True)
        sys.exit(1)
