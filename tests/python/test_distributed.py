"""2 ranks through `xtrain launch -N 2 -- script.py` (the script runs under /usr/bin/python3) equal
1 rank on the global batch; ZeRO-2 on 2 ranks equals stage 0; checkpoint.use_node_local_storage over two
"nodes" (one launcher each) saves and loads from Python as from a shared folder."""
import json
import os
import shutil
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


def run_two_nodes(tmp_path, name, cfg, per_node_args, check=True):
    """One `xtrain launch -N 1 --nnodes 2 --node-rank i` per "node", both on this machine: world 2 with
    one rank per node, so the run counts as two nodes (each with its own folder, no shared one)."""
    cfg_path, out = tmp_path / f"{name}.json", tmp_path / f"{name}.pt"
    cfg_path.write_text(json.dumps(cfg))
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=os.path.join(BUILD, "python"))
    port = str(free_port())
    procs = []
    for i in range(2):
        cmd = [os.path.join(BUILD, "xtrain"), "launch", "-N", "1", "--nnodes", "2", "--node-rank", str(i),
               "--master-addr", "127.0.0.1", "--master-port", port, "--", WORKER, "--deepspeed_config", str(cfg_path),
               "--out", str(out), *per_node_args(i)]
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    outs = [p.communicate(timeout=120)[0] for p in procs]
    if not check:
        return [p.returncode for p in procs], outs
    assert all(p.returncode == 0 for p in procs), "\n".join(outs)
    return torch.load(out)


def test_node_local_checkpoints_save_and_load_from_python(tmp_path):
    # checkpoint.use_node_local_storage: each node's folder gets its rank's part (ZeRO-2: its
    # optimizer shard exists nowhere else); load_checkpoint gathers them. Resuming from the node
    # folders must equal resuming from one shared folder, bit for bit.
    base = {"train_batch_size": 8, "train_micro_batch_size_per_gpu": 4,
            "optimizer": {"type": "AdamW", "params": {"lr": 0.01, "weight_decay": 0.01}},
            "zero_optimization": {"stage": 2}}
    local_cfg = dict(base, checkpoint={"use_node_local_storage": True})
    nodes = [tmp_path / "node0", tmp_path / "node1"]
    run_two_nodes(tmp_path, "local_save", local_cfg, lambda i: ["--save", str(nodes[i])])
    for n in nodes:
        assert (n / "checkpoints" / "latest").read_text().strip() == "global_step6"
    resumed = run_two_nodes(tmp_path, "local_load", local_cfg, lambda i: ["--load", str(nodes[i]), "--steps", "2"])
    shared = tmp_path / "shared"
    run_two_nodes(tmp_path, "shared_save", base, lambda i: ["--save", str(shared)])
    reference = run_two_nodes(tmp_path, "shared_load", base, lambda i: ["--load", str(shared), "--steps", "2"])
    assert list(resumed["params"]) == list(reference["params"])
    assert all(torch.equal(resumed["params"][n], t) for n, t in reference["params"].items())
    assert not any((n / "checkpoints" / ".gathered").exists() for n in nodes)
    # node 1 lost its disk: the load names node 1 instead of loading half a checkpoint
    (nodes[1] / "checkpoints" / "latest").unlink()
    shutil.rmtree(nodes[1] / "checkpoints" / "global_step6")
    codes, outs = run_two_nodes(tmp_path, "local_missing", local_cfg, lambda i: ["--load", str(nodes[i])], check=False)
    assert any(codes) and "node 1" in "".join(outs), "\n".join(outs)
