#!/usr/bin/env python3
"""Multi-node launch paths, run for real across network namespaces (tests/cluster/netns_cluster.py):
N nodes x 2 ranks train the tiny GPT (tests/cli/elastic_test.cpp's kTrain, as my.json, with
train_batch_size 8N) and must give (a) the checkpoint fingerprint of the same 2N ranks on one
machine (`xtrain launch -N 2N`), bit for bit, and (b) the weights of ONE process training on the
same global batch (it accumulates 2N micro batches) up to fp32 rounding: not bit for bit, because
rank r holds samples r, r+2N, ... while one process sums consecutive ones (measured: 6e-7); and
(c) with 2 nodes, where the sums are the same (1 rank per node, micro batch 1, one thread), one
process's checkpoint fingerprint bit for bit (exact_against_one_process).
The host name resolves to 127.0.0.1 in every node, as on a default Debian install, so c10d has to
find the interface that reaches the master by itself.

The commands are README.md's ("Many processes, many machines"), run as written in a folder holding
my.json and `hosts` (node0..node2, slots=2), with 10.0.0.1 -> node 0's address and /shared/run -> a
folder every node sees (the NFS case). With --nodes 3 the same lines get --nnodes 3 / no --include.
  ssh   : `xtrain launch --hostfile hosts [--include "node1@node2:0,1"]` on node 0 (node 0 itself
          runs no rank with the filter) starts every rank over ssh
  nodes : one `xtrain launch -N 2 --nnodes N --node-rank i --master-addr <node0>` per node; then a
          wrong GLOO_SOCKET_IFNAME must fail at once, naming it and the real interfaces

usage: launch_paths.py BUILD/xtrain {ssh,nodes} --nodes N [--source REPO]
Exit 77 (ctest SKIP) with the reason where namespaces cannot be made.
"""
import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "cluster"))
from netns_cluster import Cluster, Skip  # noqa: E402
import mpi_slurm_common as common  # noqa: E402  (beside this file)

RANKS_PER_NODE = 2
TIMEOUT_S = 150
README_SECTION = "## Many processes, many machines"


def write_config(work, world):
    """kTrain of tests/cli/elastic_test.cpp: 1 layer, d_model 32, 6 steps, a checkpoint every 2."""
    config = {"train_micro_batch_size_per_gpu": 4, "train_batch_size": 4 * world,
              "xtrain": {"model": {"layers": 1, "d_model": 32, "heads": 2, "seq_len": 32}, "steps": 6,
                         "save_interval": 2, "keep_checkpoints": 0, "eval_interval": 0, "eval_batches": 2,
                         "generate": {"tokens": 0}, "monitor": {"peak_tflops": 1}}}
    with open(os.path.join(work, "my.json"), "w") as f:
        json.dump(config, f)


def readme_commands(source):
    """README's multi-machine launch lines as argv: {"node0": ..., "node1": ..., "ssh": ...}."""
    with open(os.path.join(source, "README.md")) as f:
        text = f.read()
    section = text[text.index(README_SECTION):]
    section = section[:section.index("\n## ", 1)]
    found = {}
    for line in section.splitlines():
        if not line.startswith("build/xtrain launch"):
            continue
        argv = shlex.split(line, comments=True)
        if "--hostfile" in argv:  # the first such lines; later ones (elastic, ...) are other tests'
            found.setdefault("ssh", argv)
        elif "--nnodes" in argv and "--node-rank" in argv:
            found.setdefault("node" + argv[argv.index("--node-rank") + 1], argv)
    missing = {"node0", "node1", "ssh"} - set(found)
    if missing:
        sys.exit(f"FAIL: README.md's '{README_SECTION}' lacks the launch lines for {sorted(missing)}")
    return found


def concrete(argv, xtrain, master, work):
    subst = {"build/xtrain": xtrain, "10.0.0.1": master, "/shared/run": f"{work}/run"}
    return [subst.get(a, a) for a in argv]


def with_value(argv, flag, value):
    out = list(argv)
    out[out.index(flag) + 1] = value
    return out


