#!/usr/bin/env python3
"""Runs every command line of README.md and docs/*.md with XTRAIN_SMOKE=1 (tiny settings:
src/xtrain/run/smoke.h) and fails when one fails, printing the command and its output.

Command blocks are the fenced blocks with no language (or sh/bash/shell/console); a trailing `\\`
joins lines and `# ...` is a comment. They run in README order, as argv (no shell), in a fresh
folder holding links to the repository's configs/, bench/ and examples/; leading `VAR=value` words
are the command's environment (a value under `build/` names the build folder of BUILD/xtrain, so
`PYTHONPATH=build/python` finds the Python package). Before them the README's own
training command runs with `--output runs/mine`, so the commands that use that run find it.
Placeholders get the concrete values of SUBSTITUTIONS; commands that need another machine (or a
GPU) are in SKIP, with the reason, and are reported, never dropped silently. `dashboard` is a
server: started, probed on 127.0.0.1, stopped; `serve` is started on a free port and kept running
for the lines after it (`localhost:8000` in them is that port), then stopped. A table entry that matches no command is an error
too (the README changed: update the table).

usage: readme_commands.py BUILD/xtrain [--source DIR] [--only REGEX] [--keep]
"""
import argparse
import glob
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

SUBCOMMANDS = ["train", "eval", "generate", "ckpt", "config", "dashboard", "tune", "compress", "export", "launch",
               "data", "serve", "plan", "federated"]

# Normalised command (tokens joined by one space) -> why it cannot run here.
SKIP = {
    "scripts/test": "runs the whole ctest suite, which contains this test (recursion; tens of minutes)",
    "build/xtrain launch -N 2 --nnodes 2 --node-rank 0 --master-addr 10.0.0.1 -- train --config my.json --output /shared/run":
        "node 0 of two machines: run by e2e_cluster_nodes_2 (tests/e2e/cluster/launch_paths.py) on namespace nodes",
    "build/xtrain launch -N 2 --nnodes 2 --node-rank 1 --master-addr 10.0.0.1 -- train --config my.json --output /shared/run":
        "node 1 of two machines: run by e2e_cluster_nodes_2 (tests/e2e/cluster/launch_paths.py) on namespace nodes",
    "build/xtrain launch --hostfile hosts --include node1@node2:0,1 -- train --config my.json --output /shared/run":
        "node1, node2 over ssh: run by e2e_cluster_ssh_2 (tests/e2e/cluster/launch_paths.py) on namespace nodes",
    "srun -N 2 -n 4 build/xtrain train --config my.json":
        "a Slurm cluster: run by e2e_cluster_slurm (tests/e2e/cluster/test_slurm.py) on namespace nodes",
    "mpirun -np 4 --host node0:2,node1:2 build/xtrain train --config my.json":
        "node0 and node1: run by e2e_cluster_mpirun (tests/e2e/cluster/test_mpirun.py) on namespace nodes",
}
# README's "Use xtrain as a library": run, in this order and with these words, by e2e_examples
# (tests/e2e/examples.py reads the same block), against an install into build/_install.
for _line in [
        "cmake --install build --prefix /opt/xtrain",
        "cmake -S examples/custom_model -B build-example -DCMAKE_PREFIX_PATH=/opt/xtrain",
        "cmake --build build-example",
        "/opt/xtrain/bin/xtrain launch -N 2 --program build-example/custom_model -- examples/custom_model/ds_config.json",
        "cmake -S examples/plugin -B build-plugin -DCMAKE_PREFIX_PATH=/opt/xtrain",
        "cmake --build build-plugin",
        "/opt/xtrain/bin/xtrain train --plugin build-plugin/libmine.so --config examples/plugin/ds_config.json"]:
    SKIP[_line] = "run by e2e_examples (tests/e2e/examples.py) against the installed package"


