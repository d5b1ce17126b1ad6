"""Slurm on a netns_cluster.Cluster: munged, slurmctld and one slurmd per node, all started here and
all stopped at exit (also on failure; the Cluster's teardown kills whatever is left in the nodes).

  with Cluster(nodes=3) as c, SlurmCluster(c) as s:
      s.run(0, ["srun", "-N", "2", "-n", "4", "hostname"])      # SLURM_CONF set, inside node0

- munged runs in the root namespace with a key made for this cluster; its unix socket (a path, not
  a network address) is reachable from every namespace, and slurm.conf names it (AuthInfo=socket=).
- slurmctld runs in node0. Slurm accepts a controller only on a host whose name is SlurmctldHost,
  and every namespace shares this machine's host name, so SlurmctldHost is `<hostname>(<node0 addr>)`.
- slurmd -N node<i> runs in node i, but not through `ip netns exec`: that mounts a fresh /sys without
  /sys/fs/cgroup, and slurmd 22.05 refuses to start without its cgroup plugin ("No filesystem mounted
  on /sys/fs/cgroup" / "Unable to initialize cgroup plugin"), even with proctrack/linuxproc and
  task/none. nsenter joins only the node's network namespace, and a private mount namespace binds the
  node's /etc/netns hosts file over /etc/hosts as ip netns exec would, so the tasks resolve node<j>.
- Per-node spool, pid and log files (%n), state under the cluster's temp dir, the cluster's own ports.
Where a daemon does not come up, SlurmCluster raises Skip with the daemon's last log lines.
"""
import os
import secrets
import shutil
import signal
import socket
import subprocess
import time

from netns_cluster import Skip

CTLD_PORT, SLURMD_PORT = 6817, 6818  # per namespace, so concurrent clusters do not collide


