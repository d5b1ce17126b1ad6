"""One rank of test_distributed.py: trains a model with xtrain.initialize on its share of a fixed
global batch, and rank 0 saves the final parameters. Run by `xtrain launch -N 2 -- dist_worker.py`."""
import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import xtrain  # noqa: E402
from models import MLP, sequential_mlp  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("--model", default="mlp")
parser.add_argument("--out", required=True)
parser.add_argument("--steps", type=int, default=6)
parser.add_argument("--global-batch", type=int, default=8)
parser.add_argument("--save", default="", help="save_checkpoint here at the end (every rank)")
parser.add_argument("--load", default="", help="load_checkpoint from here before training (every rank)")
xtrain.add_config_arguments(parser)
args = parser.parse_args()

rank, world = xtrain.init_distributed()
torch.manual_seed(0)
model = MLP() if args.model == "mlp" else sequential_mlp()
engine, *_ = xtrain.initialize(args=args, model=model, model_parameters=model.parameters())
if args.load:
    engine.load_checkpoint(args.load)
g = torch.Generator().manual_seed(1)
B, share = args.global_batch, args.global_batch // world
losses = []
for step in range(args.steps):
    x = torch.randn(B, 8, generator=g)
    y = torch.sin(x[:, :4])
    mine = slice(rank * share, (rank + 1) * share)
    xs, ys = x[mine], y[mine]
    if args.model == "mlp":
        loss = engine(xs, ys)
    else:
        loss = torch.nn.functional.mse_loss(engine(xs), ys)
    engine.backward(loss)
    engine.step()
    losses.append(engine.last_step()["loss"])
params = engine.full_parameters()  # collective (ZeRO-3 gathers)
if args.save:
    engine.save_checkpoint(args.save, client_state={"rank0_losses": losses})
if rank == 0:
    torch.save({"params": params, "losses": losses, "world": world, "units": len(engine._c.units)}, args.out)
    print(json.dumps({"rank": rank, "world": world, "losses": losses}))
