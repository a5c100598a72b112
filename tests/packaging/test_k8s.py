"""The container image definition and the Kubernetes manifests, checked as far as this machine
allows (no registry to pull a base image from, no cluster): the YAML parses and hangs together
(volumes, claims, the token Secret's mount, ports, the GPU limit, the Indexed Job's retry rules),
the image's command and the Deployment's arguments start a real server beyond loopback with a
token file, and the Job's command line, its index filled in as Kubernetes fills it, makes each
line of a prepared batch (and exits 2, the code the Job does not retry, for a line that does not
exist). Usage: test_k8s.py PATH_TO_VIREO_CLI (environment: VIREO_SOURCE_DIR, VIREO_FIXTURES_ROOT)"""
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import yaml

CLI = sys.argv[1]
SOURCE = Path(os.environ["VIREO_SOURCE_DIR"])
FIXTURES = Path(os.environ["VIREO_FIXTURES_ROOT"])
results = {"passed": 0, "failed": 0}


def check(name, ok, detail=""):
    results["passed" if ok else "failed"] += 1
    print(("PASS   : " if ok else "FAIL!  : ") + name + ("" if ok else f" {detail}"), flush=True)


def docs(name):
    return [d for d in yaml.safe_load_all((SOURCE / "packaging/kubernetes" / name).read_text()) if d]


def container(spec):
    return spec["template"]["spec"]["containers"][0]


def mounts_resolve(pod):
    """Every volumeMount names a volume of the pod, and every volume is mounted."""
    names = {v["name"] for v in pod["volumes"]}
    used = {m["name"] for c in pod["containers"] for m in c.get("volumeMounts", [])}
    return used == names


