#!/usr/bin/env python3
"""Node loss and elastic membership across network-namespace nodes (issue 23, part 4).

Three nodes (tests/cluster/netns_cluster.py) x 1 rank, one `xtrain launch --nnodes 2:3 --max-restarts 2`
per node, a shared --output (the NFS case), the tiny GPT with train_batch_size 12 = 2 micro x
accumulation x ranks (world 3: accumulation 2; world 2: accumulation 3).
  A. world 3 trains; once a checkpoint is committed every process of node 1's namespace is killed
     (its launcher, its rank: the machine dies). Nodes 0 and 2 must notice within seconds (the
     heartbeat, not the 300 s communication timeout), re-form at 2 nodes (node ranks dense: node 2 is node 1),
     and resume from the latest committed checkpoint T1 at world size 2, the log saying the new
     batch triple.
  B. world 2 trains; node 1's launcher is started again and waits for the next round. Once world 2
     committed a checkpoint, node 2's rank is killed (only the rank: its launcher restarts it): the
     group restarts from T2 with node 1 back, at world size 3, and finishes.
Checks: every checkpoint committed before the kill is still there, byte for byte (manifest.json with
each file's SHA-256) and loadable (`xtrain ckpt fingerprint`, `xtrain ckpt consolidate`); and the
results equal fault-free runs. Why they must match exactly: a resumed run's state is a function of
the checkpoint's bytes, the config and the world size alone (weights, Adam moments, step, the data
position re-derived for the new world size), and each step is deterministic: every rank's micro
batches and the gradient all-reduce (Gloo's ring, summation order fixed by rank order and world
size) do not depend on which machine or network holds a rank, or on when the group was restarted.
So `xtrain launch -N 2` resumed from a copy of T1 must reproduce every checkpoint the re-formed
world-2 group committed after T1 bit for bit, and `launch -N 3` from T2 the rest up to the last step.
(One process per rank, one thread each, everywhere.)

usage: node_loss.py BUILD/xtrain      Exit 77 (ctest SKIP) with the reason where namespaces cannot be made.
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "cluster"))
from netns_cluster import Cluster, Skip  # noqa: E402

STEPS, SAVE = 60, 4
NOTICE_S = 20  # the survivors must stop within this after the kill (--heartbeat-timeout 3)
TIMEOUT_S = 150
ENV = {"OMP_NUM_THREADS": "1", "XTRAIN_THREADS": "1"}


def write_config(work):
    config = {"train_micro_batch_size_per_gpu": 2, "train_batch_size": 12,
              "xtrain": {"model": {"layers": 1, "d_model": 32, "heads": 2, "seq_len": 32}, "steps": STEPS,
                         "save_interval": SAVE, "keep_checkpoints": 0, "eval_interval": 0, "eval_batches": 2,
                         "log_interval": 1000, "generate": {"tokens": 0}, "monitor": {"peak_tflops": 1}}}
    with open(os.path.join(work, "my.json"), "w") as f:
        json.dump(config, f)


def fail(msg, logs=()):
    for path in logs:
        if os.path.exists(path):
            print(f"---- {path}\n{open(path, errors='replace').read()[-6000:]}")
    sys.exit(f"FAIL: {msg}")


class Run:
    """The elastic run: its launchers, their logs, the checkpoints folder."""

    def __init__(self, c, xtrain, work):
        self.c, self.xtrain, self.work = c, xtrain, work
        self.ckpt = os.path.join(work, "run", "checkpoints")
        self.procs, self.logs = {}, {}

    def start(self, name, node):
        argv = [self.xtrain, "launch", "-N", "1", "--nnodes", "2:3", "--node-rank", str(node), "--master-addr",
                self.c.nodes[0].addr, "--heartbeat-timeout", "3", "--grace-seconds", "3", "--max-restarts", "2",
                "--", "train", "--config", "my.json", "--output", os.path.join(self.work, "run")]
        self.logs[name] = os.path.join(self.work, f"{name}.log")
        with open(self.logs[name], "w") as log:
            self.procs[name] = self.c.popen(node, argv, env=ENV, cwd=self.work, stdout=log,
                                            stderr=subprocess.STDOUT)

    def log(self, name):
        with open(self.logs[name], errors="replace") as f:
            return f.read()

    def wait_for(self, what, pred, timeout=TIMEOUT_S, alive=()):
        """Polls pred() every 20 ms; fails naming `what` on timeout or when a launcher in alive exits."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            got = pred()
            if got:
                return got
            for name in alive:
                if self.procs[name].poll() is not None:
                    fail(f"{what}: the launcher {name} exited ({self.procs[name].returncode}) first",
                         self.logs.values())
            time.sleep(0.02)
        fail(f"{what}: not within {timeout} s", self.logs.values())

    def in_log(self, name, pattern):
        return lambda: re.search(pattern, self.log(name))

    def tags(self):
        """Committed tags (a tag folder appears by rename at commit) -> step."""
        out = {}
        for name in os.listdir(self.ckpt) if os.path.isdir(self.ckpt) else []:
            m = re.fullmatch(r"global_step(\d+)", name)
            if m:
                out[name] = int(m.group(1))
        return out

    def rank_pid(self, node):
        """The `xtrain train` rank running in node's namespace (not its launcher)."""
        r = subprocess.run(["ip", "netns", "pids", self.c.nodes[node].ns], capture_output=True, text=True)
        for pid in r.stdout.split():
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    argv = f.read().split(b"\0")
            except OSError:
                continue
            if len(argv) > 1 and argv[1] == b"train":
                return int(pid)
        return None


