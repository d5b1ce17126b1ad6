#!/usr/bin/env python3
"""Open MPI's mpirun starting `xtrain train` across network-namespace nodes (issue 23).

The README's line `mpirun -np 4 --host node0:2,node1:2 build/xtrain train --config my.json`, run from
node0 of a 2-node cluster and (as -np 6 over node0..node2) of a 3-node one: mpirun reaches the other
nodes over ssh (the cluster's sshd; its ssh config is the nodes' /etc/ssh), each rank reads
OMPI_COMM_WORLD_* and, with no MASTER_ADDR given, takes mpirun's own host (node0, where rank 0
runs) from OMPI_MCA_orte_hnp_uri. Both runs must give the `xtrain ckpt fingerprint` of the same
ranks on one machine and the losses of one process training on the global batch; 2 nodes x 1 rank
with micro batch 1 (where the sums are the same) one process's fingerprint bit for bit. Exit 77
(SKIP) with the reason where mpirun or namespaces are missing.

usage: test_mpirun.py BUILD/xtrain
"""
import os
import shlex
import shutil
import subprocess
import sys
import tempfile

import mpi_slurm_common as common

README_PREFIX = "mpirun -np 4 --host node0:2,node1:2 "


def mpirun_argv(line, xtrain, config, nodes, extra):
    """The README line for `nodes` nodes x 2 ranks, with this build's binary and the tiny config."""
    argv = shlex.split(line)
    if nodes != 2:
        argv[argv.index("-np") + 1] = str(2 * nodes)
        argv[argv.index("--host") + 1] = ",".join(f"node{i}:2" for i in range(nodes))
    argv = [xtrain if a == "build/xtrain" else config if a == "my.json" else a for a in argv]
    # One thread per rank (mpirun forwards only -x variables); root's consent is in the environment.
    return argv[:1] + ["-x", "OMP_NUM_THREADS=1"] + argv[1:] + extra


def run_on(nodes, xtrain, line, scratch):
    world = 2 * nodes
    expected = common.reference(xtrain, scratch, world)
    with common.Cluster(nodes=nodes, ssh=True) as c:
        run = os.path.join(scratch, f"mpirun{nodes}")
        argv = mpirun_argv(line, xtrain, common.write_config(scratch), nodes, ["--output", run])
        print("node0$", " ".join(argv), flush=True)
        r = subprocess.run(["ip", "netns", "exec", c.nodes[0].ns] + argv, cwd=scratch,
                           capture_output=True, text=True, timeout=150)
        out = r.stdout + r.stderr
        if r.returncode != 0:
            raise AssertionError(f"mpirun on {nodes} nodes exited {r.returncode}:\n{out[-6000:]}")
        common.check_run(f"mpirun {nodes} nodes x 2", out, xtrain, run, expected, world, "openmpi")
        if nodes == 2:
            run_exact(c, xtrain, line, scratch)


def run_exact(c, xtrain, line, scratch):
    """2 nodes x 1 rank, micro batch 1: one process's fingerprint bit for bit (exact_reference)."""
    config, want = common.exact_reference(xtrain, scratch)
    run = os.path.join(scratch, "mpirun-exact")
    argv = mpirun_argv(line, xtrain, config, 2, ["--output", run])
    argv[argv.index("-np") + 1] = "2"
    argv[argv.index("--host") + 1] = "node0:1,node1:1"
    print("node0$", " ".join(argv), flush=True)
    r = subprocess.run(["ip", "netns", "exec", c.nodes[0].ns] + argv, cwd=scratch, capture_output=True, text=True,
                       timeout=150)
    if r.returncode != 0:
        raise AssertionError(f"mpirun -np 2 exited {r.returncode}:\n{(r.stdout + r.stderr)[-6000:]}")
    common.check_exact("mpirun 2 nodes x 1, micro batch 1", xtrain, run, want)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    xtrain = os.path.abspath(sys.argv[1])
    for k in ("MASTER_ADDR", "MASTER_PORT"):  # the ranks must find the master by themselves
        os.environ.pop(k, None)
    os.environ.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    if shutil.which("mpirun") is None:
        common.skip("mpirun is not installed (openmpi-bin, scripts/lib.sh TEST_PACKAGES)")
    line = common.readme_line(README_PREFIX)
    scratch = tempfile.mkdtemp(prefix="xtrain-mpirun-")
    try:
        common.main(lambda: [run_on(n, xtrain, line, scratch) for n in (2, 3)])
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
