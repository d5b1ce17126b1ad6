"""save_checkpoint -> load_checkpoint -> continue is bit-identical to an uninterrupted run;
client_state round-trips; xtrain.load_state_dict gives a plain state_dict."""
import json
import os

import torch

import xtrain
from models import MLP, adamw_config, mlp_data

CONFIG = adamw_config(4, gas=2, scheduler={"type": "WarmupLR", "params": {"warmup_num_steps": 5,
                                                                          "warmup_max_lr": 0.01}})


class BNMLP(MLP):
    """With a buffer (BatchNorm running statistics) that must travel with the weights."""

    def __init__(self):
        super().__init__()
        self.bn = torch.nn.BatchNorm1d(8)

    def forward(self, x, y):
        return super().forward(self.bn(x), y)


def run(engine, x, y, micro_from, micro_to):
    for i in range(micro_from, micro_to):
        engine.backward(engine(x[4 * i:4 * i + 4], y[4 * i:4 * i + 4]))
        engine.step()


def fingerprint(module):
    return [t.detach().clone() for t in list(module.parameters()) + list(module.buffers())]


def test_save_load_continue_bit_identical(tmp_path):
    x, y = mlp_data(4 * 24)
    torch.manual_seed(0)
    a = BNMLP()
    engine_a, *_ = xtrain.initialize(model=a, config=CONFIG)
    run(engine_a, x, y, 0, 12)
    engine_a.save_checkpoint(tmp_path, client_state={"epoch": 3, "note": "mid", "t": torch.arange(3)})
    saved = fingerprint(a)
    run(engine_a, x, y, 12, 24)

    torch.manual_seed(99)  # a different initialisation: everything must come from the checkpoint
    b = BNMLP()
    engine_b, *_ = xtrain.initialize(model=b, config=CONFIG)
    path, client = engine_b.load_checkpoint(tmp_path)
    assert path.endswith("checkpoints/global_step6")
    assert client["epoch"] == 3 and client["note"] == "mid" and torch.equal(client["t"], torch.arange(3))
    assert engine_b.global_steps == 6 and engine_b.get_lr() == engine_a_lr_at(7)
    assert all(torch.equal(p, q) for p, q in zip(fingerprint(b), saved))
    run(engine_b, x, y, 12, 24)
    assert all(torch.equal(p, q) for p, q in zip(fingerprint(b), fingerprint(a)))


def engine_a_lr_at(step):
    torch.manual_seed(0)
    engine, *_ = xtrain.initialize(model=MLP(), config=CONFIG)
    x, y = mlp_data(4 * 2 * (step - 1))
    for i in range(2 * (step - 1)):
        engine.backward(engine(x[4 * i:4 * i + 4], y[4 * i:4 * i + 4]))
        engine.step()
    return engine.get_lr()


def test_layout_and_load_state_dict(tmp_path):
    torch.manual_seed(1)
    model = BNMLP()
    engine, *_ = xtrain.initialize(model=model, config=CONFIG)
    x, y = mlp_data(8)
    run(engine, x, y, 0, 2)
    engine.save_checkpoint(tmp_path, tag="mine")
    root = tmp_path / "checkpoints"
    assert (root / "latest").read_text().strip() == "mine"
    files = set(os.listdir(root / "mine"))
    assert {"manifest.json", "engine.json", "config.json", "buffers.pt"} <= files
    assert json.loads((root / "mine" / "engine.json").read_text())["global_steps"] == 1
    state = xtrain.load_state_dict(tmp_path)
    fresh = BNMLP()
    fresh.load_state_dict(state)  # strict: every parameter and buffer by its name
    for (n, p), q in zip(model.state_dict().items(), fresh.state_dict().values()):
        assert torch.equal(p, q), n


def test_metrics_jsonl_and_csv(tmp_path):
    cfg = dict(CONFIG, csv_monitor={"enabled": True, "output_path": str(tmp_path / "csv"), "job_name": "job"})
    engine, *_ = xtrain.initialize(model=MLP(), config=cfg)
    engine.monitor(tmp_path / "run")
    x, y = mlp_data(16)
    run(engine, x, y, 0, 4)
    lines = [json.loads(s) for s in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    steps = [r for r in lines if "train/loss" in str(r)]
    assert len(steps) == 2, lines
    assert any(p.endswith(".csv") for _, _, files in os.walk(tmp_path / "csv") for p in files)
