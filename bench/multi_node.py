#!/usr/bin/env python3
"""Multi-node scaling measured in a namespace cluster (tests/cluster/netns_cluster.py), and
`xtrain plan`'s prediction of each run. Run by bench/multi_node.sh (root: it makes namespaces).

For each link (unshaped veth, tbf 25, 10, 1 gbit):
  1. bench_collective_sweep on 2 and 4 nodes (collective_sweep.py, the same in torch.distributed, when
     the C++ one is not built): all-reduce (Gloo's ring), ring reduce-scatter and ring all-gather of 4 KiB..64 MiB; alpha and beta fitted by least squares on relative error over the ops
     and both sizes of group, 1 MiB and up (t = k_b·n·beta + k_a·alpha, with the ring's k; fit_alpha_beta
     says why not the smaller ones), printed with the fit's error over every size.
  2. xtrain train with 1 rank per node (RANK/WORLD_SIZE/MASTER_ADDR set as a launcher would,
     GLOO_SOCKET_IFNAME=eth0, one thread each), a few steps; tokens/s from metrics.jsonl between
     the first and last logged step; efficiency = tokens/s(N) / (N x tokens/s(1)).
The 1-node runs calibrate compute: achievable FLOP/s per rank = 6·N_params·tokens / step time. The
prediction for N nodes is `xtrain plan --json` with that FLOP/s x min(1, cores / ranks) (the nodes
share this machine's cores), the link's fitted alpha and beta, and --overlap-fraction 0 (on two
shared cores overlap hides nothing: bench/RESULTS_dp.md). Every run times its stages
(wall_clock_breakdown): rank 0's forward + backward + optimizer + data is printed as the measured
compute per rank beside the plan's assumed compute term, and its communication stage beside the
plan's exposed communication. Writes OUT/multi_node.svg and OUT/runs.json.
  usage: multi_node.py BUILD_DIR OUT_DIR   (env STEPS, GPT2_STEPS, RATES="none 25gbit 10gbit 1gbit",
         CALIBRATION_FROM=<an earlier log>: its 1-node runs instead of new ones,
         ONLY="1gbit-gpt2s-*-2-*,...": only the runs whose tag matches one of these fnmatch patterns)
         multi_node.py --replot LOG OUT_DIR  (the table and plot again from the printed log, also a partial one)
"""
import fnmatch
import functools
import json
import os
import random
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "cluster"))
from netns_cluster import Cluster, Skip  # noqa: E402

CORES = os.cpu_count() or 1
STEPS = int(os.environ.get("STEPS", "4"))
GPT2_STEPS = int(os.environ.get("GPT2_STEPS", "3"))
MODELS = {  # name -> --set overrides on configs/default.json (short steps: the cores are shared)
    "gpt": ["train_micro_batch_size_per_gpu=4"],
    "gpt2s": ["xtrain.model.layers=12", "xtrain.model.d_model=768", "xtrain.model.heads=12",
              "xtrain.model.seq_len=64", "train_micro_batch_size_per_gpu=2"],
}
STRATEGIES = {"dp": ["zero_optimization.stage=0"], "zero2": ["zero_optimization.stage=2"]}
LAYOUT = {"dp": "DP", "zero2": "ZeRO-2"}


def run_matrix(rates):
    """(rate, model, strategy, nodes, overlap, comm dtype) of every multi-node run."""
    runs = []
    for rate in rates:
        for strat in STRATEGIES:
            runs.append((rate, "gpt", strat, 4, True, "fp32"))
            if rate == "10gbit":
                runs += [(rate, "gpt", strat, 2, True, "fp32"), (rate, "gpt2s", strat, 4, True, "fp32")]
            if rate == "1gbit":
                runs.append((rate, "gpt", strat, 4, True, "bf16"))
        if rate == "10gbit":
            runs.append((rate, "gpt2s", "dp", 2, True, "fp32"))
        if rate == "1gbit":
            runs += [(rate, "gpt", "dp", 4, False, "fp32"), (rate, "gpt2s", "dp", 4, True, "fp32")]
            # GPT-2-small on 2 nodes (4 ranks of it on 2 shared cores take minutes a step): overlap
            # and communication_data_type where the gradients (340 MB fp32) make the link matter
            for strat in STRATEGIES:
                runs += [(rate, "gpt2s", strat, 2, True, "fp32"), (rate, "gpt2s", strat, 2, True, "bf16")]
            runs.append((rate, "gpt2s", "dp", 2, False, "fp32"))
    only = [p for p in os.environ.get("ONLY", "").split(",") if p]
    if only:
        runs = [r for r in runs if any(fnmatch.fnmatch(tag_of(r), p) for p in only)]
    return runs


