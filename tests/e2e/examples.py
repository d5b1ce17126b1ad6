#!/usr/bin/env python3
"""examples/ against the INSTALLED package, not the tree: the commands of README.md's "Use xtrain
as a library" (install into BUILD/_install, each example configured with that prefix and built into
BUILD/_examples/, each run with the installed program), then:
  - custom_model: a user's Module and dataset trained with xtrain::Engine, 2 ranks (launch --program);
    it exits 0 only below its closed-form loss threshold;
  - plugin (libmine.so): `xtrain --plugin` errors (missing file, unknown name without it), config,
    train, resume, eval, ZeRO 2 with bf16 on 2 ranks, a 2-trial tune, compress and export of the traceable
    model, and the clear refusal of the untraceable one.

usage: examples.py BUILD_DIR SOURCE_DIR [--cmake CMAKE]
"""
import argparse
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import time

FAILURES = []


def run(name, argv, expect_rc=0, expect_text=None, env=None, cwd=None, timeout=300):
    """Runs argv; records a failure unless the exit code is expect_rc and expect_text (a regex) is in the output."""
    start = time.time()
    try:
        p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, cwd=cwd, timeout=timeout)
        rc, out = p.returncode, p.stdout.decode("utf-8", "replace")
    except (OSError, subprocess.TimeoutExpired) as e:
        rc, out = -1, "cannot run it: %s" % e
    ok = rc == expect_rc and (expect_text is None or re.search(expect_text, out) is not None)
    print("%-4s %5.1fs  %s" % ("ok" if ok else "FAIL", time.time() - start, name), flush=True)
    if not ok:
        why = "exit %d (want %d)" % (rc, expect_rc)
        if expect_text is not None and re.search(expect_text, out) is None:
            why += "; output lacks /%s/" % expect_text
        FAILURES.append((name, " ".join(argv), why, out))
    return out


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


def readme_commands(source):
    """The command lines of README.md's "Use xtrain as a library" block."""
    with open(os.path.join(source, "README.md"), encoding="utf-8") as f:
        text = f.read()
    section = text.split("## Use xtrain as a library", 1)[1].split("\n## ", 1)[0]
    block = section.split("```", 2)[1]
    return [line.strip() for line in block.splitlines() if line.strip() and not line.strip().startswith("#")]


def substitute(argv, cmake, build, source, prefix):
    """README placeholders -> this build: /opt/xtrain is BUILD/_install, the example builds go under
    BUILD/_examples/, examples/ is the source tree's; launch gets a free port."""
    out = []
    for token in argv:
        token = token.replace("/opt/xtrain", prefix)
        token = token.replace("build-example", os.path.join(build, "_examples", "custom_model"))
        token = token.replace("build-plugin", os.path.join(build, "_examples", "plugin"))
        if token == "build":
            token = build
        elif token.startswith("examples/"):
            token = os.path.join(source, token)
        out.append(token)
    if out[0] == "cmake":
        out[0] = cmake
    if out[1:2] == ["launch"]:
        out[2:2] = ["--master-port", free_port()]
    return out


def readme_steps(cmake, build, source, work):
    """Install, build each example and run it, exactly as the README says (the launch of
    custom_model exits 0 only below its closed-form loss threshold)."""
    prefix = os.path.join(build, "_install")
    shutil.rmtree(prefix, ignore_errors=True)
    shutil.rmtree(os.path.join(build, "_examples"), ignore_errors=True)
    os.makedirs(work)
    lines = readme_commands(source)
    if len(lines) != 7:
        FAILURES.append(("README", "README.md", "the library section has %d commands, expected 7" % len(lines), ""))
    for line in lines:
        argv = substitute(shlex.split(line), cmake, build, source, prefix)
        custom_model_run = "launch" in argv and "custom_model" in line
        run("README: " + line, argv, cwd=work, expect_text=r"held-out loss [0-9.]+ -> " if custom_model_run else None)
    return prefix


def plugin_errors(xtrain, lib, config, work):
    missing = os.path.join(work, "no_such_plugin.so")
    run("--plugin: a missing file is a usage error naming it", [xtrain, "train", "--plugin", missing, "--config", config],
        expect_rc=2, expect_text=re.escape(missing))
    not_a_library = os.path.join(work, "not_a_library.so")
    with open(not_a_library, "w") as f:
        f.write("text\n")
    run("--plugin: a file dlopen refuses is a usage error with dlerror()",
        [xtrain, "config", "--plugin", not_a_library, "--config", config], expect_rc=2,
        expect_text=re.escape(not_a_library) + r".*cannot load it")
    run("without --plugin the model name is unknown", [xtrain, "config", "--config", config], expect_rc=2,
        expect_text=r"mine")
    run("config --plugin", [xtrain, "config", "--plugin", lib, "--config", config])


