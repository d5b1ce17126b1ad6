#!/usr/bin/python3
"""Reference trajectories for tests/optim/lbfgs_test.cpp (run with /usr/bin/python3, torch 1.13.1).

torch.optim.LBFGS, with and without the strong-Wolfe line search, on two small problems:
  logistic  logistic regression (a Linear(5, 1) with BCE on logits) on a fixed synthetic set of 64
            rows; the two parameters are separate tensors (weight [1, 5], bias [1]).
  rosen     the 4-D Rosenbrock function sum(100 (x[i+1] - x[i]^2)^2 + (1 - x[i])^2), its point
            split over two parameters a [3] and b [1] (x = cat(a, b)).
Each run takes STEPS optimizer steps with a small max_iter and history_size, so the curvature history
carries across steps and its oldest pairs are dropped. Per step: the loss step() returns (the loss at
the step's start), the closure calls the step made, and every parameter after it.

Writes tests/reference/fixtures/lbfgs.pt: a dict of tensors.
"""
import os

import torch
import torch.nn.functional as F

STEPS = 6
RUNS = {  # name: (problem, LBFGS kwargs)
    "logistic_plain": ("logistic", dict(lr=1.0, max_iter=4, history_size=3)),
    "logistic_wolfe": ("logistic", dict(lr=1.0, max_iter=4, history_size=3, line_search_fn="strong_wolfe")),
    "rosen_plain": ("rosen", dict(lr=0.2, max_iter=5, history_size=4)),
    "rosen_wolfe": ("rosen", dict(lr=1.0, max_iter=6, history_size=4, line_search_fn="strong_wolfe")),
}


def logistic_data():
    g = torch.Generator().manual_seed(2024)
    x = torch.randn(64, 5, generator=g) * torch.tensor([1.0, 0.5, 2.0, 1.0, 0.2])
    true_w = torch.tensor([[1.5, -2.0, 0.7, 0.0, 3.0]])
    logits = x @ true_w.t() + 0.3 + 0.8 * torch.randn(64, 1, generator=g)
    y = (logits > 0).float()
    return x, y


def problem(name, out):
    if name == "logistic":
        x, y = logistic_data()
        out["logistic/x"], out["logistic/y"] = x, y
        params = {"weight": torch.zeros(1, 5), "bias": torch.zeros(1)}

        def loss(p):
            return F.binary_cross_entropy_with_logits(F.linear(x, p["weight"], p["bias"]), y)
    else:
        params = {"a": torch.tensor([-1.2, 1.0, -0.5]), "b": torch.tensor([0.8])}

        def loss(p):
            v = torch.cat([p["a"], p["b"]])
            return (100 * (v[1:] - v[:-1] ** 2) ** 2 + (1 - v[:-1]) ** 2).sum()
    for k, v in params.items():
        out[f"{name}/init/{k}"] = v.clone()
    return {k: v.clone().requires_grad_(True) for k, v in params.items()}, loss


def run(run_name, problem_name, kwargs, out):
    params, loss_fn = problem(problem_name, out)
    opt = torch.optim.LBFGS(list(params.values()), **kwargs)
    calls = [0]

    def closure():
        calls[0] += 1
        opt.zero_grad()
        loss = loss_fn(params)
        loss.backward()
        return loss

    losses, evals = [], []
    for step in range(STEPS):
        calls[0] = 0
        losses.append(float(opt.step(closure)))
        evals.append(calls[0])
        for k, p in params.items():
            out[f"{run_name}/step{step + 1}/{k}"] = p.detach().clone()
    out[f"{run_name}/losses"] = torch.tensor(losses, dtype=torch.float64)
    out[f"{run_name}/evals"] = torch.tensor(evals, dtype=torch.int64)
    print(run_name, "losses", ["%.6g" % v for v in losses], "evals", evals)


def main():
    torch.set_num_threads(1)
    out = {}
    for run_name, (problem_name, kwargs) in RUNS.items():
        run(run_name, problem_name, kwargs, out)
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "lbfgs.pt")
    torch.save(out, path)
    print("wrote", path)


if __name__ == "__main__":
    main()