def tag_of(run):
    rate, model, strat, nodes, overlap, comm = run
    return "%s-%s-%s-%d-%s-%s" % (rate, model, strat, nodes, "ov" if overlap else "noov", comm)


def sets_for(model, strat, steps, overlap=True, comm="fp32"):
    s = ["xtrain.steps=%d" % steps, "xtrain.log_interval=1", "xtrain.eval_interval=1000000",
         "xtrain.save_interval=1000000", "xtrain.threads=1", "zero_optimization.overlap_comm=%s" % str(overlap).lower(),
         "wall_clock_breakdown=true", "bf16.enabled=false"]  # fp32 compute, as recorded (the default is bf16)
    if comm != "fp32":
        s.append("communication_data_type=%s" % comm)
    return s + MODELS[model] + STRATEGIES[strat]


def set_args(sets):
    out = ["--config", os.path.join(ROOT, "configs", "default.json")]
    for s in sets:
        out += ["--set", s]
    return out


def launch(cluster, nodes, argv, out_log, timeout):
    """argv on nodes 0..nodes-1 as ranks of one job; raises with the log tail when one fails."""
    port = str(29000 + random.randrange(900))
    procs = []
    with open(out_log, "w") as log:
        for i in range(nodes):
            env = {"RANK": str(i), "WORLD_SIZE": str(nodes), "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1",
                   "MASTER_ADDR": cluster.nodes[0].addr, "MASTER_PORT": port, "GLOO_SOCKET_IFNAME": "eth0",
                   "OMP_NUM_THREADS": "1"}
            procs.append(cluster.popen(i, argv, env=env, stdout=log if i == 0 else subprocess.DEVNULL,
                                       stderr=subprocess.STDOUT))
        deadline = time.time() + timeout
        codes = []
        for p in procs:
            try:
                codes.append(p.wait(timeout=max(1, deadline - time.time())))
            except subprocess.TimeoutExpired:
                p.kill()
                codes.append(-9)
    if any(codes):
        tail = open(out_log).read()[-3000:]
        raise RuntimeError("ranks exited %s running %s:\n%s" % (codes, " ".join(argv[:3]), tail))


def measure(run_dir):
    cfg = json.load(open(os.path.join(run_dir, "config.json")))
    tokens_per_step = cfg["train_batch_size"] * cfg["xtrain"]["model"]["seq_len"]
    rows = [json.loads(line) for line in open(os.path.join(run_dir, "metrics.jsonl"))]
    rows = [r for r in rows if "train/loss" in r]
    a, b = rows[0], rows[-1]  # the first logged step is the warm-up boundary
    step_s = (b["time"] - a["time"]) / (b["step"] - a["step"])
    # rank 0's stage timers (wall_clock_breakdown) after the warm-up step: compute is forward +
    # backward + optimizer (+ data), communication the time spent waiting on the gradient reduction
    later = rows[1:] or rows
    stage = lambda k: sum(r.get("time/%s_ms" % k, 0.0) for r in later) / len(later) / 1e3  # noqa: E731
    return {"step_s": step_s, "tokens_per_s": tokens_per_step / step_s, "tokens_per_step": tokens_per_step,
            "compute_s": stage("forward") + stage("backward") + stage("optimizer") + stage("data"),
            "comm_s": stage("communication")}


def train(cluster, build, out, nodes, model, strat, overlap, comm, tag):
    steps = STEPS if model == "gpt" else GPT2_STEPS
    run_dir = os.path.join(out, tag)
    shutil.rmtree(run_dir, ignore_errors=True)
    argv = [os.path.join(build, "xtrain"), "train"] + set_args(sets_for(model, strat, steps, overlap, comm))
    argv += ["--output", run_dir]
    launch(cluster, nodes, argv, run_dir + ".log", timeout=600)
    r = measure(run_dir)
    print("  %-44s %8.0f tokens/s  %8.1f ms/step" % (tag, r["tokens_per_s"], r["step_s"] * 1e3), flush=True)
    print("    rank 0 stages: compute %.1f ms, communication %.1f ms" % (r["compute_s"] * 1e3, r["comm_s"] * 1e3), flush=True)
    return r