def plugin_training(xtrain, lib, config, work, source):
    run_dir = os.path.join(work, "run")
    run("train --plugin", [xtrain, "train", "--plugin", lib, "--config", config, "--output", run_dir])
    if not os.path.exists(os.path.join(run_dir, "checkpoints", "latest")):
        FAILURES.append(("train --plugin", run_dir, "no checkpoints/latest", ""))
    run("train --plugin --resume", [xtrain, "train", "--plugin", lib, "--config", config, "--output", run_dir,
                                    "--resume", "--set", "xtrain.steps=90"])
    run("eval --plugin", [xtrain, "eval", "--plugin", lib, "--run", run_dir], expect_text=r"accuracy")
    run("--set xtrain.model.type=mine --set xtrain.data.type=mine on the default config",
        [xtrain, "train", "--plugin", lib, "--set", "xtrain.model.type=mine", "--set", "xtrain.data.type=mine",
         "--set", "xtrain.steps=10", "--set", "scheduler.params.warmup_num_steps=2", "--set", "xtrain.save_interval=0",
         "--set", "xtrain.eval_interval=5", "--set", "xtrain.eval_batches=2", "--output", os.path.join(work, "by_set")])
    run("ZeRO 2 + bf16, 2 ranks (launch passes --plugin through)",
        [xtrain, "launch", "-N", "2", "--master-port", free_port(), "--", "train", "--plugin", lib, "--config", config,
         "--set", "zero_optimization.stage=2", "--set", "bf16.enabled=true", "--set", "xtrain.steps=20",
         "--output", os.path.join(work, "zero2")])
    study = os.path.join(work, "study")
    run("tune --plugin: 2 trials", [xtrain, "tune", "--plugin", lib, "--config", config, "--space",
                                    os.path.join(source, "examples", "plugin", "tune_space.json"), "--trials", "2",
                                    "--study", study, "--set", "xtrain.steps=20", "--set", "xtrain.save_interval=0"],
        expect_text=r"best val_loss")
    return run_dir


def plugin_compress_export(xtrain, lib, config, work, source, run_dir):
    compressed = os.path.join(work, "compressed")
    run("compress --plugin (a Sequential: traced)",
        [xtrain, "compress", "--plugin", lib, "--run", run_dir, "--config",
         os.path.join(source, "examples", "plugin", "compress.json"), "--output", compressed])
    onnx = os.path.join(work, "mine.onnx")
    run("export --plugin (a Sequential: traced)", [xtrain, "export", "--plugin", lib, "--run", run_dir, "--onnx", onnx])
    if not os.path.exists(onnx):
        FAILURES.append(("export --plugin", onnx, "no ONNX file written", ""))
    opaque = os.path.join(work, "opaque")
    run("train mine_opaque", [xtrain, "train", "--plugin", lib, "--config", config, "--set",
                              "xtrain.model.type=mine_opaque", "--set", "xtrain.steps=5", "--output", opaque])
    run("export of an untraceable model: a clear error",
        [xtrain, "export", "--plugin", lib, "--run", opaque, "--onnx", os.path.join(work, "opaque.onnx")],
        expect_rc=2, expect_text=r"MineNet.*is not (traceable|supported)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("build")
    ap.add_argument("source")
    ap.add_argument("--cmake", default="cmake")
    args = ap.parse_args()
    build, source = os.path.abspath(args.build), os.path.abspath(args.source)
    work = os.path.join(build, "_examples", "work")
    prefix = readme_steps(args.cmake, build, source, work)
    xtrain = os.path.join(prefix, "bin", "xtrain")
    lib = os.path.join(build, "_examples", "plugin", "libmine.so")
    if os.path.exists(lib) and os.access(xtrain, os.X_OK):
        config = os.path.join(source, "examples", "plugin", "ds_config.json")
        plugin_errors(xtrain, lib, config, work)
        run_dir = plugin_training(xtrain, lib, config, work, source)
        plugin_compress_export(xtrain, lib, config, work, source, run_dir)
    for name, command, why, out in FAILURES:
        print("\n==== FAILED: %s (%s)\n$ %s\n%s" % (name, why, command, out[-4000:]))
    print("\n%d failed" % len(FAILURES))
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