def xtrain_out(xtrain, *args):
    r = subprocess.run([xtrain, *args], capture_output=True, text=True, timeout=120, env={**os.environ, **ENV})
    if r.returncode != 0:
        fail(f"xtrain {' '.join(args)}: {r.stdout}{r.stderr}")
    return r.stdout.strip()


def snapshot(xtrain, ckpt, tags):
    """tag -> (manifest.json bytes, fingerprint): what a later look must find unchanged."""
    out = {}
    for tag in tags:
        with open(os.path.join(ckpt, tag, "manifest.json"), "rb") as f:
            out[tag] = (f.read(), xtrain_out(xtrain, "ckpt", "fingerprint", os.path.join(ckpt, tag)))
    return out


def phase_a(run):
    """World 3 until a checkpoint is committed; node 1 dies; the survivors re-form at world 2."""
    for i in range(3):
        run.start(f"node{i}", i)
    run.wait_for("a first checkpoint at world 3", lambda: run.tags(), alive=run.procs)
    t_kill = time.time()
    run.c.kill_node(1)
    # The launcher says why it stopped its ranks (node 1's silence, or its own rank's broken
    # connection to node 1's rank), then restarts: only after every local rank is stopped.
    m = run.wait_for("restart 1 on node 0", run.in_log("node0", r"([^\n]*); the other ranks were stopped; restart 1/2 "
                                                                 r"from the latest checkpoint \((global_step(\d+))\)"),
                     alive=["node0"])
    noticed = time.time() - t_kill
    # No rank runs now (the restarted group needs seconds to start): this is what was committed.
    before = {t: s for t, s in run.tags().items() if s <= int(m.group(3))}
    print(f"node 1 killed; node 0 stopped its ranks and restarted after {noticed:.1f} s ({m.group(1).strip()}); "
          f"resuming {m.group(2)}; committed before the kill: {sorted(before, key=before.get)}", flush=True)
    if noticed > NOTICE_S:
        fail(f"the survivors noticed the lost node after {noticed:.1f} s, not within {NOTICE_S} s", run.logs.values())
    if max(before.values()) != int(m.group(3)):
        fail(f"restart 1 resumed {m.group(2)}, not the latest committed checkpoint of {sorted(before)}")
    return m.group(2), before


