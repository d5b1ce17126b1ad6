#!/usr/bin/env python3
"""Real DeepSpeed config files (tests/data/ds_configs/) through `xtrain config` and `xtrain train`.

Each file runs as published, with only these changes (SOURCES.md gives the reasons):
  - fp16 files on CPU: a copy with fp16.enabled false and bf16.enabled true (everything else kept;
    DeepSpeed reads no other fp16 key once fp16 is off);
  - paths on someone else's machine (nvme_path, monitor output_path, flops_profiler output_file)
    point into a temporary folder; xtrain runs with that folder as its working directory;
  - `--set xtrain.*` keys make the run tiny (1-layer GPT, 2 steps, 1 validation batch).
Each file's expected outcome is in expected.json: ok (trains), error (DeepSpeed rejects the file:
xtrain must too, naming the same reason) or unsupported (xtrain refuses the feature by name).
`config` and `train` must agree: both accept, or both reject with the same message.

usage: ds_config_corpus.py XTRAIN_BINARY [CORPUS_DIR] [--only SUBSTRING] [--jobs N] [--keep] [--set K=V]
"""
import argparse
import concurrent.futures
import copy
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

TINY = [
    "xtrain.model.layers=1", "xtrain.model.d_model=32", "xtrain.model.heads=2", "xtrain.model.seq_len=16",
    "xtrain.steps=2", "xtrain.eval_interval=0", "xtrain.eval_batches=1", "xtrain.save_interval=0",
    "xtrain.generate.tokens=4", "xtrain.monitor.peak_tflops=1", "xtrain.threads=1", "xtrain.log_interval=1",
]
TIMEOUT_S = 180
OUTCOMES = ("ok", "error", "unsupported")


def load_cases(corpus):
    """(label, file, variant) for every file of the corpus, checked against expected.json."""
    with open(os.path.join(corpus, "expected.json")) as f:
        expected = json.load(f)
    expected.pop("_about", None)
    files = sorted(n for n in os.listdir(corpus) if n.endswith(".json") and n != "expected.json")
    missing = [n for n in files if n not in expected]
    stale = [n for n in expected if n not in files]
    if missing or stale:
        sys.exit(f"expected.json and the folder disagree: no expectation for {missing}, no file for {stale}")
    cases = []
    for name in files:
        variants = expected[name].get("variants", [expected[name]])
        for v in variants:
            if v.get("expect") not in OUTCOMES:
                sys.exit(f"expected.json: {name}: expect must be one of {OUTCOMES}")
            if v["expect"] != "ok" and not v.get("messages"):
                sys.exit(f"expected.json: {name}: an {v['expect']} needs the messages xtrain must print")
            label = name if len(variants) == 1 else f"{name} [nvme_path {v['nvme']}]"
            cases.append((label, name, v))
    return cases


def swap_fp16_for_bf16(cfg):
    """fp16.enabled true -> false, bf16.enabled true (CPU has no fp16 training); True if swapped."""
    fp16 = cfg.get("fp16")
    if not isinstance(fp16, dict) or fp16.get("enabled") is not True:
        return False
    fp16["enabled"] = False
    bf16 = cfg.setdefault("bf16", {})
    bf16["enabled"] = True
    return True


def nvme_folder(tmp, nvme):
    """An NVMe folder in tmp that is 'existing', 'missing' (but creatable) or 'unusable' (under a file)."""
    if nvme == "unusable":
        blocker = os.path.join(tmp, "not_a_folder")
        with open(blocker, "w") as f:
            f.write("a file where the NVMe folder's parent should be\n")
        return os.path.join(blocker, "nvme")
    folder = os.path.join(tmp, "nvme", nvme)
    if nvme == "existing":
        os.makedirs(folder)
    return folder


def point_paths_into(cfg, tmp, nvme):
    """Paths of the publisher's machine -> tmp (nvme: see nvme_folder)."""
    nvme_dir = nvme_folder(tmp, nvme)
    zero = cfg.get("zero_optimization")
    if isinstance(zero, dict):
        for block in ("offload_optimizer", "offload_param"):
            if isinstance(zero.get(block), dict) and zero[block].get("nvme_path"):
                zero[block]["nvme_path"] = nvme_dir
    for monitor in ("tensorboard", "csv_monitor", "wandb"):
        if isinstance(cfg.get(monitor), dict) and cfg[monitor].get("output_path"):
            cfg[monitor]["output_path"] = os.path.join(tmp, "monitor", monitor)
    prof = cfg.get("flops_profiler")
    if isinstance(prof, dict) and prof.get("output_file"):
        prof["output_file"] = os.path.join(tmp, "flops_profile.txt")


def prepare(corpus, name, variant, tmp):
    """The file as xtrain runs it here: returns (path, notes about what was changed)."""
    with open(os.path.join(corpus, name)) as f:
        original = json.load(f)
    cfg = copy.deepcopy(original)
    notes = ["fp16->bf16"] if swap_fp16_for_bf16(cfg) else []
    point_paths_into(cfg, tmp, variant.get("nvme", "existing"))
    if cfg == original:
        return os.path.join(corpus, name), notes
    path = os.path.join(tmp, name)
    with open(path, "w") as f:
        json.dump(cfg, f, indent=2)
    return path, notes