# ---- collectives and the alpha-beta fit -----------------------------------------------------------

def ring_coefficients(op, p, n):
    """(k_beta, k_alpha): t = k_beta·beta + k_alpha·alpha for a ring of p ranks over n bytes."""
    if op == "all_reduce":
        return 2.0 * (p - 1) / p * n, 2.0 * (p - 1)
    return float(p - 1) / p * n, float(p - 1)


FIT_MIN_BYTES = 1 << 20


def fit_alpha_beta(points):
    """Least squares on relative error, minimise sum(((kb·beta + ka·alpha) - t) / t)^2, over the
    collectives of at least FIT_MIN_BYTES: the sizes training sends (gradient buckets, ZeRO
    partitions). Below that, on these tbf-shaped veth links, a collective's time is set by the token
    bucket's burst and TCP's acknowledgement timing rather than by alpha + n·beta (64 KiB on 4 nodes
    at 1 gbit: 3 ms, 4 KiB: 0.3 ms); fitted together with the large ones, those points pulled beta to
    1.33 Gbit/s on a 1 Gbit/s link, every large collective then 1.5x its fit. A negative alpha is
    refitted as 0. The errors below are reported over every point, the small ones too."""
    fitted = [p for p in points if p["bytes"] >= FIT_MIN_BYTES] or points
    s_bb = s_ba = s_aa = s_bt = s_at = 0.0
    for p in fitted:
        kb, ka = ring_coefficients(p["op"], p["world"], p["bytes"])
        kb, ka, t = kb / p["seconds"], ka / p["seconds"], 1.0
        s_bb, s_ba, s_aa, s_bt, s_at = s_bb + kb * kb, s_ba + kb * ka, s_aa + ka * ka, s_bt + kb * t, s_at + ka * t
    det = s_bb * s_aa - s_ba * s_ba
    beta = (s_bt * s_aa - s_at * s_ba) / det
    alpha = (s_bb * s_at - s_ba * s_bt) / det
    if alpha < 0:
        alpha, beta = 0.0, s_bt / s_bb
    errs = []
    for p in points:
        kb, ka = ring_coefficients(p["op"], p["world"], p["bytes"])
        p["fit_seconds"] = kb * beta + ka * alpha
        errs.append(abs(p["fit_seconds"] - p["seconds"]) / p["seconds"])
    rms = (sum(e * e for e in errs) / len(errs)) ** 0.5
    big = [e for p, e in zip(points, errs) if p["bytes"] >= 1 << 20]
    return {"alpha_s": alpha, "beta_s_per_byte": beta, "bytes_per_s": 1.0 / beta, "rms_rel_err": rms,
            "max_rel_err": max(errs), "max_rel_err_1mib_up": max(big) if big else float("nan")}


@functools.lru_cache(maxsize=None)  # decided once: every link measured by the same program
def sweep_program(build):
    """xtrain's Communicator (bench/collective_sweep.cpp) when built, else the same sweep in torch.distributed."""
    exe = os.path.join(build, "bench", "bench_collective_sweep")
    if os.access(exe, os.X_OK):
        return (exe,)
    return ("/usr/bin/python3", os.path.join(ROOT, "bench", "collective_sweep.py"))


def sweep(cluster, build, out, rate):
    points = []
    for nodes in (2, 4):
        log = os.path.join(out, "sweep-%s-%d.log" % (rate, nodes))
        launch(cluster, nodes, list(sweep_program(build)) + ["3", str(64 << 20)], log, 300)
        points += [json.loads(line) for line in open(log) if line.startswith("{")]
    fit = fit_alpha_beta(points)
    print("  alpha %.1f us  beta^-1 %.3f GB/s (%.2f Gbit/s)  fit error: rms %.0f%%, max %.0f%% (>= 1 MiB: %.0f%%)"
          % (fit["alpha_s"] * 1e6, fit["bytes_per_s"] / 1e9, fit["bytes_per_s"] * 8 / 1e9, fit["rms_rel_err"] * 100,
             fit["max_rel_err"] * 100, fit["max_rel_err_1mib_up"] * 100), flush=True)
    for p in points:
        print("    %-15s p=%d %10d B  %9.3f ms  fit %9.3f ms" % (p["op"], p["world"], p["bytes"], p["seconds"] * 1e3,
                                                                p["fit_seconds"] * 1e3))
    return {"fit": fit, "points": points}