def fingerprint(xtrain, path):
    r = subprocess.run([xtrain, "ckpt", "fingerprint", path], capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        sys.exit(f"FAIL: xtrain ckpt fingerprint {path}: {r.stdout}{r.stderr}")
    return r.stdout.strip()


def finish(procs, what):
    """Waits for every process; exits with their output when one fails or the time runs out."""
    deadline = time.time() + TIMEOUT_S
    outs = []
    for name, p in procs:
        try:
            out, _ = p.communicate(timeout=max(1, deadline - time.time()))
        except subprocess.TimeoutExpired:
            for _, q in procs:
                q.kill()
            out, _ = p.communicate()
            outs.append((name, None, out))
            continue
        outs.append((name, p.returncode, out))
    if any(code != 0 for _, code, _ in outs):
        for name, code, out in outs:
            print(f"---- {name}: exit {code if code is not None else f'timeout {TIMEOUT_S} s'}\n{out}")
        sys.exit(f"FAIL: {what}")
    return outs


def start(c, i, argv, work):
    print(f"node{i}$ " + shlex.join(argv), flush=True)
    return c.popen(i, argv, cwd=work, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def run_ssh(c, readme, xtrain, work, nodes):
    argv = concrete(readme["ssh"], xtrain, c.nodes[0].addr, work)
    if nodes != 2:  # README's filter picks node1 and node2; the 3-node run takes the whole hostfile
        i = argv.index("--include")
        del argv[i:i + 2]
    out = finish([("launcher on node0", start(c, 0, argv, work))], "xtrain launch --hostfile")[0][2]
    expect = f"starting {nodes * RANKS_PER_NODE} of {nodes * RANKS_PER_NODE} ranks ({nodes} nodes, "
    if expect not in out:
        print(out)
        sys.exit(f"FAIL: the launcher did not say '{expect}...'")


def run_nodes(c, readme, xtrain, work, nodes):
    base = with_value(readme["node0"], "--nnodes", str(nodes))
    if nodes == 2 and with_value(base, "--node-rank", "1") != readme["node1"]:
        sys.exit("FAIL: README's node-1 line is not its node-0 line with --node-rank 1")
    procs = []
    for i in range(nodes):
        argv = concrete(with_value(base, "--node-rank", str(i)), xtrain, c.nodes[0].addr, work)
        procs.append((f"launcher on node{i}", start(c, i, argv, work)))
    finish(procs, "one xtrain launch per node")


def wrong_interface_is_an_error(c, xtrain, work):
    # Rank 1 of 2 on node 1, by torchrun's variables: it must stop before looking for rank 0.
    argv = [xtrain, "train", "--config", "my.json", "--output", f"{work}/bad"]
    env = {"GLOO_SOCKET_IFNAME": "eth7", "RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1",
           "MASTER_ADDR": c.nodes[0].addr, "MASTER_PORT": "29500"}
    t0 = time.time()
    r = c.run(1, argv, env=env, cwd=work, timeout=60)
    out = r.stdout + r.stderr
    for want in ["GLOO_SOCKET_IFNAME names interface 'eth7'", f"eth0 {c.nodes[1].addr}", "lo 127.0.0.1"]:
        if r.returncode == 0 or want not in out:
            print(out)
            sys.exit(f"FAIL: GLOO_SOCKET_IFNAME=eth7 should fail saying \"{want}\" (exit {r.returncode})")
    print(f"GLOO_SOCKET_IFNAME=eth7: refused after {time.time() - t0:.1f} s, naming it", flush=True)


def exact_against_one_process(c, xtrain, work, mode):
    """2 nodes x 1 rank with micro batch 1, where the sums are those of one process: its fingerprint
    bit for bit (mpi_slurm_common.exact_reference says why). With micro batch 4 or 4+ ranks the sums
    group differently: close_to_one_process."""
    config, want = common.exact_reference(xtrain, work)
    tail = ["--", "train", "--config", config, "--output", f"{work}/exact"]
    if mode == "ssh":  # one launcher on node0, a rank on node0 and on node1 over ssh
        with open(os.path.join(work, "hosts_exact"), "w") as f:
            f.write("node0 slots=1\nnode1 slots=1\n")
        argvs = {0: [xtrain, "launch", "--hostfile", "hosts_exact", *tail]}
    else:  # one launcher per node
        argvs = {i: [xtrain, "launch", "-N", "1", "--nnodes", "2", "--node-rank", str(i), "--master-addr",
                     c.nodes[0].addr, *tail] for i in range(2)}
    procs = []
    for i, argv in argvs.items():
        print(f"node{i}$ OMP_NUM_THREADS=1 " + shlex.join(argv), flush=True)
        procs.append((f"launcher on node{i}", c.popen(i, argv, env=common.RANK_ENV, cwd=work, stdout=subprocess.PIPE,
                                                     stderr=subprocess.STDOUT, text=True)))
    finish(procs, "2 nodes x 1 rank, micro batch 1")
    try:
        common.check_exact(f"{mode}: 2 nodes x 1 rank, micro batch 1", xtrain, f"{work}/exact", want)
    except AssertionError as e:
        sys.exit(f"FAIL: {e}")


def close_to_one_process(run, one):
    """Max |run - one| over the model's tensors, and whether it is within the tolerance."""
    import torch  # Debian's python3-torch (this script runs under /usr/bin/python3)
    a = torch.load(f"{run}/checkpoints/global_step6/model.pt")
    b = torch.load(f"{one}/checkpoints/global_step6/model.pt")
    if sorted(a) != sorted(b):
        sys.exit(f"FAIL: the checkpoints hold different tensors: {sorted(a)} vs {sorted(b)}")
    worst, where = 0.0, ""
    for k in a:
        d = (a[k].double() - b[k].double()).abs().max().item()
        if d > worst:
            worst, where = d, k
    # Rank r holds samples r, r+W, ... while one process accumulates consecutive micro batches, so
    # fp32 sums group differently: ~1e-6 after 6 AdamW steps. Wrong data moves weights by ~lr = 1e-3.
    return worst, where, worst <= 2e-5


def references(c, xtrain, work, world, one):
    """The same world on one machine: inside node 0 after the cluster run, where port 29500 is the
    cluster's own (tests running at once each have theirs); then the one-process run's end."""
    argv = [xtrain, "launch", "-N", str(world), "--", "train", "--config", "my.json", "--output", "local"]
    r = c.run(0, argv, cwd=work, timeout=TIMEOUT_S)
    if r.returncode != 0:
        sys.exit(f"FAIL: {shlex.join(argv)}: {r.stdout}{r.stderr}")
    out, _ = one.communicate(timeout=TIMEOUT_S)
    if one.returncode != 0:
        sys.exit(f"FAIL: the one-process run: {out}")


def compare(xtrain, work, nodes, world):
    """Bitwise: the same world on one machine. Within rounding: one process on the global batch."""
    got = fingerprint(xtrain, f"{work}/run/checkpoints/global_step6")
    local = fingerprint(xtrain, f"{work}/local/checkpoints/global_step6")
    print(f"fingerprint {nodes} nodes x {RANKS_PER_NODE}:       {got}\n"
          f"fingerprint {world} ranks on one machine: {local}", flush=True)
    if got != local:
        sys.exit(f"FAIL: {nodes} nodes and {world} ranks on one machine differ (runs in {work})")
    worst, where, ok = close_to_one_process(f"{work}/run", f"{work}/one")
    print(f"largest difference to one process on the global batch: {worst:.3g} ({where})", flush=True)
    if not ok:
        sys.exit(f"FAIL: {nodes} nodes and one process on the global batch differ by {worst:.3g} at {where}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("xtrain")
    ap.add_argument("mode", choices=["ssh", "nodes"])
    ap.add_argument("--nodes", type=int, required=True, choices=[2, 3])
    ap.add_argument("--source", default=os.path.join(HERE, "..", "..", ".."))
    a = ap.parse_args()
    xtrain = os.path.abspath(a.xtrain)
    readme = readme_commands(a.source)
    work = tempfile.mkdtemp(prefix=f"xtrain-e2e-cluster-{a.mode}{a.nodes}-")
    world = a.nodes * RANKS_PER_NODE
    write_config(work, world)
    try:
        with Cluster(nodes=3 if a.mode == "ssh" else a.nodes, ssh=(a.mode == "ssh")) as c:
            # One process on the global batch needs no network: it trains meanwhile.
            one = subprocess.Popen([xtrain, "train", "--config", "my.json", "--output", "one"], cwd=work,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            os.symlink(c.hostfile(slots=RANKS_PER_NODE), os.path.join(work, "hosts"))
            t0 = time.time()
            if a.mode == "ssh":
                run_ssh(c, readme, xtrain, work, a.nodes)
            else:
                run_nodes(c, readme, xtrain, work, a.nodes)
            print(f"{a.nodes} nodes x {RANKS_PER_NODE} ranks: {time.time() - t0:.1f} s", flush=True)
            if a.mode == "nodes":
                wrong_interface_is_an_error(c, xtrain, work)
            if a.nodes == 2:
                exact_against_one_process(c, xtrain, work, a.mode)
            references(c, xtrain, work, world, one)
    except Skip as e:
        print(f"SKIP: {e}")
        return 77
    compare(xtrain, work, a.nodes, world)
    subprocess.run(["rm", "-rf", work])
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
