#!/usr/bin/env python3
"""A cluster of "machines" on one host: network namespaces joined by a bridge (stdlib only).

Layout of one cluster (id K, 1..250, allocated under a lock so concurrent clusters never collide):
  - a switch namespace `xtK-sw` holding the bridge `br0`; node i is namespace `xtKn<i>` with `eth0`
    (a veth whose peer `n<i>` is a port of the bridge) at 10.213.K.(i+1)/24, `lo` up. Nothing is
    routed or bridged to the root namespace: traffic flows only between this cluster's nodes.
  - /etc/netns/<ns>/hosts (ip netns exec bind-mounts it over /etc/hosts): the host's own /etc/hosts
    (so this machine's host name still resolves to 127.0.0.1, the case issue 23 describes) plus
    `10.213.K.(i+1) node<i>` lines.
  - rate ("1gbit", "10gbit", "25gbit"): a tbf qdisc on both ends of every link.
  - ssh=True: one sshd per node (its own sshd_config, host key per node, one user key per cluster,
    all generated into the cluster's temp dir). How `ssh node<j> cmd` reaches node j as root with no
    prompt: /etc/netns/<ns>/ssh/ssh_config is bind-mounted over /etc/ssh by ip netns exec, so every
    ssh client started inside a node (xtrain launch, mpirun's rsh agent, a shell) reads the cluster's
    IdentityFile and known_hosts with no option. `Cluster.ssh_env` is therefore empty; `ssh_config`
    names the file for callers that want `ssh -F` anyway.
Teardown: context-manager exit, atexit, SIGTERM/SIGINT; every Cluster() first sweeps clusters whose
owner process is dead (state in /run/xtrain-netns/<K>.json: owner pid + start time, namespaces, dir).
Only namespaces recorded there are ever removed.

  from netns_cluster import Cluster, Skip      # sys.path.insert(0, "<repo>/tests/cluster")
  with Cluster(nodes=3, rate="10gbit", ssh=True) as c:
      c.run(0, ["ssh", "node1", "hostname"])
CLI (bench scripts; the owner is the calling shell unless --owner-pid is given):
  python3 tests/cluster/netns_cluster.py up --name bench --nodes 4 [--rate 10gbit] [--ssh] [--slots 2]
  python3 tests/cluster/netns_cluster.py down --name bench
"""
import argparse
import atexit
import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

STATE_DIR = "/run/xtrain-netns"
SUBNET = "10.213.{k}.0/24"
RATES = {"1gbit": 1e9, "10gbit": 10e9, "25gbit": 25e9}


class Skip(Exception):
    """Namespaces (or sshd) are not available here; str(e) says why."""


def _sh(argv, check=True, **kw):
    r = subprocess.run(argv, capture_output=True, text=True, **kw)
    if check and r.returncode != 0:
        raise RuntimeError(f"netns_cluster: {' '.join(argv)} failed ({r.returncode}): {r.stderr.strip()}")
    return r


def _start_time(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def _alive(pid, start):
    return pid is not None and _start_time(pid) is not None and _start_time(pid) == start


def _ns_pids(ns):
    r = _sh(["ip", "netns", "pids", ns], check=False)
    return [int(p) for p in r.stdout.split()] if r.returncode == 0 else []


def _kill_ns(ns, wait=5.0):
    """SIGKILL every process in namespace ns until none is left (children may fork meanwhile)."""
    deadline = time.time() + wait
    while True:
        pids = _ns_pids(ns)
        if not pids or time.time() > deadline:
            return
        for p in pids:
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.05)


def _remove(state):
    """Tear down everything a state record names; tolerant of half-built clusters."""
    for ns in state.get("namespaces", []):
        _kill_ns(ns)
        _sh(["ip", "netns", "del", ns], check=False)
        shutil.rmtree(f"/etc/netns/{ns}", ignore_errors=True)
    if state.get("dir"):
        shutil.rmtree(state["dir"], ignore_errors=True)
    try:
        os.unlink(os.path.join(STATE_DIR, f"{state['id']}.json"))
    except FileNotFoundError:
        pass


class _Lock:
    def __enter__(self):
        os.makedirs(STATE_DIR, exist_ok=True)
        self.fd = os.open(os.path.join(STATE_DIR, ".lock"), os.O_CREAT | os.O_RDWR, 0o600)
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc):
        os.close(self.fd)


def _states():
    out = []
    for f in sorted(os.listdir(STATE_DIR)):
        if f.endswith(".json"):
            try:
                with open(os.path.join(STATE_DIR, f)) as fh:
                    out.append(json.load(fh))
            except (OSError, ValueError):
                pass
    return out


