"""A checkpoint written from Python (engine.save_checkpoint) is one the C++ CLI reads: a GPT-2 defined in plain
torch under the names of xtrain's built-in `gpt` (models.XtrainNamedGPT), trained through xtrain.initialize,
is scored by `xtrain eval --full` with the loss torch computes for the same module on every window of the
validation split (the text dataset's split: the last val_fraction of the file's bytes, every offset a window).
A checkpoint of a model the CLI cannot build (a Python MLP under a gpt config) is refused by name."""
import json
import math
import os
import subprocess

import torch

import xtrain
from conftest import BUILD
from models import MLP, XtrainNamedGPT, adamw_config, mlp_data

T, VAL_FRACTION = 16, 0.1
MODEL = {"type": "gpt", "layers": 2, "d_model": 32, "heads": 2, "seq_len": T, "vocab": 256, "dropout": 0.0}


def corpus(path):
    words = ["the", "whale", "sea", "ship", "captain", "white", "deep", "wind", "sail", "harpoon"]
    g = torch.Generator().manual_seed(5)
    text = " ".join(words[int(i)] for i in torch.randint(0, len(words), (700,), generator=g)) + "\n"
    path.write_bytes(text.encode())
    return path.read_bytes()


def windows(data, begin, end):
    """Every window of [begin, end): inputs [N, T] and targets (shifted by one byte), as TextDataset."""
    split = torch.tensor(list(data[begin:end]), dtype=torch.long)
    idx = torch.arange(end - begin - T)[:, None] + torch.arange(T)[None, :]
    return split[idx], split[idx + 1]


def xtrain_eval(run_dir):
    r = subprocess.run([os.path.join(BUILD, "xtrain"), "eval", "--run", str(run_dir), "--full", "--json"],
                       capture_output=True, text=True, timeout=120)
    return r.returncode, r.stdout, r.stderr


def test_xtrain_eval_scores_a_python_gpt_checkpoint_as_torch_does(tmp_path):
    data = corpus(tmp_path / "corpus.txt")
    n = len(data)
    val_begin = n - math.floor(n * VAL_FRACTION)
    config = adamw_config(8, lr=3e-3)
    config["xtrain"] = {"model": MODEL, "data": {"type": "text", "path": str(tmp_path / "corpus.txt"),
                                                 "val_fraction": VAL_FRACTION}}
    torch.manual_seed(0)
    model = XtrainNamedGPT()
    engine, *_ = xtrain.initialize(model=model, config=config)
    x, y = windows(data, 0, val_begin)
    g = torch.Generator().manual_seed(1)
    for _ in range(12):
        pick = torch.randint(0, x.shape[0], (8,), generator=g)
        engine.backward(engine(x[pick], y[pick]))
        engine.step()
    run = tmp_path / "run"
    engine.save_checkpoint(run)
    (run / "config.json").write_text(json.dumps(config))  # what `xtrain train` keeps beside checkpoints/

    vx, vy = windows(data, val_begin, n)
    with torch.no_grad():
        want = model(vx, vy).item()  # the mean per-token cross-entropy over every validation window
        untrained = XtrainNamedGPT()(vx, vy).item()
    rc, out, err = xtrain_eval(run)
    assert rc == 0, out + err
    got = json.loads(out)
    assert got["samples"] == vx.shape[0] and got["full"], got
    assert abs(got["loss"] - want) <= 1e-4 * want, (got["loss"], want)
    assert abs(untrained - want) > 100 * 1e-4 * want  # the trained weights are what was scored


def test_xtrain_eval_refuses_a_model_it_cannot_build(tmp_path):
    corpus(tmp_path / "corpus.txt")
    config = adamw_config(4)
    engine, *_ = xtrain.initialize(model=MLP(), config=config)
    x, y = mlp_data(4)
    engine.backward(engine(x, y))
    engine.step()
    engine.save_checkpoint(tmp_path / "run")
    config["xtrain"] = {"model": MODEL, "data": {"type": "text", "path": str(tmp_path / "corpus.txt")}}
    (tmp_path / "run" / "config.json").write_text(json.dumps(config))
    rc, out, err = xtrain_eval(tmp_path / "run")
    assert rc == 2, out + err  # a usage error, not a crash or a score of a fresh model
    assert "has no tensor for wte.weight" in err, err