class SlurmCluster:
    def __init__(self, cluster, cpus_per_node=2):
        for tool in ("munged", "slurmctld", "slurmd", "srun", "sbatch", "nsenter", "unshare"):
            if shutil.which(tool) is None and not os.path.exists(f"/usr/sbin/{tool}"):
                raise Skip(f"'{tool}' is not installed (slurm-wlm, munge, util-linux: scripts/lib.sh)")
        self.c, self.cpus = cluster, cpus_per_node
        self.dir = os.path.join(cluster.dir, "slurm")
        self.conf = os.path.join(self.dir, "slurm.conf")
        self.env = {"SLURM_CONF": self.conf}
        self._procs = []
        os.makedirs(os.path.join(self.dir, "state"))
        try:
            self._start()
        except BaseException:
            self.close()
            raise

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _log(self, name):
        return os.path.join(self.dir, name)

    def _spawn(self, argv, log):
        out = open(self._log(log + ".out"), "ab")
        p = subprocess.Popen(argv, stdout=out, stderr=out, stdin=subprocess.DEVNULL, env=self._env())
        out.close()
        self._procs.append((p, log))
        return p

    def _env(self):
        env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
        env.update(self.env)
        return env

    def _start(self):
        key = os.path.join(self.dir, "munge.key")
        with open(os.open(key, os.O_WRONLY | os.O_CREAT, 0o600), "wb") as f:
            f.write(secrets.token_bytes(1024))
        self.munge_socket = self._log("munge.socket")
        self._spawn(["munged", "-F", "-f", "-S", self.munge_socket, f"--key-file={key}",
                     f"--log-file={self._log('munged.log')}", f"--pid-file={self._log('munged.pid')}",
                     f"--seed-file={self._log('munged.seed')}"], "munged")
        self._wait(lambda: os.path.exists(self.munge_socket), "munged", 10)
        self._write_conf()
        node0 = self.c.nodes[0]
        self._spawn(["ip", "netns", "exec", node0.ns, "slurmctld", "-D", "-i", "-f", self.conf], "slurmctld")
        for n in self.c.nodes:
            os.makedirs(self._log(f"spool/{n.name}"))
            mount_hosts = f"mount --bind /etc/netns/{n.ns}/hosts /etc/hosts && exec slurmd -D -f {self.conf} -N {n.name}"
            self._spawn(["nsenter", f"--net=/run/netns/{n.ns}", "--", "unshare", "--mount", "--propagation",
                         "private", "--", "sh", "-c", mount_hosts], f"slurmd.{n.name}")
        want = len(self.c.nodes)
        self._wait(lambda: self._idle_nodes() == want, "slurmctld/slurmd", 30)

    def _write_conf(self):
        d = self.dir
        names = [n.name for n in self.c.nodes]
        lines = [
            f"ClusterName=xtrain{self.c.id}",
            f"SlurmctldHost={socket.gethostname().split('.')[0]}({self.c.nodes[0].addr})",
            "SlurmUser=root", "SlurmdUser=root",
            "AuthType=auth/munge", f"AuthInfo=socket={self.munge_socket}", "CredType=cred/munge",
            f"SlurmctldPort={CTLD_PORT}", f"SlurmdPort={SLURMD_PORT}",
            f"StateSaveLocation={d}/state", f"SlurmdSpoolDir={d}/spool/%n",
            f"SlurmctldPidFile={d}/slurmctld.pid", f"SlurmdPidFile={d}/slurmd.%n.pid",
            f"SlurmctldLogFile={d}/slurmctld.log", f"SlurmdLogFile={d}/slurmd.%n.log",
            "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/none", "AccountingStorageType=accounting_storage/none",
            "JobCompType=jobcomp/none", "SelectType=select/cons_tres", "SelectTypeParameters=CR_CPU",
            "SchedulerType=sched/builtin", "MpiDefault=none", "SwitchType=switch/none",
            "SlurmdParameters=config_overrides", "ReturnToService=2", "InactiveLimit=0", "KillWait=5",
            "MailProg=/bin/true",
        ]
        lines += [f"NodeName={n.name} NodeAddr={n.addr} CPUs={self.cpus} State=UNKNOWN" for n in self.c.nodes]
        lines.append(f"PartitionName=debug Nodes={','.join(names)} Default=YES MaxTime=INFINITE State=UP")
        with open(self.conf, "w") as f:
            f.write("\n".join(lines) + "\n")

    def _idle_nodes(self):
        r = self.run(0, ["sinfo", "-h", "-N", "-o", "%N %T"], timeout=10)
        return sum(1 for line in r.stdout.splitlines() if line.split()[-1] == "idle") if r.returncode == 0 else -1

    def _wait(self, ready, what, timeout):
        deadline = time.time() + timeout
        while time.time() < deadline:
            dead = [log for p, log in self._procs if p.poll() is not None]
            if dead:
                break
            if ready():
                return
            time.sleep(0.3)
        raise Skip(f"{what} did not come up within {timeout} s here: " + self.daemon_errors())

    def daemon_errors(self):
        """The last error lines of every daemon's log: why Slurm cannot run on this machine."""
        found = []
        for name in sorted(os.listdir(self.dir)):
            if not (name.endswith(".log") or name.endswith(".out")):
                continue
            with open(self._log(name), errors="replace") as f:
                errs = [l.strip() for l in f if "error" in l.lower() or "fatal" in l.lower()]
            # slurmd logs PMIx plugin errors on every start (no libpmix here); they do not stop it.
            errs = [e for e in errs if "pmix" not in e.lower()]
            if errs:
                found.append(f"{name}: " + " | ".join(errs[-3:]))
        return "; ".join(found) or "no error in the daemons' logs (see " + self.dir + ")"

    def run(self, i, argv, timeout=120, env_extra=None, **kw):
        """argv inside node i (ip netns exec) with SLURM_CONF pointing at this cluster's slurm.conf;
        env_extra is added to the environment (srun and sbatch pass it on to the tasks)."""
        kw.setdefault("capture_output", True)
        env = self._env()
        env.update(env_extra or {})
        return subprocess.run(["ip", "netns", "exec", self.c.nodes[i].ns, *argv], env=env, text=True,
                              timeout=timeout, **kw)

    def wait_job(self, job_id, timeout=150):
        """Poll `scontrol show job` until the job ends: (JobState, exit code of its script)."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            r = self.run(0, ["scontrol", "-o", "show", "job", job_id], timeout=10)
            fields = dict(f.split("=", 1) for f in r.stdout.split() if "=" in f)
            state = fields.get("JobState", "UNKNOWN")
            if state not in ("PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "UNKNOWN"):
                return state, int(fields.get("ExitCode", "-1:0").split(":")[0])
            time.sleep(0.3)
        raise AssertionError(f"Slurm job {job_id} did not end within {timeout} s: {r.stdout}{r.stderr}")

    def close(self):
        if not self._procs:
            return
        if any(log == "slurmctld" and p.poll() is None for p, log in self._procs):
            try:
                self.run(0, ["scancel", "--full", "--user=root"], timeout=10, check=False)
            except subprocess.TimeoutExpired:
                pass
        for p, _ in reversed(self._procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        deadline = time.time() + 5
        for p, _ in reversed(self._procs):
            try:
                p.wait(timeout=max(0.1, deadline - time.time()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self._procs = []
