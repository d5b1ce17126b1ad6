#!/usr/bin/env python3
"""Slurm launching `xtrain train` across network-namespace nodes (issue 23).

A 2-node cluster with munged, slurmctld and one slurmd per node started by the test
(slurm_cluster.py; proctrack/linuxproc, no cgroups). Then, from node0:
  - the README's `srun -N 2 -n 4 build/xtrain train --config my.json` (2 nodes x 2 ranks),
  - `sbatch` of a script (polled with scontrol: sbatch --wait polls every few seconds) that runs
    `srun build/xtrain train` on the same 2 nodes x 2 ranks (3 nodes: test_mpirun.py),
each equal to the same ranks on one machine (fingerprint, bit for bit) and to one process on the
global batch (losses, to rounding): mpi_slurm_common.reference(); and `srun -N 2 -n 2` with micro
batch 1, where the sums are the same, equal to one process bit for bit (exact_reference). Every rank reads
SLURM_PROCID/NTASKS/LOCALID and takes the master from the first host of SLURM_STEP_NODELIST (node0)
with no MASTER_ADDR given; and a batch script that runs xtrain without srun is refused by name
instead of waiting for ranks that never start. Exit 77 (SKIP) with the daemon's log line where
Slurm cannot run here.

usage: test_slurm.py BUILD/xtrain
"""
import os
import shlex
import shutil
import sys
import tempfile

import mpi_slurm_common as common
from slurm_cluster import SlurmCluster

README_PREFIX = "srun -N 2 -n 4 "


def run_srun(s, xtrain, scratch, line, expected):
    run = os.path.join(scratch, "srun")
    argv = [xtrain if a == "build/xtrain" else common.write_config(scratch) if a == "my.json" else a
            for a in shlex.split(line)] + ["--output", run]
    print("node0$", " ".join(argv), flush=True)
    r = s.run(0, argv, timeout=150, cwd=scratch, env_extra=common.RANK_ENV)
    out = r.stdout + r.stderr
    if r.returncode != 0:
        raise AssertionError(f"srun exited {r.returncode}:\n{out[-6000:]}\n{s.daemon_errors()}")
    common.check_run("srun -N 2 -n 4", out, xtrain, run, expected, 4, "slurm")


def sbatch(s, scratch, name, body):
    script = os.path.join(scratch, f"{name}.sh")
    log = os.path.join(scratch, f"{name}.out")
    with open(script, "w") as f:
        f.write(f"#!/bin/sh\n#SBATCH -N 2\n#SBATCH -n 4\n#SBATCH -o {log}\n{body}\n")
    print(f"node0$ sbatch {script}   # {body}", flush=True)
    r = s.run(0, ["sbatch", "--parsable", script], timeout=30, cwd=scratch, env_extra=common.RANK_ENV)
    if r.returncode != 0:
        raise AssertionError(f"sbatch exited {r.returncode}: {r.stdout}{r.stderr}\n{s.daemon_errors()}")
    state, code = s.wait_job(r.stdout.strip().split(";")[0], timeout=150)
    with open(log, errors="replace") if os.path.exists(log) else open(os.devnull) as f:
        return code, f"job {state}, exit code {code}\n" + f.read()


def run_sbatch(s, xtrain, scratch, expected):
    run = os.path.join(scratch, "sbatch")
    config = common.write_config(scratch)
    code, out = sbatch(s, scratch, "train", f"srun {xtrain} train --config {config} --output {run}")
    if code != 0:
        raise AssertionError(f"sbatch --wait exited {code}:\n{out[-6000:]}\n{s.daemon_errors()}")
    common.check_run("sbatch: srun on 2 nodes x 2", out, xtrain, run, expected, 4, "slurm")
    # Without srun the script itself is no rank: a clear error, not a wait for 4 ranks.
    code, out = sbatch(s, scratch, "nosrun", f"{xtrain} train --config {config} --output {run}-nosrun")
    if code == 0 or "start the ranks with srun" not in out:
        raise AssertionError(f"xtrain train in a batch script without srun: exit {code}, expected the "
                             f"'start the ranks with srun' error:\n{out[-4000:]}")
    print("ok: a batch script without srun is refused by name", flush=True)


def run_srun_exact(s, xtrain, scratch):
    """srun -N 2 -n 2, micro batch 1: one process's fingerprint bit for bit (exact_reference)."""
    config, want = common.exact_reference(xtrain, scratch)
    run = os.path.join(scratch, "srun-exact")
    argv = ["srun", "-N", "2", "-n", "2", xtrain, "train", "--config", config, "--output", run]
    print("node0$", " ".join(argv), flush=True)
    r = s.run(0, argv, timeout=150, cwd=scratch, env_extra=common.RANK_ENV)
    if r.returncode != 0:
        raise AssertionError(f"srun -n 2 exited {r.returncode}:\n{(r.stdout + r.stderr)[-6000:]}\n{s.daemon_errors()}")
    common.check_exact("srun -N 2 -n 2, micro batch 1", xtrain, run, want)


def body(xtrain, line, scratch):
    expected = common.reference(xtrain, scratch, 4)  # both runs: 2 nodes x 2 ranks
    with common.Cluster(nodes=2) as c, SlurmCluster(c) as s:
        run_srun(s, xtrain, scratch, line, expected)
        run_sbatch(s, xtrain, scratch, expected)
        run_srun_exact(s, xtrain, scratch)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    xtrain = os.path.abspath(sys.argv[1])
    for k in ("MASTER_ADDR", "MASTER_PORT"):  # the ranks must find the master by themselves
        os.environ.pop(k, None)
    line = common.readme_line(README_PREFIX)
    scratch = tempfile.mkdtemp(prefix="xtrain-slurm-")
    try:
        common.main(lambda: body(xtrain, line, scratch))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