def main():
    serve = docs("vireo-serve.yaml")
    job_docs = docs("vireo-batch-job.yaml")
    kinds = [d["kind"] for d in serve]
    check("vireo-serve.yaml: a Namespace, two claims, a Deployment and a Service",
          kinds == ["Namespace", "PersistentVolumeClaim", "PersistentVolumeClaim", "Deployment", "Service"], kinds)
    claims = {d["metadata"]["name"] for d in serve if d["kind"] == "PersistentVolumeClaim"}
    deployment = next(d for d in serve if d["kind"] == "Deployment")
    service = next(d for d in serve if d["kind"] == "Service")
    pod = deployment["spec"]["template"]["spec"]
    c = container(deployment["spec"])
    args = c["args"]
    env = {e["name"]: e["value"] for e in c["env"]}
    mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
    secret = next(v for v in pod["volumes"] if v["name"] == "token")
    token_file = args[args.index("--token-file") + 1]
    check("the Deployment: one GPU, every mount a volume, the claims exist, one replica with Recreate (one journal owner)",
          c["resources"]["limits"].get("nvidia.com/gpu") == 1 and mounts_resolve(pod)
          and {v["persistentVolumeClaim"]["claimName"] for v in pod["volumes"] if "persistentVolumeClaim" in v} <= claims
          and deployment["spec"]["replicas"] == 1 and deployment["spec"]["strategy"]["type"] == "Recreate", c)
    check("the token file is in the Secret's read-only mount; the models are the HF cache mount",
          os.path.dirname(token_file) == mounts["token"] and secret["secret"]["secretName"] == "vireo-api-token"
          and env["HF_HUB_CACHE"] == mounts["models"], (token_file, mounts, env))
    port = c["ports"][0]
    listen = args[args.index("--listen") + 1]
    check("the Service reaches the container's port; the server listens on it beyond loopback; the probes open it",
          service["spec"]["ports"][0]["targetPort"] == port["name"] and listen == f"0.0.0.0:{port['containerPort']}"
          and c["readinessProbe"]["tcpSocket"]["port"] == port["name"]
          and service["spec"]["selector"] == deployment["spec"]["template"]["metadata"]["labels"], (listen, port))

    containerfile = (SOURCE / "packaging/container/Containerfile").read_text()
    cmd = json.loads(re.search(r"^CMD (\[.*\])$", containerfile, re.M).group(1))
    entry = json.loads(re.search(r"^ENTRYPOINT (\[.*\])$", containerfile, re.M).group(1))
    check("the image runs vireo-cli, and the Deployment's arguments extend the image's own command",
          entry == ["vireo-cli"] and args[:len(cmd)] == cmd and "HF_HUB_CACHE=/models" in containerfile
          and "USER 10001" in containerfile and deployment["spec"]["template"]["spec"]["securityContext"]["runAsUser"] == 10001,
          (entry, cmd, args))

    work = Path(tempfile.mkdtemp(prefix="vireo-k8s-test-"))
    # The Deployment's command as the container runs it, paths moved into this test's folder.
    token = work / "secret" / "token"
    token.parent.mkdir()
    token.write_text("k8s-test-token-0123456789abcdef\n")
    token.chmod(0o400)
    moved = {token_file: str(token), "/data/outputs": str(work / "outputs"), "/data/api-jobs.jsonl": str(work / "journal.jsonl"),
             listen: "0.0.0.0:0"}
    run_args = [moved.get(a, a) for a in args] + ["--port-file", str(work / "port")]
    server = subprocess.Popen([CLI, *run_args], env={**os.environ, "HOME": str(work), "XDG_DATA_HOME": str(work / "data"),
                                                      "XDG_CONFIG_HOME": str(work / "config"), "HF_HUB_CACHE": str(work / "models"),
                                                      "HF_HUB_OFFLINE": "1"},
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.time() + 60
        while not (work / "port").exists() and server.poll() is None and time.time() < deadline:
            time.sleep(0.1)
        status = None
        if (work / "port").exists():
            p = (work / "port").read_text().strip()
            req = urllib.request.Request(f"http://127.0.0.1:{p}/v1/vireo/host",
                                         headers={"Authorization": "Bearer k8s-test-token-0123456789abcdef"})
            with urllib.request.urlopen(req, timeout=30) as r:
                status = r.status
                host = json.loads(r.read())
        check("the Deployment's arguments start the server beyond loopback with the Secret's token; /v1/vireo/host answers",
              status == 200 and host.get("placement") == "auto", server.stdout.read() if server.poll() is not None else status)
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()

    job = job_docs[0]
    spec = job["spec"]
    jc = container(spec)
    rule = spec["podFailurePolicy"]["rules"][0]
    check("the Job: Indexed, retried per index, exit code 2 (a line that cannot run) not retried, one GPU per pod",
          spec["completionMode"] == "Indexed" and spec["backoffLimitPerIndex"] >= 1 and rule["action"] == "FailIndex"
          and rule["onExitCodes"]["values"] == [2] and rule["onExitCodes"]["containerName"] == jc["name"]
          and spec["template"]["spec"]["restartPolicy"] == "Never" and jc["resources"]["limits"].get("nvidia.com/gpu") == 1
          and mounts_resolve(spec["template"]["spec"]), spec)
    jargs = jc["args"]
    folder = Path(jargs[jargs.index("run-task") + 1])
    # The batch as the manifest's comment says to prepare it, here with two tiny jobs.
    model = FIXTURES / "ltx2pipeline" / "v23" / "diffusers"
    lines = [{"model": str(model), "prompt": f"a fox {i}", "width": 64, "height": 64, "frames": 9} for i in range(2)]
    (work / "jobs.jsonl").write_text("".join(json.dumps(l) + "\n" for l in lines))
    p = subprocess.run([CLI, "batch", work / "jobs.jsonl", "--prepare", "--outputs", work / "batches", "--name", folder.name],
                       capture_output=True, text=True, timeout=120)
    check("batch --prepare makes the folder the Job's pods read, and says how many tasks",
          p.returncode == 0 and "prepared 2 tasks" in p.stdout and (work / "batches" / folder.name / ".vireo/jobs.jsonl").exists(),
          p.stderr[-400:])
    made = []
    for index in range(3):
        # $(JOB_COMPLETION_INDEX) as Kubernetes substitutes it, the data volume moved here.
        task_args = [a.replace("$(JOB_COMPLETION_INDEX)", str(index)).replace(str(folder.parent), str(work / "batches"))
                     for a in jargs]
        made.append(subprocess.run([CLI, *task_args], capture_output=True, text=True, timeout=180,
                                   env={**os.environ, "HOME": str(work), "XDG_DATA_HOME": str(work / "data")}))
    out = work / "batches" / folder.name
    check("the Job's command line, index by index, makes each line once with its marker",
          [m.returncode for m in made[:2]] == [0, 0] and all((out / f"job-{i}.mp4").exists() and (out / f"job-{i}.json").exists()
                                                            for i in range(2)), [m.stdout[-300:] + m.stderr[-300:] for m in made])
    check("an index past the batch exits 2, which the Job's podFailurePolicy does not retry", made[2].returncode == 2,
          made[2].stderr[-300:])


try:
    main()
except Exception as e:  # a crash of the test is a failure, with its reason
    check("the container and Kubernetes check ran to its end", False, repr(e))
print(f"Totals: {results['passed']} passed, {results['failed']} failed")
sys.exit(1 if results["failed"] or not results["passed"] else 0)