def phase_b(run, t1):
    """World 2 runs; node 1's launcher comes back and waits; node 2's rank dies; world 3 again."""
    run.wait_for("the re-formed group", run.in_log("node0", r"re-formed: 2 nodes \(was 3\), world size 2 \(was 3\)"),
                 alive=["node0", "node2"])
    # World 2 is frozen (SIGSTOP: its launchers keep heart-beating) while node 1's launcher starts,
    # so that it surely waits for round 2 instead of arriving after a short run has ended.
    ranks = [run.wait_for(f"node {i}'s rank at world 2", lambda i=i: run.rank_pid(i)) for i in (0, 2)]
    for pid in ranks:
        os.kill(pid, signal.SIGSTOP)
    run.start("node1-back", 1)
    run.wait_for("the returning launcher waits for round 2",
                 run.in_log("node1-back", r"joining round 2 of the run"), alive=["node1-back", "node0", "node2"])
    for pid in ranks:
        os.kill(pid, signal.SIGCONT)
    step1 = int(t1[len("global_step"):])
    newer = run.wait_for("a checkpoint committed by world 2",
                         lambda: [s for s in run.tags().values() if s > step1], alive=["node0", "node2"])
    pid = run.wait_for("node 2's rank", lambda: run.rank_pid(2))
    os.kill(pid, signal.SIGKILL)
    print(f"world 2 committed global_step{min(newer)}; node 2's rank (pid {pid}) killed", flush=True)
    m = run.wait_for("restart 2 on node 0", run.in_log("node0", r"restart 2/2 from the latest checkpoint "
                                                                 r"\((global_step(\d+))\)"), alive=["node0"])
    for name, p in run.procs.items():
        if name == "node1":
            continue
        try:
            p.wait(timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            fail(f"the launcher {name} did not finish within {TIMEOUT_S} s", run.logs.values())
        if p.returncode != 0:
            fail(f"the launcher {name} exited {p.returncode}", run.logs.values())
    return m.group(1)


def check_logs(run):
    n0, n2, back = run.log("node0"), run.log("node2"), run.log("node1-back")
    want = [
        (n0, "re-formed: 2 nodes (was 3), world size 2 (was 3), this is node 0 (was 0)"),
        (n2, "re-formed: 2 nodes (was 3), world size 2 (was 3), this is node 1 (was "),  # ranks by arrival
        (n0, "saved at data-parallel size 3 (train_batch_size 12 = 2 micro x 2 accumulation x 3); this run: "
             "data-parallel size 2 (train_batch_size 12 = 2 micro x 3 accumulation x 2)"),
        (n0, "re-formed: 3 nodes (was 2), world size 3 (was 2)"),
        (n0, "saved at data-parallel size 2 (train_batch_size 12 = 2 micro x 3 accumulation x 2); this run: "
             "data-parallel size 3 (train_batch_size 12 = 2 micro x 2 accumulation x 3)"),
        (back, "starting 1 of 3 ranks (3 nodes)"),
    ]
    for text, line in want:
        if line not in text:
            fail(f"no line saying '{line}'", run.logs.values())


def reference(c, xtrain, work, name, tag, world, port):
    """A fault-free `launch -N world` resumed from a copy of the run's `tag`, inside node 0."""
    ref = os.path.join(work, name, "checkpoints")
    os.makedirs(ref)
    shutil.copytree(os.path.join(work, "run", "checkpoints", tag), os.path.join(ref, tag))
    with open(os.path.join(ref, "latest"), "w") as f:
        f.write(tag)
    argv = [xtrain, "launch", "-N", str(world), "--master-port", str(port), "--", "train", "--config", "my.json",
            "--output", os.path.join(work, name), "--resume"]
    return c.popen(0, argv, env=ENV, cwd=work, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def tensor_digests(ckpt_dir):
    """The SHA-256 of every tensor file, from the checkpoint's manifest.json."""
    with open(os.path.join(ckpt_dir, "manifest.json")) as f:
        files = json.load(f)["files"]
    return {k: v["sha256"] for k, v in files.items() if v["kind"] == "tensors"}


def compare(xtrain, work, name, steps):
    """Each tag's tensor files byte for byte (the manifests' SHA-256s), else `ckpt fingerprint`;
    the last tag always by `ckpt fingerprint` as well (model and optimizer tensors as loaded)."""
    for step in steps:
        tag = f"global_step{step}"
        got, want = (os.path.join(work, d, "checkpoints", tag) for d in ("run", name))
        if step == steps[-1] or tensor_digests(got) != tensor_digests(want):
            a, b = xtrain_out(xtrain, "ckpt", "fingerprint", got), xtrain_out(xtrain, "ckpt", "fingerprint", want)
            if a != b:
                fail(f"{tag}: the elastic run {a} != the fault-free {name} {b}")
    print(f"{name}: {len(steps)} checkpoints (global_step{steps[0]}..{steps[-1]}) equal bit for bit", flush=True)


def main():
    xtrain = os.path.abspath(sys.argv[1])
    work = tempfile.mkdtemp(prefix="xtrain-e2e-cluster-node-loss-")
    write_config(work)
    t0 = time.time()
    try:
        with Cluster(nodes=3) as c:
            run = Run(c, xtrain, work)
            t1, before = phase_a(run)
            kept = snapshot(xtrain, run.ckpt, before)
            t2 = phase_b(run, t1)
            print(f"restart 2 resumed {t2} with node 1 back; the run finished after {time.time() - t0:.1f} s",
                  flush=True)
            check_logs(run)
            s1, s2 = int(t1[11:]), int(t2[11:])
            ref2 = reference(c, xtrain, work, "ref2", t1, 2, 29600)
            ref3 = reference(c, xtrain, work, "ref3", t2, 3, 29700)
            for name, p in (("ref2", ref2), ("ref3", ref3)):
                out, _ = p.communicate(timeout=TIMEOUT_S)
                if p.returncode != 0:
                    fail(f"the fault-free {name}: {out}")
    except Skip as e:
        print(f"SKIP: {e}")
        return 77
    with open(os.path.join(run.ckpt, "latest")) as f:
        if f.read()[:len(f"global_step{STEPS}")] != f"global_step{STEPS}":
            fail(f"latest is not global_step{STEPS}")
    if snapshot(xtrain, run.ckpt, before) != kept:
        fail(f"a checkpoint committed before the kill changed: {sorted(before)}")
    consolidated = xtrain_out(xtrain, "ckpt", "consolidate", os.path.join(run.ckpt, t1), os.path.join(work, "one"))
    print(f"every checkpoint committed before the kill is unchanged and loads; {t1} consolidates to {consolidated}",
          flush=True)
    compare(xtrain, work, "ref2", list(range(s1 + SAVE, s2 + 1, SAVE)))
    compare(xtrain, work, "ref3", list(range(s2 + SAVE, STEPS + 1, SAVE)))
    shutil.rmtree(work, ignore_errors=True)
    print(f"OK ({time.time() - t0:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
