"""vireo-cli batch on a real Slurm: Debian's slurmctld and slurmd with munge, started on this
machine for this test alone (their own configuration, ports, state and spool folders, and a
munged with its own key and socket; the packages' services and files are not used). A batch of 6 tiny-model jobs goes in as one array job, two
tasks at a time; one task is requeued while it runs, as a preemption does, and runs again;
every output arrives once, whole, with its recipe and its marker, and no temporary is left.
`batch status` reads the markers and squeue; a second batch is cancelled with `batch cancel`
mid-run and leaves nothing half-written. Needs root (the daemons), as the CI machine has.
Usage: test_slurm.py PATH_TO_VIREO_CLI (environment: VIREO_FIXTURES_ROOT)"""
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CLI = sys.argv[1]
FIXTURES = Path(os.environ["VIREO_FIXTURES_ROOT"])
results = {"passed": 0, "failed": 0}


def check(name, ok, detail=""):
    results["passed" if ok else "failed"] += 1
    print(("PASS   : " if ok else "FAIL!  : ") + name + ("" if ok else f" {detail}"), flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    """munged, slurmctld and slurmd of their own, one node of 2 CPUs named localhost."""

    def __init__(self, root):
        self.root = root
        for d in ("state", "spool", "log", "munge"):
            (root / d).mkdir(parents=True)
        (root / "munge").chmod(0o700)
        self.socket = root / "munge" / "munge.socket"
        self.conf = root / "slurm.conf"
        self.conf.write_text(f"""ClusterName=vireo-test
SlurmctldHost=localhost
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={self.socket}
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd.pid
SlurmctldPort={free_port()}
SlurmdPort={free_port()}
SlurmctldLogFile={root}/log/slurmctld.log
SlurmdLogFile={root}/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MpiDefault=none
KillWait=5
NodeName=localhost CPUs=2 RealMemory=4000 State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
""")
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}
        self.procs = []

    def start_munge(self):
        """A munged of this test's own (root, --force): a fresh key, a socket in the test's folder."""
        m = self.root / "munge"
        key = subprocess.run(["mungekey", "--create", "--keyfile", str(m / "munge.key")], capture_output=True, text=True)
        if key.returncode != 0:
            return key.stderr
        self.procs.append(subprocess.Popen(["munged", "--foreground", "--force", "--socket", str(self.socket), "--key-file",
                                            str(m / "munge.key"), "--log-file", str(m / "munged.log"), "--pid-file",
                                            str(m / "munged.pid"), "--seed-file", str(m / "munged.seed")],
                                           stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT))
        for _ in range(50):
            enc = subprocess.run(["munge", "-n", "-S", str(self.socket)], capture_output=True)
            if enc.returncode == 0 and subprocess.run(["unmunge", "-S", str(self.socket)], input=enc.stdout,
                                                      capture_output=True).returncode == 0:
                return ""
            time.sleep(0.2)
        return (m / "munged.log").read_text()[-1000:] if (m / "munged.log").exists() else "munged did not answer"

    def start(self):
        self.procs.append(subprocess.Popen(["slurmctld", "-D", "-i"], env=self.env, stdout=subprocess.DEVNULL,
                                           stderr=subprocess.STDOUT))
        time.sleep(1)
        self.procs.append(subprocess.Popen(["slurmd", "-D", "-N", "localhost"], env=self.env, stdout=subprocess.DEVNULL,
                                           stderr=subprocess.STDOUT))
        deadline = time.time() + 60
        while time.time() < deadline:
            p = subprocess.run(["sinfo", "-h", "-o", "%t"], env=self.env, capture_output=True, text=True)
            if p.returncode == 0 and p.stdout.strip() == "idle":
                return True
            time.sleep(0.5)
        return False

    def run(self, *args, timeout=120):
        return subprocess.run([str(a) for a in args], env=self.env, capture_output=True, text=True, timeout=timeout)

    def queue(self):
        p = self.run("squeue", "-h", "-r", "-o", "%i %T")
        return dict(line.split() for line in p.stdout.splitlines() if line.strip())

    def stop(self):
        for p in reversed(self.procs):
            p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()


