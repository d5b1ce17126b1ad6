"""The process settings of the PyTorch peers, applied before torch is imported.

Debian's torch 1.13 does not forward torch.set_num_threads to OpenBLAS, and OpenMP and OpenBLAS
read their thread counts and waiting policy when they load. So a peer that only calls
torch.set_num_threads runs OpenBLAS with one worker per core, spinning against ATen's OpenMP
workers (reference/platform.md, "Thread fights"). An expert sets the environment first; a peer
that finds its environment different from the one asked for re-executes itself with it.

  --tuning shipped   torch as a user gets it: only torch.set_num_threads (the environment as is)
  --tuning expert    OMP_NUM_THREADS = OPENBLAS_NUM_THREADS = MKL_NUM_THREADS = --threads, passive
                     waiting (OMP_WAIT_POLICY=PASSIVE, GOMP_SPINCOUNT=0, OPENBLAS_THREAD_TIMEOUT=4),
                     malloc's large chunks on huge pages (GLIBC_TUNABLES=glibc.malloc.hugetlb=1, no
                     page fault per 4 KiB of every step's temporaries) and OpenBLAS's own CPU
                     detection (OPENBLAS_CORETYPE unset)

Use: call pin(argv) before `import torch`, then settings(torch) for the JSON line.
"""
import argparse
import os
import sys

_MARKER = "XTRAIN_PEER_ENV"
VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "OMP_WAIT_POLICY", "GOMP_SPINCOUNT",
             "OPENBLAS_THREAD_TIMEOUT", "OPENBLAS_CORETYPE", "GLIBC_TUNABLES")


def expert_environment(threads, env):
    """The environment an expert runs torch in with `threads` threads (a new dict)."""
    out = dict(env)
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        out[name] = str(threads)
    out.update(OMP_WAIT_POLICY="PASSIVE", GOMP_SPINCOUNT="0", OPENBLAS_THREAD_TIMEOUT="4")
    out.pop("OPENBLAS_CORETYPE", None)
    tunables = [t for t in out.get("GLIBC_TUNABLES", "").split(":") if t and not t.startswith("glibc.malloc.hugetlb=")]
    out["GLIBC_TUNABLES"] = ":".join(tunables + ["glibc.malloc.hugetlb=1"])
    return out


def pin(argv=None):
    """Reads --threads and --tuning from argv; with --tuning expert, re-executes this script in the
    expert environment unless it already runs in it. Must run before torch is imported."""
    if "torch" in sys.modules:
        raise RuntimeError("expert_env.pin must run before torch is imported")
    ap = argparse.ArgumentParser(add_help=False)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--tuning", choices=["shipped", "expert"], default="expert")
    a, _ = ap.parse_known_args(sys.argv[1:] if argv is None else argv)
    if a.tuning == "shipped":
        return a
    want = expert_environment(a.threads, os.environ)
    differs = [k for k in VARIABLES if os.environ.get(k) != want.get(k)]
    if not differs:
        return a
    if os.environ.get(_MARKER) == "1":
        raise RuntimeError(f"expert_env: still different after re-executing: {differs}")
    want[_MARKER] = "1"
    sys.stdout.flush()
    os.execve(sys.executable, [sys.executable] + sys.argv, want)
    return a  # not reached


def _openblas_threads():
    """OpenBLAS's own thread count, from the copy torch loaded (None when there is none)."""
    import ctypes

    with open("/proc/self/maps") as maps:
        libs = sorted({line.split()[-1] for line in maps if "openblas" in line and ".so" in line})
    for lib in libs:
        try:
            fn = ctypes.CDLL(lib).openblas_get_num_threads
        except (OSError, AttributeError):
            continue
        fn.restype = ctypes.c_int
        return fn()
    return None


def settings(torch, tuning):
    """What the process runs with: the tuning, the variables above, and the thread counts that
    torch (ATen/OpenMP) and OpenBLAS report."""
    return {"tuning": tuning, "env": {k: os.environ.get(k) for k in VARIABLES if k in os.environ},
            "torch_threads": torch.get_num_threads(), "openblas_threads": _openblas_threads()}