def sweep():
    """Remove clusters whose owner process is gone (a killed test or bench). Call under _Lock."""
    for st in _states():
        if not _alive(st.get("owner_pid"), st.get("owner_start")):
            _remove(st)


def check_available(ssh):
    if os.geteuid() != 0:
        raise Skip("network namespaces need root (CAP_SYS_ADMIN); running as uid %d" % os.geteuid())
    for tool in ["ip", "tc"] + (["ssh", "ssh-keygen"] if ssh else []):
        if shutil.which(tool) is None:
            raise Skip(f"'{tool}' is not installed (iproute2 / openssh-client)")
    if ssh and not os.path.exists("/usr/sbin/sshd"):
        raise Skip("/usr/sbin/sshd is missing: install openssh-server (scripts/lib.sh TEST_PACKAGES)")


class Node:
    def __init__(self, index, ns, addr):
        self.index, self.ns, self.addr, self.name = index, ns, addr, f"node{index}"

    def __repr__(self):
        return f"Node({self.name}, ns={self.ns}, addr={self.addr})"


class Cluster:
    def __init__(self, nodes=2, rate=None, ssh=False, name=None, owner_pid=None):
        if rate is not None and rate not in RATES:
            raise ValueError(f"netns_cluster: rate '{rate}' unknown; use one of {sorted(RATES)} or None")
        if nodes < 1 or nodes > 200:
            raise ValueError(f"netns_cluster: nodes={nodes} out of range 1..200")
        check_available(ssh)
        self.n, self.rate, self.ssh, self.name = nodes, rate, ssh, name
        self.owner_pid = owner_pid or os.getpid()
        self.nodes, self._sshd, self._procs, self._up = [], {}, [], False
        self._prev_handlers = {}
        with _Lock():
            sweep()
            if name and any(s.get("name") == name for s in _states()):
                raise RuntimeError(f"netns_cluster: a cluster named '{name}' is up; run "
                                   f"`netns_cluster.py down --name {name}` first")
            used = {s["id"] for s in _states()}
            free = [k for k in range(1, 251) if k not in used]
            if not free:
                raise RuntimeError("netns_cluster: 250 clusters are up; run `down` on some")
            self.id = free[0]
            self.dir = tempfile.mkdtemp(prefix=f"xtrain-cluster{self.id}-")
            self.switch = f"xt{self.id}-sw"
            self.nodes = [Node(i, f"xt{self.id}n{i}", f"10.213.{self.id}.{i + 1}") for i in range(nodes)]
            self._save()
        self._install_cleanup()
        try:
            self._build()
        except Exception as e:
            self.close()
            if isinstance(e, RuntimeError) and "netns add" in str(e):
                raise Skip(f"cannot create network namespaces here: {e}") from e
            raise
        self._up = True

    # ---- state and cleanup -------------------------------------------------------------------
    def _state(self):
        return {"id": self.id, "name": self.name, "owner_pid": self.owner_pid,
                "owner_start": _start_time(self.owner_pid), "dir": self.dir,
                "namespaces": [self.switch] + [n.ns for n in self.nodes],
                "nodes": [{"name": n.name, "ns": n.ns, "addr": n.addr} for n in self.nodes],
                "subnet": SUBNET.format(k=self.id), "rate": self.rate, "ssh": self.ssh,
                "ssh_config": self.ssh_config if self.ssh else None,
                "hostfile": os.path.join(self.dir, "hostfile")}

    def _save(self):
        path = os.path.join(STATE_DIR, f"{self.id}.json")
        with open(path + ".tmp", "w") as f:
            json.dump(self._state(), f, indent=1)
        os.replace(path + ".tmp", path)

    def _install_cleanup(self):
        atexit.register(self.close)
        import threading
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in (signal.SIGTERM, signal.SIGINT):
            prev = signal.getsignal(sig)
            self._prev_handlers[sig] = prev

            def handler(signum, frame, prev=prev):
                self.close()
                if callable(prev):
                    prev(signum, frame)
                else:
                    signal.signal(signum, signal.SIG_DFL)
                    os.kill(os.getpid(), signum)
            signal.signal(sig, handler)

    def close(self):
        """Kill every process in the cluster's namespaces and delete them (idempotent)."""
        if getattr(self, "_closed", False):
            return
        self._closed = True
        for p in self._procs:
            if p.poll() is None:
                p.kill()
        with _Lock():
            _remove(self._state())
        for p in self._procs:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        for sig, prev in self._prev_handlers.items():
            try:
                signal.signal(sig, prev)
            except (ValueError, TypeError):
                pass
        self._prev_handlers = {}

    def detach(self):
        """Leave the cluster up for `down` (CLI); the owner pid decides when a sweep may remove it."""
        self._closed = True
        atexit.unregister(self.close)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # ---- building ----------------------------------------------------------------------------
    def _ip(self, ns, *args):
        return _sh(["ip", "-n", ns, *args])

    def _shape(self, ns, dev):
        bps = RATES[self.rate]
        burst = max(int(bps / 8 * 0.002), 65536)  # 2 ms worth of bytes, at least one GSO packet
        _sh(["ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", dev, "root", "tbf",
             "rate", self.rate, "burst", str(burst), "latency", "20ms"])

    def _build(self):
        _sh(["ip", "netns", "add", self.switch])
        self._ip(self.switch, "link", "set", "lo", "up")
        self._ip(self.switch, "link", "add", "br0", "type", "bridge")
        self._ip(self.switch, "link", "set", "br0", "up")
        with open("/etc/hosts") as f:
            base_hosts = f.read().rstrip("\n") + "\n"
        names = "".join(f"{n.addr} {n.name}\n" for n in self.nodes)
        for n in self.nodes:
            _sh(["ip", "netns", "add", n.ns])
            port = f"n{n.index}"
            self._ip(self.switch, "link", "add", port, "type", "veth", "peer", "name", "eth0",
                     "netns", n.ns)
            self._ip(self.switch, "link", "set", port, "master", "br0")
            self._ip(self.switch, "link", "set", port, "up")
            self._ip(n.ns, "link", "set", "lo", "up")
            self._ip(n.ns, "addr", "add", f"{n.addr}/24", "dev", "eth0")
            self._ip(n.ns, "link", "set", "eth0", "up")
            if self.rate:
                self._shape(self.switch, port)
                self._shape(n.ns, "eth0")
            os.makedirs(f"/etc/netns/{n.ns}", exist_ok=True)
            with open(f"/etc/netns/{n.ns}/hosts", "w") as f:
                f.write(base_hosts + names)
        if self.ssh:
            self._setup_ssh()
        with open(os.path.join(self.dir, "hostfile"), "w") as f:
            f.write("".join(f"{n.name} slots=1\n" for n in self.nodes))

    # ---- ssh ---------------------------------------------------------------------------------
    @property
    def ssh_config(self):
        return os.path.join(self.dir, "ssh", "ssh_config")

    @property
    def ssh_env(self):
        return {}

    def _setup_ssh(self):
        d = os.path.join(self.dir, "ssh")
        os.makedirs(d, mode=0o700)
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
        key = os.path.join(d, "id_ed25519")
        _sh(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"xtrain-cluster{self.id}", "-f", key])
        shutil.copy(key + ".pub", os.path.join(d, "authorized_keys"))
        known = []
        for n in self.nodes:
            hk = os.path.join(d, f"host_{n.name}")
            _sh(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", n.name, "-f", hk])
            with open(hk + ".pub") as f:
                pub = " ".join(f.read().split()[:2])
            known.append(f"{n.name},{n.addr} {pub}\n")
            with open(os.path.join(d, f"sshd_{n.name}.conf"), "w") as f:
                f.write(f"ListenAddress {n.addr}\nPort 22\nHostKey {hk}\n"
                        f"PidFile {d}/sshd_{n.name}.pid\nAuthorizedKeysFile {d}/authorized_keys\n"
                        "PermitRootLogin prohibit-password\nUsePAM no\nStrictModes no\n"
                        "PasswordAuthentication no\nKbdInteractiveAuthentication no\n"
                        "PrintMotd no\nMaxStartups 100:30:200\nMaxSessions 100\nUseDNS no\n"
                        "LogLevel ERROR\n")
        with open(os.path.join(d, "known_hosts"), "w") as f:
            f.writelines(known)
        with open(self.ssh_config, "w") as f:
            f.write(f"Host *\n  IdentityFile {key}\n  IdentitiesOnly yes\n"
                    f"  UserKnownHostsFile {d}/known_hosts\n  GlobalKnownHostsFile /dev/null\n"
                    "  StrictHostKeyChecking yes\n  BatchMode yes\n  LogLevel ERROR\n"
                    "  ConnectTimeout 10\n")
        for n in self.nodes:
            etc_ssh = f"/etc/netns/{n.ns}/ssh"
            os.makedirs(etc_ssh, exist_ok=True)
            shutil.copy(self.ssh_config, os.path.join(etc_ssh, "ssh_config"))
            self.start_sshd(n.index)
        for n in self.nodes:
            self._wait_port(n, 22)

    def start_sshd(self, i):
        """(Re)start node i's sshd, e.g. after kill_node(i) brought the node down."""
        n = self.nodes[i]
        d = os.path.join(self.dir, "ssh")
        log = open(os.path.join(d, f"sshd_{n.name}.log"), "ab")
        self._sshd[i] = subprocess.Popen(
            ["ip", "netns", "exec", n.ns, "/usr/sbin/sshd", "-D", "-f", f"{d}/sshd_{n.name}.conf",
             "-E", f"{d}/sshd_{n.name}.log"], stdout=log, stderr=log, stdin=subprocess.DEVNULL)
        self._procs.append(self._sshd[i])
        log.close()

    def _wait_port(self, n, port, timeout=10.0):
        probe = ("import socket,sys,time\nfor _ in range(%d):\n"
                 "  try: socket.create_connection((%r,%d),0.5).close(); sys.exit(0)\n"
                 "  except OSError: time.sleep(0.05)\nsys.exit(1)\n") % (int(timeout / 0.05), n.addr, port)
        if _sh(["ip", "netns", "exec", n.ns, sys.executable, "-c", probe], check=False).returncode:
            with open(os.path.join(self.dir, "ssh", f"sshd_{n.name}.log"), errors="replace") as f:
                raise RuntimeError(f"netns_cluster: sshd on {n.name} did not listen: {f.read()[-2000:]}")

    # ---- using the nodes ---------------------------------------------------------------------
    def _argv(self, i, argv):
        return ["ip", "netns", "exec", self.nodes[i].ns, *[str(a) for a in argv]]

    def _env(self, env):
        if env is None:
            return None
        merged = dict(os.environ)
        merged.update({k: str(v) for k, v in env.items()})
        return merged

    def popen(self, i, argv, env=None, **kw):
        """Start argv inside node i (env is ADDED to os.environ). Killed at close()."""
        p = subprocess.Popen(self._argv(i, argv), env=self._env(env), **kw)
        self._procs.append(p)
        return p

    def run(self, i, argv, env=None, timeout=120, **kw):
        """Run argv inside node i to completion; output captured as text unless kw says otherwise."""
        if "stdout" not in kw and "stderr" not in kw and "capture_output" not in kw:
            kw["capture_output"] = True
        kw.setdefault("text", True)
        return subprocess.run(self._argv(i, argv), env=self._env(env), timeout=timeout, **kw)

    def hostfile(self, slots=2, nodes=None):
        """A DeepSpeed hostfile (`node<i> slots=N` lines) for all nodes, or the indices in nodes."""
        path = os.path.join(self.dir, f"hostfile_{slots}")
        with open(path, "w") as f:
            for n in self.nodes if nodes is None else [self.nodes[i] for i in nodes]:
                f.write(f"{n.name} slots={slots}\n")
        return path

    def kill_node(self, i):
        """SIGKILL every process running in node i's namespace (sshd included): the machine dies."""
        _kill_ns(self.nodes[i].ns)

    def describe(self):
        return self._state()


def _cli(argv=None):
    ap = argparse.ArgumentParser(description="network-namespace test cluster (see file header)")
    sub = ap.add_subparsers(dest="cmd", required=True)
    up = sub.add_parser("up")
    up.add_argument("--name", required=True)
    up.add_argument("--nodes", type=int, default=2)
    up.add_argument("--rate", choices=sorted(RATES))
    up.add_argument("--ssh", action="store_true")
    up.add_argument("--slots", type=int, default=2)
    up.add_argument("--owner-pid", type=int, help="cluster removed by a sweep once this pid is dead "
                    "(default: the calling shell)")
    down = sub.add_parser("down")
    down.add_argument("--name", required=True)
    sub.add_parser("list")
    a = ap.parse_args(argv)
    try:
        if a.cmd == "up":
            c = Cluster(a.nodes, a.rate, a.ssh, name=a.name, owner_pid=a.owner_pid or os.getppid())
            c.detach()
            st = c.describe()
            st["hostfile"] = c.hostfile(a.slots)
            print(json.dumps(st, indent=1))
        elif a.cmd == "down":
            with _Lock():
                found = [s for s in _states() if s.get("name") == a.name]
                for s in found:
                    _remove(s)
            if not found:
                print(f"netns_cluster: no cluster named '{a.name}' is up", file=sys.stderr)
                return 1
        else:
            with _Lock():
                print(json.dumps(_states(), indent=1))
    except Skip as e:
        print(f"SKIP: {e}", file=sys.stderr)
        return 77
    return 0


if __name__ == "__main__":
    sys.exit(_cli())
