#!/usr/bin/python3
"""Reference values for tests/tune/gp_test.cpp and log_ei_test.cpp (run with /usr/bin/python3).

The GP (Matérn-5/2, one length scale per dimension, θ = [log ℓ_1..D, log σ_f², log σ_n²]) is
written here in numpy from Rasmussen & Williams (eq. 2.25-2.26, 5.8), independently of the C++:
posterior mean and latent variance at test points, and the log marginal likelihood. Its gradient
with respect to θ and the gradients of the posterior mean/variance with respect to the test
point come from torch autograd (float64) on the same formulas.

log h(z), h(z) = φ(z) + zΦ(z) (expected improvement of a unit normal), and Φ(z)/h(z) are computed
with Python's decimal module at 900 significant digits (erf by its Taylor series, exact enough
that the float64 rounding is the only error) for -40 ≤ z ≤ 10, and by the asymptotic series
1 - |z|Φ/φ = z⁻² Σ (-1)^k (2k+1)!! z^(-2k) (summed in decimal to its smallest term) for z ≤ -50.
Writes tests/reference/fixtures/gp.pt (float64 tensors).
"""
import decimal
import math
import os

import numpy as np
import torch

D = decimal.Decimal
JITTER = 1e-10  # the C++ kJitter: added to the diagonal, not a hyperparameter


def matern52_np(a, b, theta):
    dims = a.shape[1]
    ls = np.exp(theta[:dims])
    diff = (a[:, None, :] - b[None, :, :]) / ls
    r = np.sqrt((diff ** 2).sum(-1))
    return np.exp(theta[dims]) * (1 + math.sqrt(5) * r + 5.0 / 3.0 * r ** 2) * np.exp(-math.sqrt(5) * r)


def posterior_np(x, y, theta, xs):
    n, dims = x.shape
    k = matern52_np(x, x, theta) + (np.exp(theta[dims + 1]) + JITTER) * np.eye(n)
    ks = matern52_np(xs, x, theta)
    mean = ks @ np.linalg.solve(k, y)
    var = np.exp(theta[dims]) - np.einsum("ij,ji->i", ks, np.linalg.solve(k, ks.T))
    sign, logdet = np.linalg.slogdet(k)
    lml = -0.5 * y @ np.linalg.solve(k, y) - 0.5 * logdet - 0.5 * n * math.log(2 * math.pi)
    return mean, var, lml


def matern52_torch(a, b, theta):
    dims = a.shape[1]
    ls = torch.exp(theta[:dims])
    diff = (a[:, None, :] - b[None, :, :]) / ls
    r = torch.sqrt((diff ** 2).sum(-1) + 1e-300)  # no NaN gradient at r = 0 (the diagonal)
    return torch.exp(theta[dims]) * (1 + math.sqrt(5) * r + 5.0 / 3.0 * r ** 2) * torch.exp(-math.sqrt(5) * r)


def lml_grad_torch(x, y, theta):
    n, dims = x.shape
    t = torch.tensor(theta, dtype=torch.float64, requires_grad=True)
    xt, yt = torch.tensor(x), torch.tensor(y)
    k = matern52_torch(xt, xt, t)
    k = k - torch.diag(torch.diag(k)) + torch.diag(torch.exp(t[dims]).expand(n)) + (torch.exp(t[dims + 1]) + JITTER) * torch.eye(n, dtype=torch.float64)
    chol = torch.linalg.cholesky(k)
    alpha = torch.cholesky_solve(yt[:, None], chol)[:, 0]
    lml = -0.5 * yt @ alpha - torch.log(torch.diagonal(chol)).sum() - 0.5 * n * math.log(2 * math.pi)
    lml.backward()
    return lml.item(), t.grad.numpy()


def prediction_grads_torch(x, y, theta, xs):
    n, dims = x.shape
    xt, yt, tt = torch.tensor(x), torch.tensor(y), torch.tensor(theta)
    k = matern52_np(x, x, theta) + (math.exp(theta[dims + 1]) + JITTER) * np.eye(n)
    kinv = torch.tensor(np.linalg.inv(k))
    dmean, dvar = [], []
    for i in range(xs.shape[0]):
        p = torch.tensor(xs[i : i + 1], requires_grad=True)
        ks = matern52_torch(p, xt, tt)[0]
        mean = ks @ kinv @ yt
        (gm,) = torch.autograd.grad(mean, p)
        p2 = torch.tensor(xs[i : i + 1], requires_grad=True)
        ks2 = matern52_torch(p2, xt, tt)[0]
        var = torch.exp(tt[dims]) - ks2 @ kinv @ ks2
        (gv,) = torch.autograd.grad(var, p2)
        dmean.append(gm[0].numpy())
        dvar.append(gv[0].numpy())
    return np.array(dmean), np.array(dvar)