def wait_for(condition, seconds):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if condition():
            return True
        time.sleep(0.3)
    return False


def recipe_of(path):
    probe = subprocess.run(["ffprobe", "-v", "error", "-show_format", "-of", "json", str(path)], capture_output=True, text=True)
    try:
        return json.loads(json.loads(probe.stdout)["format"]["tags"]["vireo_recipe"])
    except (ValueError, KeyError):
        return {}


def main():
    if os.geteuid() != 0:
        check("the Slurm test runs as root (slurmd and munged need it, as on the CI machine)", False)
        return
    for tool in ("slurmctld", "slurmd", "sbatch", "squeue", "scontrol", "scancel", "munged", "mungekey"):
        if not shutil.which(tool):
            check(f"{tool} is installed (scripts/apt-packages-tests.txt)", False)
            return
    work = Path(tempfile.mkdtemp(prefix="vireo-slurm-test-"))
    cluster = Cluster(work / "slurm")
    try:
        problem = cluster.start_munge()
        check("munge (this test's own munged, key and socket) authenticates", not problem, problem)
        check("slurmctld and slurmd start and the node is idle", cluster.start(),
              (work / "slurm/log/slurmctld.log").read_text()[-2000:] if (work / "slurm/log/slurmctld.log").exists() else "")
        run_batches(cluster, work)
    finally:
        cluster.stop()
        shutil.rmtree(work, ignore_errors=True)