# ---- the prediction ------------------------------------------------------------------------------

def predict(build, run, fit, flops_per_rank):
    rate, model, strat, nodes, overlap, comm = run
    flops = flops_per_rank * min(1.0, CORES / nodes)
    argv = [os.path.join(build, "xtrain"), "plan", "--json", "--nodes", str(nodes), "--gpus-per-node", "1",
            "--inter-bw", "%.6gMB/s" % (fit["bytes_per_s"] / 1e6), "--inter-alpha", "%.6gus" % max(0.0, fit["alpha_s"] * 1e6),
            "--memory-per-gpu", "24GiB", "--flops-per-gpu", "%.6g" % flops, "--overlap-fraction", "0"]
    argv += set_args(sets_for(model, strat, STEPS, overlap, comm))
    plan = json.loads(subprocess.run(argv, check=True, capture_output=True, text=True).stdout)
    layout = next(lay for lay in plan["layouts"] if lay["name"] == LAYOUT[strat])
    return layout["time_s"], plan["model"]["parameters"]


def calibrate(build, one_node):
    """Achievable FLOP/s per rank of each (model, strategy) from its 1-node run, in the plan's terms."""
    flops = {}
    for (model, strat), r in one_node.items():
        argv = [os.path.join(build, "xtrain"), "plan", "--json", "--memory-per-gpu", "24GiB", "--flops-per-gpu", "1e12"]
        argv += set_args(sets_for(model, strat, STEPS))
        n = json.loads(subprocess.run(argv, check=True, capture_output=True, text=True).stdout)["model"]["parameters"]
        flops[(model, strat)] = 6.0 * n * r["tokens_per_step"] / r["step_s"]
        print("  %-6s %-5s 1 node: %.1f ms/step -> %.1f GFLOP/s achievable (6·N·tokens, N = %.2fM)"
              % (model, strat, r["step_s"] * 1e3, flops[(model, strat)] / 1e9, n / 1e6), flush=True)
    return flops