# ---- log h(z) at high precision -------------------------------------------------------------
def erf_decimal(x):
    # erf(x) = 2/√π Σ (-1)^n x^(2n+1) / (n! (2n+1)); alternating terms up to e^(x²) are absorbed by
    # the 900-digit working precision (x² ≤ 800 here: terms ≤ 1e348).
    x2 = x * x
    term, total, n = x, x, 0
    while True:
        n += 1
        term = -term * x2 / n
        add = term / (2 * n + 1)
        total += add
        if abs(add) < D(10) ** -870:
            break
    return 2 * total / PI.sqrt()


def machin_pi():
    def arctan_inv(n):  # arctan(1/n) = Σ (-1)^k / ((2k+1) n^(2k+1))
        total, power, k = D(0), D(1) / n, 0
        while power > D(10) ** -(decimal.getcontext().prec + 5):
            total += (-1) ** k * power / (2 * k + 1)
            power /= n * n
            k += 1
        return total
    return 16 * arctan_inv(5) - 4 * arctan_inv(239)


def log_h_decimal(z):
    z = D(z)
    phi = (-(z * z) / 2).exp() / (2 * PI).sqrt()
    cdf = (1 - erf_decimal(-z / D(2).sqrt())) / 2
    h = phi + z * cdf
    return float(h.ln()), float(cdf / h)


def log_h_series(z):
    z = D(z)
    u = 1 / (z * z)
    s, m, term, mterm, k = D(1), D(1), D(1), D(1), 0
    while True:  # S = Σ (-1)^k (2k+1)!! u^k, M = Σ (-1)^k (2k-1)!! u^k: sum to the smallest term
        k += 1
        nxt = -term * (2 * k + 1) * u
        nxt_m = -mterm * (2 * k - 1) * u
        if abs(nxt) >= abs(term) or abs(nxt) < D(10) ** -60:
            break
        term, mterm = nxt, nxt_m
        s += term
        m += mterm
    log_h = -(z * z) / 2 - (2 * PI).sqrt().ln() - 2 * (-z).ln() + s.ln()
    return float(log_h), float(-z * m / s)


def main():
    global PI
    decimal.getcontext().prec = 900
    PI = machin_pi()
    rng = np.random.default_rng(1234)
    x = rng.uniform(0, 1, size=(8, 3))
    y = np.sin(6 * x[:, 0]) + x[:, 1] ** 2 - 0.5 * x[:, 2] + 0.05 * rng.standard_normal(8)
    theta = np.log(np.array([0.3, 0.5, 0.8, 1.3, 0.01]))
    xs = rng.uniform(0, 1, size=(5, 3))
    xs[0] = x[2]  # at a training point: variance ≈ noise-limited
    mean, var, lml = posterior_np(x, y, theta, xs)
    lml_t, grad = lml_grad_torch(x, y, theta)
    assert abs(lml_t - lml) < 1e-9 * abs(lml), (lml_t, lml)
    dmean, dvar = prediction_grads_torch(x, y, theta, xs)

    z_precise = [-40.0, -30.0, -25.0, -20.5, -20.0, -19.5, -15.0, -10.0, -5.0, -2.0, -1.0001, -1.0, -0.9999,
                 -0.5, 0.0, 0.5, 1.0, 3.0, 10.0]
    z_series = [-50.0, -100.0, -1e3, -1e5, -1e8]
    for z in (-40.0, -25.0):  # the two independent methods agree where both apply
        assert abs(log_h_series(z)[0] - log_h_decimal(z)[0]) < 1e-12 * abs(log_h_series(z)[0])
    lh, dlh = [], []
    for z in z_precise:
        a, b = log_h_decimal(z)
        lh.append(a)
        dlh.append(b)
    for z in z_series:
        a, b = log_h_series(z)
        lh.append(a)
        dlh.append(b)
    # float64 math.erfc at moderate z, as the brief's simple cross-check of the decimal values
    z_float = np.linspace(-5, 5, 21)
    h_float = [math.exp(-z * z / 2) / math.sqrt(2 * math.pi) + z * 0.5 * math.erfc(-z / math.sqrt(2)) for z in z_float]

    t = lambda a: torch.tensor(np.asarray(a, dtype=np.float64))
    out = {"x": t(x), "y": t(y), "theta": t(theta), "xs": t(xs), "mean": t(mean), "var": t(var),
           "lml": t([lml]), "lml_grad": t(grad), "dmean": t(dmean), "dvar": t(dvar),
           "z": t(z_precise + z_series), "log_h": t(lh), "dlog_h": t(dlh),
           "z_float": t(z_float), "h_float": t(h_float)}
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "gp.pt")
    torch.save(out, path)
    print("wrote", path)


if __name__ == "__main__":
    main()
