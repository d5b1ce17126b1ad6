"""2 ranks through `xtrain launch -N 2 -- script.py` (the script runs under /usr/bin/python3) equal
1 rank on the global batch; ZeRO-2 on 2 ranks equals stage 0."""
import json
import os
import subprocess

import pytest
import torch

import xtrain
from conftest import BUILD, ROOT, free_port, rel_diff

WORKER = os.path.join(ROOT, "tests", "python", "dist_worker.py")


def run_worker(tmp_path, name, ranks, stage=0, model="mlp", launch_flags=(), extra=()):
    cfg = {"train_batch_size": 8, "train_micro_batch_size_per_gpu": 8 // ranks,
           "optimizer": {"type": "AdamW", "params": {"lr": 0.01, "weight_decay": 0.01}},
           "zero_optimization": {"stage": stage, "stage3_param_persistence_threshold": 0}}
    cfg_path, out = tmp_path / f"{name}.json", tmp_path / f"{name}.pt"
    cfg_path.write_text(json.dumps(cfg))
    args = [WORKER, "--deepspeed_config", str(cfg_path), "--out", str(out), "--model", model, *extra]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env.pop("PYTHONPATH", None)  # `xtrain launch -- x.py` finds the package beside the program itself
    if ranks == 1 or launch_flags:
        env["PYTHONPATH"] = os.path.join(BUILD, "python")
    if ranks == 1:
        cmd = ["/usr/bin/python3"] + args
    else:
        cmd = [os.path.join(BUILD, "xtrain"), "launch", "-N", str(ranks), "--master-port", str(free_port()),
               *launch_flags, "--"] + args
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    return torch.load(out)


def test_two_ranks_equal_one_rank_global_batch(tmp_path):
    one = run_worker(tmp_path, "one", 1)
    two = run_worker(tmp_path, "two", 2)
    assert one["world"] == 1 and two["world"] == 2
    assert two["losses"] == pytest.approx(one["losses"], rel=1e-5)
    names = list(one["params"])
    assert names == list(two["params"])
    assert rel_diff(list(two["params"].values()), list(one["params"].values())) < 1e-5


def test_two_ranks_zero2_equal_stage0_with_program_flag(tmp_path):
    # --program names the interpreter explicitly (what the .py detection does by itself)
    dp = run_worker(tmp_path, "dp", 2)
    run = tmp_path / "z2run"
    z2 = run_worker(tmp_path, "z2", 2, stage=2, launch_flags=("--program", "/usr/bin/python3"),
                    extra=("--save", str(run)))
    assert rel_diff(list(z2["params"].values()), list(dp["params"].values())) < 1e-6
    # the sharded checkpoint written from Python: whole again in Python, and through `xtrain ckpt`
    state = xtrain.load_state_dict(run)
    assert all(torch.equal(state[n], t) for n, t in z2["params"].items())
    xtrain_bin = os.path.join(BUILD, "xtrain")
    subprocess.run([xtrain_bin, "ckpt", "consolidate", str(run), str(tmp_path / "one" / "checkpoints")], check=True,
                   capture_output=True)
    one = xtrain.load_state_dict(tmp_path / "one")
    assert all(torch.equal(one[n], t) for n, t in z2["params"].items())
    fp = subprocess.run([xtrain_bin, "ckpt", "fingerprint", str(run)], capture_output=True, text=True)
    assert fp.returncode == 0 and len(fp.stdout.strip()) >= 64, fp.stdout + fp.stderr


def test_two_ranks_zero3_sequential_equals_stage0(tmp_path):
    dp = run_worker(tmp_path, "seq_dp", 2, model="seq")
    z3 = run_worker(tmp_path, "seq_z3", 2, stage=3, model="seq")
    assert dp["units"] == 0 and z3["units"] == 3  # the three Linear children are partitioned units
    assert z3["losses"] == pytest.approx(dp["losses"], rel=1e-5)
    assert rel_diff(list(z3["params"].values()), list(dp["params"].values())) < 1e-5