def svg_plot(path, results, sweeps):
    """Left: measured vs predicted step time (y = x, ±20%). Right: collective time vs bytes with the fits."""
    import math
    W, H, M = 980, 420, 50
    colors = {"none": "#555", "25gbit": "#1b9e77", "10gbit": "#d95f02", "1gbit": "#7570b3"}
    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="11">'
           % (W, H), '<rect width="100%" height="100%" fill="white"/>']
    pw = (W - 3 * M) / 2

    def axis(x0, title, xl, yl):
        out.extend(['<rect x="%.0f" y="%d" width="%.0f" height="%d" fill="none" stroke="#999"/>' % (x0, M, pw, H - 2 * M),
                    '<text x="%.0f" y="%d" font-size="13">%s</text>' % (x0, M - 12, title),
                    '<text x="%.0f" y="%d">%s</text>' % (x0 + pw / 2 - 60, H - 12, xl),
                    '<text x="%.0f" y="%d" transform="rotate(-90 %.0f %d)">%s</text>' % (x0 - 36, H / 2 + 40, x0 - 36, H / 2 + 40, yl)])

    def logmap(v, lo, hi, a, b):
        return a + (math.log10(v) - lo) / (hi - lo) * (b - a)

    ts = [r[k] for r in results if r["nodes"] > 1 for k in ("measured_step_s", "predicted_step_s")]
    lo, hi = math.floor(math.log10(min(ts))), math.ceil(math.log10(max(ts)))
    axis(M, "step time: predicted vs measured (multi-node runs)", "measured s/step (log)", "predicted (log)")
    X = lambda v: logmap(v, lo, hi, M, M + pw)  # noqa: E731
    Y = lambda v: logmap(v, lo, hi, H - M, M)  # noqa: E731
    for f, dash in ((1.0, ""), (1.2, "4 3"), (1 / 1.2, "4 3")):
        out.append('<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#bbb" stroke-dasharray="%s"/>'
                   % (X(10 ** lo), Y(10 ** lo * f), X(10 ** hi / f), Y(10 ** hi), dash))
    for e in range(lo, hi + 1):
        out.append('<text x="%.1f" y="%d">%g</text>' % (X(10 ** e) - 8, H - M + 14, 10 ** e))
        out.append('<text x="%d" y="%.1f">%g</text>' % (M - 30, Y(10 ** e) + 4, 10 ** e))
    for r in results:
        if r["nodes"] > 1:
            shape = "circle" if r["model"] == "gpt" else "rect"
            x, y = X(r["measured_step_s"]), Y(r["predicted_step_s"])
            out.append('<circle cx="%.1f" cy="%.1f" r="4" fill="%s"/>' % (x, y, colors[r["rate"]]) if shape == "circle" else
                       '<rect x="%.1f" y="%.1f" width="8" height="8" fill="%s"/>' % (x - 4, y - 4, colors[r["rate"]]))
    x0 = 2 * M + pw
    axis(x0, "collective time vs bytes (dots measured, lines fitted)", "bytes (log)", "seconds (log)")
    pts = [p for s in sweeps.values() for p in s["points"]]
    blo, bhi = math.floor(math.log10(min(p["bytes"] for p in pts))), math.ceil(math.log10(max(p["bytes"] for p in pts)))
    slo = math.floor(math.log10(min(p["seconds"] for p in pts)))
    shi = math.ceil(math.log10(max(max(p["seconds"], p["fit_seconds"]) for p in pts)))
    XB = lambda v: logmap(v, blo, bhi, x0, x0 + pw)  # noqa: E731
    YS = lambda v: logmap(max(v, 10 ** slo), slo, shi, H - M, M)  # noqa: E731
    for i, (rate, s) in enumerate(sweeps.items()):
        c = colors[rate]
        out.append('<text x="%.0f" y="%d" fill="%s">%s: %.0f us, %.2f GB/s</text>'
                   % (x0 + 8, M + 14 + 14 * i, c, rate, s["fit"]["alpha_s"] * 1e6, s["fit"]["bytes_per_s"] / 1e9))
        for p in s["points"]:
            if p["op"] == "all_reduce" and p["world"] == 4:
                out.append('<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>' % (XB(p["bytes"]), YS(p["seconds"]), c))
        line = sorted((p["bytes"], p["fit_seconds"]) for p in s["points"] if p["op"] == "all_reduce" and p["world"] == 4)
        out.append('<polyline fill="none" stroke="%s" points="%s"/>' % (c, " ".join("%.1f,%.1f" % (XB(b), YS(t)) for b, t in line)))
    out.append('<text x="%.0f" y="%d">all-reduce over 4 nodes shown; circles: default GPT, squares: GPT-2-small blocks</text>'
               % (M, H - 28))
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out))


def report(results):
    print("\n%-7s %-6s %-5s %5s %7s %4s | %10s %10s %6s | %9s %9s %7s | %21s"
          % ("link", "model", "strat", "nodes", "overlap", "comm", "tokens/s", "ms/step", "eff", "pred ms", "comm ms",
             "pred/meas", "compute ms meas/plan"))
    for r in results:
        comp = "-"
        if "measured_compute_s" in r:  # rank 0's stage timers; the plan's compute term
            comp = "%.0f / %.0f" % (r["measured_compute_s"] * 1e3, r.get("predicted_compute_s", r["measured_compute_s"]) * 1e3)
        print("%-7s %-6s %-5s %5d %7s %4s | %10.0f %10.1f %5.0f%% | %9.1f %9.1f %7.2f | %21s"
              % (r["rate"], r["model"], r["strat"], r["nodes"], "on" if r["overlap"] else "off", r["comm"],
                 r["tokens_per_s"], r["measured_step_s"] * 1e3, r["efficiency"] * 100, r["predicted_step_s"] * 1e3,
                 r["predicted_comm_s"] * 1e3, r["predicted_step_s"] / r["measured_step_s"], comp))
    multi = [r for r in results if r["nodes"] > 1]
    within = [r for r in multi if abs(r["predicted_step_s"] / r["measured_step_s"] - 1) <= 0.2]
    print("\nprediction within 20%% of measured: %d of %d multi-node runs" % (len(within), len(multi)))
    for rate in sorted({r["rate"] for r in multi}):
        rs = [r for r in multi if r["rate"] == rate]
        print("  %-7s %d of %d" % (rate, sum(1 for r in rs if r in within), len(rs)))