def run(binary, args, cwd):
    """(exit code, stderr, seconds) of one xtrain command."""
    start = time.monotonic()
    try:
        p = subprocess.run([binary] + args, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, errors="replace", timeout=TIMEOUT_S)
        return p.returncode, p.stderr, time.monotonic() - start
    except subprocess.TimeoutExpired as e:
        err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
        return 124, err + f"\n(timed out after {TIMEOUT_S} s)", time.monotonic() - start
    except OSError as e:
        return 127, f"cannot run {binary}: {e}", time.monotonic() - start


def error_text(stderr):
    """Everything from the first 'error: ' line on: what the program says when it refuses."""
    lines = stderr.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("error: "):
            return "\n".join(lines[i:]).strip()
    return ""


def steps_trained(run_dir):
    """Highest step with a finite train/loss in the run's metrics.jsonl (0 if none)."""
    best = 0
    for root, _, files in os.walk(run_dir):
        if "metrics.jsonl" not in files:
            continue
        with open(os.path.join(root, "metrics.jsonl")) as f:
            for line in f:
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue
                if isinstance(rec, dict) and isinstance(rec.get("train/loss"), (int, float)):
                    best = max(best, int(rec.get("step", 0)))
    return best


def judge_ok(cfg_rc, cfg_err, train_rc, train_err, run_dir):
    if cfg_rc != 0:
        return f"config exit {cfg_rc}: {first_line(error_text(cfg_err) or cfg_err)}"
    if train_rc != 0:
        return f"train exit {train_rc}: {first_line(error_text(train_err) or train_err)}"
    steps = steps_trained(run_dir)
    if steps < 2:
        return f"train exit 0 but metrics.jsonl records step {steps}, not 2"
    return ""


def judge_refusal(variant, cfg_rc, cfg_err, train_rc, train_err):
    for what, rc, err in (("config", cfg_rc, cfg_err), ("train", train_rc, train_err)):
        if rc == 0:
            return f"{what} accepted the file (exit 0); expected a refusal naming {variant['messages']}"
        if rc >= 124 or rc < 0:
            return f"{what} exit {rc} (crash or timeout): {first_line(err[-400:])}"
        text = error_text(err)
        absent = [m for m in variant["messages"] if m not in text]
        if absent:
            return f"{what} exit {rc} without {absent} in its error: {first_line(text or err)}"
    if error_text(cfg_err) != error_text(train_err):
        return (f"config and train refuse differently: config: {first_line(error_text(cfg_err))} | "
                f"train: {first_line(error_text(train_err))}")
    return ""


def first_line(text):
    """A message on one line of the report: its lines joined, cut at 400 characters."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return " / ".join(lines)[:400] if lines else "(no message)"


def run_case(binary, corpus, case, keep, extra_sets):
    """One line of the report: (passed, text)."""
    label, name, variant = case
    tmp = tempfile.mkdtemp(prefix="ds_corpus_")
    try:
        path, notes = prepare(corpus, name, variant, tmp)
        sets = [a for kv in TINY + extra_sets for a in ("--set", kv)]
        cfg_rc, cfg_err, t1 = run(binary, ["config", "--config", path] + sets, tmp)
        run_dir = os.path.join(tmp, "run")
        train_rc, train_err, t2 = run(binary, ["train", "--config", path, "--output", run_dir] + sets, tmp)
        if variant["expect"] == "ok":
            problem = judge_ok(cfg_rc, cfg_err, train_rc, train_err, run_dir)
        else:
            problem = judge_refusal(variant, cfg_rc, cfg_err, train_rc, train_err)
        how = f"{variant['expect']}{' (' + ', '.join(notes) + ')' if notes else ''}, {t1 + t2:.1f} s"
        if problem:
            return False, f"FAIL {label}: expected {how}: {problem}"
        said = "" if variant["expect"] == "ok" else f": {first_line(error_text(train_err))}"
        return True, f"PASS {label}: {how}{said}"
    finally:
        if keep:
            print(f"  kept {tmp}", file=sys.stderr)
        else:
            shutil.rmtree(tmp, ignore_errors=True)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    default_corpus = os.path.join(here, "..", "data", "ds_configs")
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("binary")
    ap.add_argument("corpus", nargs="?", default=default_corpus)
    ap.add_argument("--only", default="", help="run the files whose name contains this")
    ap.add_argument("--jobs", type=int, default=2, help="files run at once (each xtrain uses 1 thread)")
    ap.add_argument("--keep", action="store_true", help="keep each case's temporary folder")
    ap.add_argument("--set", action="append", default=[], metavar="K=V", help="one more xtrain.* override")
    a = ap.parse_args()
    cases = [c for c in load_cases(a.corpus) if a.only in c[0]]
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="ds_corpus_bin_") as bin_dir:
        # A private copy: a rebuild during the run cannot replace the program under the test.
        binary = shutil.copy2(os.path.abspath(a.binary), os.path.join(bin_dir, "xtrain"))
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, a.jobs)) as pool:
            results = list(pool.map(lambda c: run_case(binary, a.corpus, c, a.keep, a.set), cases))
    for _, line in results:
        print(line)
    passed = sum(ok for ok, _ in results)
    print(f"{passed} passed, {len(results) - passed} failed ({len(results)} runs of "
          f"{len({c[1] for c in cases})} files, {time.monotonic() - start:.0f} s)")
    return 0 if passed == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