# A whole line that stands for several commands.
LINE_SUBSTITUTIONS = {
    # One README line names two things: the top-level help and each command's help.
    "build/xtrain --help, build/xtrain <command> --help":
        ["build/xtrain --help"] + ["build/xtrain %s --help" % c for c in SUBCOMMANDS],
}


def token_substitutions(ctx):
    """Placeholder text inside an argument -> its value here (str.replace, in this order)."""
    return [
        # The README's own example config (its ```json block) stands for the user's file.
        ("my_ds_config.json", ctx["example_config"]),
        ("my.json", ctx["example_config"]),
        # A disk for NVMe offload: a folder of the test's own.
        ("/mnt/nvme", ctx["nvme"]),
        # The study the README's previous tune command created.
        ("runs/tune-<time>", latest_study(ctx)),
        # `xtrain serve` listens on a free port here (start_serve); the README's curl lines use it.
        ("localhost:8000", "127.0.0.1:%d" % ctx.get("serve_port", 8000)),
    ]


def latest_study(ctx):
    studies = sorted(glob.glob(os.path.join(ctx["cwd"], "runs", "tune-*")))
    return os.path.relpath(studies[-1], ctx["cwd"]) if studies else "runs/tune-<time>"


def fenced_blocks(text):
    """(info string, lines) of every fenced block."""
    blocks, current, info = [], None, ""
    for line in text.splitlines():
        fence = re.match(r"^\s*```(.*)$", line)
        if fence and current is None:
            current, info = [], fence.group(1).strip()
        elif fence:
            blocks.append((info, current))
            current = None
        elif current is not None:
            current.append(line)
    return blocks


def command_lines(lines):
    """Logical command lines: continuation lines joined, comments and blank lines dropped."""
    out, pending = [], ""
    for line in lines:
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        full = (pending + line).strip()
        pending = ""
        if not full or full.startswith("#"):
            continue
        # A comment is "  # ..." after the command (shlex would also cut a '#' inside a word).
        full = re.split(r"\s+#\s", full, maxsplit=1)[0].strip()
        out.append(full)
    return out


def collect(source):
    """(file, line text) of every command, README first, then docs/*.md in name order."""
    files = [os.path.join(source, "README.md")] + sorted(glob.glob(os.path.join(source, "docs", "*.md")))
    commands, example = [], None
    for path in files:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        for info, lines in fenced_blocks(text):
            if info == "json" and path.endswith("README.md") and example is None:
                example = "\n".join(lines) + "\n"
            if info in ("", "sh", "bash", "shell", "console"):
                commands += [(os.path.relpath(path, source), c) for c in command_lines(lines)]
    return commands, example


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def expand(line):
    """argv lists for one README line; an optional `[--flag]` gives the command without and with it."""
    out = []
    for text in LINE_SUBSTITUTIONS.get(line, [line]):
        variants = [[]]
        for token in shlex.split(text):
            optional = re.fullmatch(r"\[(.+)\]", token)
            if optional:
                variants = variants + [v + [optional.group(1)] for v in variants]
            else:
                variants = [v + [token] for v in variants]
        out += variants
    return out


def split_env(argv, ctx):
    """(environment, argv) of a command with leading `VAR=value` words; `build/...` values point
    into the build folder of the xtrain under test."""
    env = dict(ctx["env"])
    while argv and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", argv[0]):
        name, value = argv[0].split("=", 1)
        if value == "build" or value.startswith("build/"):
            value = os.path.join(os.path.dirname(ctx["xtrain"]), value[len("build/"):])
        env[name] = value
        argv = argv[1:]
    return env, argv


def resolve(argv, ctx):
    programs = {"build/xtrain": ctx["xtrain"], "scripts/xtrain": os.path.join(ctx["source"], "scripts", "xtrain")}
    out = [programs.get(argv[0], argv[0])]
    for token in argv[1:]:
        for placeholder, value in token_substitutions(ctx):
            token = token.replace(placeholder, value)
        out.append(token)
    return out