def main(build, out):
    rates = os.environ.get("RATES", "none 25gbit 10gbit 1gbit").split()
    os.makedirs(out, exist_ok=True)
    print("# %s  %d cores  load %s  STEPS=%d GPT2_STEPS=%d  sweep: %s"
          % (time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), CORES, open("/proc/loadavg").read().split()[0], STEPS,
             GPT2_STEPS, os.path.basename(sweep_program(build)[-1])))
    results, sweeps, one_node, flops = [], {}, {}, {}
    for rate in rates:
        with Cluster(nodes=4, rate=None if rate == "none" else rate) as c:
            print("link %s (load %s)" % (rate, open("/proc/loadavg").read().split()[0]), flush=True)
            if not one_node and os.environ.get("CALIBRATION_FROM"):  # an earlier log's 1-node runs
                one_node = one_node_from_log(os.environ["CALIBRATION_FROM"])
                flops = calibrate(build, one_node)
            if not one_node:  # compute alone: the same on every link
                for model in MODELS:
                    for strat in STRATEGIES:
                        one_node[(model, strat)] = train(c, build, out, 1, model, strat, True, "fp32", "%s-%s-1" % (model, strat))
                flops = calibrate(build, one_node)
            sweeps[rate] = sweep(c, build, out, rate)
            for run in [r for r in run_matrix(rates) if r[0] == rate]:
                _, model, strat, nodes, overlap, comm = run
                tag = tag_of(run)
                m = train(c, build, out, nodes, model, strat, overlap, comm, tag)
                pred, _ = predict(build, run, sweeps[rate]["fit"], flops[(model, strat)])
                base = one_node[(model, strat)]
                print("    predicted %.1f ms/step (exposed communication %.1f ms): predicted / measured %.2f"
                      % (pred["step"] * 1e3, pred["dp_exposed"] * 1e3, pred["step"] / m["step_s"]), flush=True)
                print("    compute per rank: measured %.1f ms, plan assumed %.1f ms (1-node calibration x min(1, %d cores"
                      " / %d ranks)); communication: measured %.1f ms, plan %.1f ms"
                      % (m["compute_s"] * 1e3, pred["compute"] * 1e3, CORES, nodes, m["comm_s"] * 1e3,
                         pred["dp_exposed"] * 1e3), flush=True)
                results.append({"rate": rate, "model": model, "strat": strat, "nodes": nodes, "overlap": overlap,
                                "comm": comm, "tokens_per_s": m["tokens_per_s"], "measured_step_s": m["step_s"],
                                "efficiency": m["tokens_per_s"] / (nodes * base["tokens_per_s"]),
                                "predicted_step_s": pred["step"], "predicted_comm_s": pred["dp_exposed"],
                                "measured_compute_s": m["compute_s"], "predicted_compute_s": pred["compute"],
                                "measured_comm_s": m["comm_s"]})
    for (model, strat), r in one_node.items():
        results.insert(0, {"rate": "-", "model": model, "strat": strat, "nodes": 1, "overlap": True, "comm": "fp32",
                           "tokens_per_s": r["tokens_per_s"], "measured_step_s": r["step_s"], "efficiency": 1.0,
                           "predicted_step_s": r["step_s"], "predicted_comm_s": 0.0,
                           **({"measured_compute_s": r["compute_s"]} if "compute_s" in r else {})})
    report(results)
    with open(os.path.join(out, "runs.json"), "w") as f:
        json.dump({"results": results, "sweeps": sweeps}, f, indent=1)
    svg_plot(os.path.join(out, "multi_node.svg"), results, sweeps)
    print("plot: %s\nruns: %s" % (os.path.join(out, "multi_node.svg"), os.path.join(out, "runs.json")))