def run_batches(cluster, work):
    model = FIXTURES / "ltx2pipeline" / "v23" / "diffusers"
    base = {"model": str(model), "width": 64, "height": 64, "frames": 9}
    lines = [{**base, "prompt": f"a small fox, take {i}", "id": f"fox-{i}"} for i in range(5)]
    # The last one is longer, so it can be requeued while it runs.
    lines.append({**base, "prompt": "a long heron flight", "id": "heron", "width": 384, "height": 256, "frames": 161})
    jobs = work / "jobs.jsonl"
    jobs.write_text("".join(json.dumps(l) + "\n" for l in lines))
    outputs = work / "outputs"
    p = cluster.run(CLI, "batch", jobs, "--slurm", "--outputs", outputs, "--name", "s1", "--max-parallel", 2,
                    "--cpus-per-task", 1)
    folder = outputs / "s1"
    check("batch --slurm submits one array job", p.returncode == 0 and "submitted Slurm array job" in p.stdout
          and (folder / ".vireo" / "submit.json").exists(), p.stderr[-800:] or p.stdout[-400:])
    if p.returncode != 0:
        return
    job = json.loads((folder / ".vireo" / "submit.json").read_text())["job_ids"][0]
    # The long task, once it generates (its log says it queued the job on an engine): requeued as
    # a preemption would (SIGTERM, then back in the queue).
    log5 = folder / ".vireo" / "task-5.log"
    running = wait_for(lambda: cluster.queue().get(f"{job}_5") == "RUNNING" and log5.exists() and "1 queued" in log5.read_text(), 240)
    requeue = cluster.run("scontrol", "requeue", f"{job}_5")
    check("a running task is requeued (as by a preemption)", running and requeue.returncode == 0, requeue.stderr)
    # Slurm holds a requeued job back 2 minutes (its BeginTime); an operator's nudge, so the test
    # does not sit them out.
    wait_for(lambda: cluster.queue().get(f"{job}_5") == "PENDING", 30)
    nudge = cluster.run("scontrol", "update", f"JobId={job}_5", "StartTime=now")
    check("the requeued task is let start at once (scontrol update StartTime=now)", nudge.returncode == 0, nudge.stderr)
    finished = wait_for(lambda: all((folder / f"{l['id']}.json").exists() for l in lines) and not cluster.queue(), 300)
    copy = [json.loads(l) for l in (folder / ".vireo" / "jobs.jsonl").read_text().splitlines()]
    logs = {i: (folder / ".vireo" / f"task-{i}.log").read_text() if (folder / ".vireo" / f"task-{i}.log").exists() else ""
            for i in range(len(lines))}
    check("every task finished", finished, {i: log[-300:] for i, log in logs.items()})
    first_run = logs[5].split("restart 1")[0]
    check("the requeued task was stopped mid-run, then ran again to its end (its log appends: restart 0, then 1)",
          "restart 0" in first_run and "heron: done" not in first_run and "heron: done" in logs[5].split("restart 1")[-1],
          logs[5][-800:])
    whole = []
    for l, c in zip(lines, copy):
        out = folder / f"{l['id']}.mp4"
        marker = json.loads((folder / f"{l['id']}.json").read_text()) if (folder / f"{l['id']}.json").exists() else {}
        data = out.read_bytes() if out.exists() else b""
        recipe = recipe_of(out)
        whole.append(bool(data) and marker.get("sha256") == hashlib.sha256(data).hexdigest() and recipe.get("seed") == c["seed"]
                     and recipe.get("prompt") == l["prompt"] and recipe.get("frames") == l["frames"])
    check("every output once, whole (SHA-256 as its marker says), with its recipe and the seed fixed at submit", all(whole), whole)
    names = sorted(p.name for p in folder.iterdir())
    expected = sorted([".vireo"] + [f"{l['id']}.{e}" for l in lines for e in ("mp4", "json")])
    check("nothing else in the batch folder: no temporary, no second copy", names == expected, names)
    p = cluster.run(CLI, "batch", "status", folder)
    check("batch status: 6 of 6 done", p.returncode == 0 and "6 of 6 done" in p.stdout, p.stdout[-400:] + p.stderr[-400:])

    # A batch cancelled while it runs: finished outputs stay, nothing half-written, nothing queued.
    slow = [{**base, "prompt": f"a slow owl {i}", "id": f"owl-{i}", "width": 384, "height": 256, "frames": 161} for i in range(3)]
    jobs2 = work / "jobs2.jsonl"
    jobs2.write_text("".join(json.dumps(l) + "\n" for l in slow))
    p = cluster.run(CLI, "batch", jobs2, "--slurm", "--outputs", outputs, "--name", "s2", "--max-parallel", 1)
    folder2 = outputs / "s2"
    job2 = json.loads((folder2 / ".vireo" / "submit.json").read_text())["job_ids"][0] if p.returncode == 0 else -1
    wait_for(lambda: cluster.queue().get(f"{job2}_0") == "RUNNING", 120)
    time.sleep(1.5)
    p = cluster.run(CLI, "batch", "status", folder2)
    check("batch status of a running batch reads squeue", p.returncode == 0 and ("running" in p.stdout or "done" in p.stdout)
          and "pending" in p.stdout, p.stdout[-500:])
    p = cluster.run(CLI, "batch", "cancel", folder2)
    gone = wait_for(lambda: not cluster.queue(), 60)
    time.sleep(1)
    leftovers = [x.name for x in folder2.iterdir() if ".part" in x.name]
    outs = sorted(x.stem for x in folder2.glob("*.mp4"))
    marks = sorted(x.stem for x in folder2.glob("*.json"))
    check("batch cancel: nothing queued after, no temporary left, every output has its marker",
          p.returncode == 0 and gone and not leftovers and outs == marks, (p.stderr[-300:], leftovers, outs, marks))


try:
    main()
except Exception as e:  # a crash of the test is a failure, with its reason
    check("the Slurm test ran to its end", False, repr(e))
print(f"Totals: {results['passed']} passed, {results['failed']} failed")
sys.exit(1 if results["failed"] or not results["passed"] else 0)
