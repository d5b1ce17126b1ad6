"""examples/python/cifar_deepspeed.py (DeepSpeed's CIFAR example shape, `import xtrain as deepspeed`)
runs, tiny, on 2 ranks through `xtrain launch`, trains, and checkpoints."""
import os
import re
import subprocess

from conftest import BUILD, ROOT, free_port


def test_cifar_style_script_two_ranks(tmp_path):
    script = os.path.join(ROOT, "examples", "python", "cifar_deepspeed.py")
    cfg = os.path.join(ROOT, "examples", "python", "ds_config.json")
    cmd = [os.path.join(BUILD, "xtrain"), "launch", "-N", "2", "--master-port", str(free_port()), "--", script,
           "--deepspeed_config", cfg, "--epochs", "2", "--samples", "256", "--checkpoint-dir", str(tmp_path / "run")]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stdout + r.stderr
    m = re.search(r"client_state \{'epoch': 2\}\); loss ([0-9.]+) -> ([0-9.]+)", r.stdout)
    assert m, r.stdout
    assert float(m.group(2)) < float(m.group(1))
    assert "step 32" in r.stdout  # 256 samples / 2 ranks / 8 per micro-batch = 16 steps an epoch
    assert (tmp_path / "run" / "checkpoints" / "global_step32" / "manifest.json").exists()