def run(argv, ctx, timeout=150):
    """(ok, output): the command in its own process group, killed whole on a timeout."""
    try:
        p = subprocess.Popen(argv, cwd=ctx["cwd"], env=ctx["env"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             start_new_session=True)
    except OSError as e:  # no such program
        return False, "cannot start: %s" % e
    try:
        out, _ = p.communicate(timeout=timeout)
        return p.returncode == 0, out.decode("utf-8", "replace") + "\n[exit %d]" % p.returncode
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, _ = p.communicate()
        return False, out.decode("utf-8", "replace") + "\n[killed after %d s]" % timeout


def run_server(argv, ctx):
    """dashboard: start it on a free port, GET / and /api/runs on 127.0.0.1, stop it."""
    port = free_port()
    argv = argv + ["--port", str(port)]
    p = subprocess.Popen(argv, cwd=ctx["cwd"], env=ctx["env"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         start_new_session=True)
    probes, ok = [], False
    deadline = time.time() + 30
    while time.time() < deadline and p.poll() is None:
        try:
            page = urllib.request.urlopen("http://127.0.0.1:%d/" % port, timeout=5)
            runs = urllib.request.urlopen("http://127.0.0.1:%d/api/runs" % port, timeout=5).read().decode()
            probes.append("GET / -> %d; GET /api/runs -> %s" % (page.status, runs[:300]))
            ok = page.status == 200 and "mine" in runs  # the run the setup made is listed
            break
        except OSError as e:
            probes.append("not yet: %s" % e)
            time.sleep(0.5)
    if p.poll() is None:
        p.send_signal(signal.SIGINT)
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            probes.append("did not stop within 10 s of SIGINT")
            ok = False
    out = p.stdout.read().decode("utf-8", "replace")
    return ok, out + "\n" + "\n".join(probes[-3:]) + "\n[exit %s]" % p.returncode


def start_serve(argv, ctx):
    """serve: started on a free port (replacing --port) and left running for the README's next lines
    (its curl examples), until the next serve command or the end; probed with GET /health first."""
    stopped, out = stop_serve(ctx)
    if not stopped:
        return False, "the previous serve did not exit 0 on SIGTERM:\n" + out
    port = free_port()
    argv = list(argv)
    if "--port" in argv:
        argv[argv.index("--port") + 1] = str(port)
    else:
        argv += ["--port", str(port)]
    log = tempfile.TemporaryFile()
    p = subprocess.Popen(argv, cwd=ctx["cwd"], env=ctx["env"], stdout=log, stderr=subprocess.STDOUT,
                         start_new_session=True)
    ctx["serve"], ctx["serve_port"], ctx["serve_log"] = p, port, log
    deadline, probe = time.time() + 60, ""
    while time.time() < deadline and p.poll() is None:
        try:
            probe = urllib.request.urlopen("http://127.0.0.1:%d/health" % port, timeout=5).read().decode()
            return True, "GET /health -> " + probe
        except OSError as e:
            probe = "not yet: %s" % e
            time.sleep(0.5)
    ok, out = stop_serve(ctx)
    return False, out + "\n" + probe


def stop_serve(ctx):
    """SIGTERM to the running serve: (exited 0 within 30 s, its output)."""
    p = ctx.pop("serve", None)
    if p is None:
        return True, ""
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
    try:
        p.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
    log = ctx.pop("serve_log")
    log.seek(0)
    return p.returncode == 0, log.read().decode("utf-8", "replace") + "\n[exit %s]" % p.returncode


def data_corpus(ctx):
    """corpus/*.txt and dump.jsonl for the README's `data prepare` lines: the fetched Moby Dick (as
    scripts/fetch-data leaves it) as a text file, and its first 2000 lines as JSONL paragraphs."""
    cache = os.environ.get("XTRAIN_DATA_DIR") or os.path.expanduser("~/.cache/xtrain/data")
    moby = os.path.join(cache, "mobydick", "data.txt")
    if not os.path.exists(moby):
        return  # the data prepare commands then fail, naming the missing corpus
    os.makedirs(os.path.join(ctx["cwd"], "corpus"))
    os.symlink(moby, os.path.join(ctx["cwd"], "corpus", "mobydick.txt"))
    with open(moby, encoding="utf-8") as f:
        lines = f.read().splitlines()[:2000]
    with open(os.path.join(ctx["cwd"], "dump.jsonl"), "w", encoding="utf-8") as f:
        for i in range(0, len(lines), 20):
            f.write(json.dumps({"text": "\n".join(lines[i:i + 20])}) + "\n")


def setup(ctx, source):
    os.makedirs(ctx["nvme"], exist_ok=True)
    for folder in ("configs", "bench", "examples"):
        os.symlink(os.path.join(source, folder), os.path.join(ctx["cwd"], folder))
    data_corpus(ctx)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("xtrain", help="the built program (build/xtrain)")
    ap.add_argument("--source", default=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    ap.add_argument("--only", default="", help="run only the commands matching this regex (after the setup run)")
    ap.add_argument("--keep", action="store_true", help="keep the working folder")
    args = ap.parse_args()
    source = os.path.abspath(args.source)
    commands, example = collect(source)
    assert example, "README.md has no ```json example config"
    cwd = tempfile.mkdtemp(prefix="xtrain-readme-")
    env = dict(os.environ, XTRAIN_SMOKE="1", XTRAIN_BUILD=os.path.dirname(os.path.abspath(args.xtrain)))
    ctx = {"xtrain": os.path.abspath(args.xtrain), "source": source, "cwd": cwd, "env": env,
           "nvme": os.path.join(cwd, "nvme"), "example_config": os.path.join(cwd, "example_ds_config.json")}
    with open(ctx["example_config"], "w") as f:
        f.write(example)
    setup(ctx, source)
    print("working folder:", cwd, flush=True)

    failures, skipped, used = [], [], set()
    # The README's training command, into runs/mine, for eval, generate, resume, compress, export.
    first_train = next(c for _, c in commands if c.startswith("build/xtrain train --config"))
    todo = [("setup", first_train + " --output runs/mine")] + commands
    for origin, line in todo:
        used.update(k for k in LINE_SUBSTITUTIONS if k == line)
        for argv in expand(line):
            name = " ".join(argv)
            if name in SKIP:
                used.add(name)
                skipped.append(name)
                print("SKIP %s  (%s)" % (name, SKIP[name]), flush=True)
                continue
            if args.only and origin != "setup" and not re.search(args.only, name):
                continue
            env, argv = split_env(argv, ctx)
            real, here = resolve(argv, ctx), dict(ctx, env=env)
            start = time.time()
            server = argv[1:2] == ["dashboard"] and "--help" not in argv
            if argv[1:2] == ["serve"] and "--help" not in argv:
                ok, out = start_serve(real, ctx)
            else:
                ok, out = run_server(real, here) if server else run(real, here)
            print("%-4s %5.1fs  %s: %s" % ("ok" if ok else "FAIL", time.time() - start, origin, name), flush=True)
            if not ok:
                failures.append((origin, " ".join(shlex.quote(a) for a in real), out))
            if origin == "setup" and not ok:
                break  # everything after needs runs/mine
    ok, out = stop_serve(ctx)
    if not ok:
        failures.append(("serve", "SIGTERM to build/xtrain serve", out))
    stale = [k for k in list(SKIP) + list(LINE_SUBSTITUTIONS) if k not in used and not args.only]
    for origin, command, out in failures:
        print("\n==== FAILED (%s): %s\n%s" % (origin, command, out[-6000:]))
    for k in stale:
        print("\n==== table entry matches no README command (update the test): %s" % k)
    print("\n%d commands failed, %d skipped by name; working folder %s" % (len(failures), len(skipped), cwd))
    if not args.keep and not failures:
        subprocess.run(["rm", "-rf", cwd])
    return 1 if failures or stale else 0


if __name__ == "__main__":
    sys.exit(main())