def one_node_from_log(log_path):
    """The 1-node runs ("  gpt-dp-1   685 tokens/s   1495.4 ms/step") of an earlier log, as train() returns them."""
    import re
    one = {}
    for line in open(log_path):
        m = re.match(r"^  (\w+)-(\w+)-1\s+([\d.]+) tokens/s\s+([\d.]+) ms/step$", line.rstrip("\n"))
        if m:
            tps, step = float(m.group(3)), float(m.group(4)) / 1e3
            sets = dict(x.split("=") for x in MODELS[m.group(1)])  # exact: the log's tokens/s is rounded
            tokens = int(sets["train_micro_batch_size_per_gpu"]) * int(sets.get("xtrain.model.seq_len", 256))
            one[(m.group(1), m.group(2))] = {"step_s": step, "tokens_per_s": tps, "tokens_per_step": tokens}
            print("  %s-%s-1 %28.0f tokens/s  %8.1f ms/step  (from %s)" % (m.group(1), m.group(2), tps, step * 1e3, log_path))
    return one


def replot(log_path, out):
    """Table and plot again from a run's printed log (also a partial one: a run cut short)."""
    import re
    results, sweeps, one, rate, pending = [], {}, {}, None, None
    run_re = re.compile(r"^  (\S+)\s+([\d.]+) tokens/s\s+([\d.]+) ms/step$")
    pred_re = re.compile(r"^    predicted ([\d.]+) ms/step \(exposed communication ([\d.]+) ms\)")
    pt_re = re.compile(r"^    (all_reduce|reduce_scatter)\s+p=(\d+)\s+(\d+) B\s+([\d.]+) ms\s+fit\s+([\d.]+) ms$")
    fit_re = re.compile(r"^  alpha ([-\d.]+) us\s+beta\^-1 ([\d.]+) GB/s")
    for line in open(log_path):
        line = line.rstrip("\n")
        if line.startswith("link "):
            rate = line.split()[1]
        elif fit_re.match(line):
            a, b = fit_re.match(line).groups()
            sweeps.setdefault(rate, {"points": []})["fit"] = {"alpha_s": float(a) * 1e-6, "bytes_per_s": float(b) * 1e9}
        elif pt_re.match(line):
            op, p_, n, t, f = pt_re.match(line).groups()
            sweeps.setdefault(rate, {"points": []})["points"].append(
                {"op": op, "world": int(p_), "bytes": int(n), "seconds": float(t) / 1e3, "fit_seconds": float(f) / 1e3})
        elif run_re.match(line):
            tag, tps, ms = run_re.match(line).groups()
            parts = tag.split("-")
            if len(parts) == 3:
                one[(parts[0], parts[1])] = float(tps)
                results.append({"rate": "-", "model": parts[0], "strat": parts[1], "nodes": 1, "overlap": True,
                                "comm": "fp32", "tokens_per_s": float(tps), "measured_step_s": float(ms) / 1e3,
                                "efficiency": 1.0, "predicted_step_s": float(ms) / 1e3, "predicted_comm_s": 0.0})
            else:
                pending = {"rate": parts[0], "model": parts[1], "strat": parts[2], "nodes": int(parts[3]),
                           "overlap": parts[4] == "ov", "comm": parts[5], "tokens_per_s": float(tps),
                           "measured_step_s": float(ms) / 1e3}
                pending["efficiency"] = pending["tokens_per_s"] / (pending["nodes"] * one[(parts[1], parts[2])])
        elif pred_re.match(line) and pending:
            step, comm = pred_re.match(line).groups()
            pending.update(predicted_step_s=float(step) / 1e3, predicted_comm_s=float(comm) / 1e3)
            results.append(pending)
            pending = None
    report(results)
    svg_plot(os.path.join(out, "multi_node.svg"), results, sweeps)
    print("plot: %s" % os.path.join(out, "multi_node.svg"))


if __name__ == "__main__":
    if sys.argv[1] == "--replot":  # multi_node.py --replot LOG OUT_DIR
        replot(sys.argv[2], sys.argv[3])
        sys.exit(0)
    try:
        main(sys.argv[1], sys.argv[2])
    except Skip as e:
        print("SKIP: %s" % e)
        sys.exit(77)
