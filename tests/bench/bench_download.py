"""`vireo-bench download`: download throughput against the local test Hub, next to the
curl command line and huggingface_hub fetching the same file in the same run, as ratios;
and the bytes fetched again after an interruption (goal: none that were already written).
Usage: bench_download.py VIREO_CLI [--mb 256] [--json]"""
import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import shutil
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "hub"))
import specs  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("cli")
ap.add_argument("--mb", type=int, default=256)
ap.add_argument("--json", action="store_true")
args = ap.parse_args()

work = Path(tempfile.mkdtemp(prefix="vireo-bench-download-"))
builder = specs.RepoBuilder("bench/big", 1)
builder.fixed("model.safetensors", args.mb << 20)
spec = {"repos": {"bench/big": builder.build()}, "tokens": []}
(work / "spec.json").write_text(json.dumps(spec))
ready = work / "ready.json"
server = subprocess.Popen([sys.executable, str(HERE.parent / "hub" / "hubserver.py"), "--repos", str(work / "spec.json"),
                           "--ready-file", str(ready)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
try:
    for _ in range(600):
        if ready.exists():
            break
        time.sleep(0.05)
    hub = json.loads(ready.read_text())["hub"]
    size = args.mb << 20
    # The bench's own settings folder: its approval of the test repo stays out of the user's.
    env = dict(os.environ, HF_ENDPOINT=hub, HF_HUB_DISABLE_XET="1", no_proxy="127.0.0.1", NO_PROXY="127.0.0.1",
               XDG_CONFIG_HOME=str(work / "config"))
    subprocess.run([args.cli, "trust", "add", "bench/big"], env=env, check=True, stdout=subprocess.DEVNULL)

    def control(method, path, body=None):
        import urllib.request
        req = urllib.request.Request(hub + path, method=method, data=json.dumps(body).encode() if body is not None else None,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req) as r:
            return json.loads(r.read() or b"null")

    def cdn_bytes():
        return sum(e["bytes_sent"] for e in control("GET", "/_control/log") if e["server"] == "cdn")

    def timed(cmd, cache):
        e = dict(env, HF_HUB_CACHE=str(cache))
        start = time.perf_counter()
        subprocess.run(cmd, env=e, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return time.perf_counter() - start

    # Warm the server's content cache so every client is served at the same speed.
    subprocess.run(["curl", "-sS", "-L", "-o", os.devnull, f"{hub}/bench/big/resolve/main/model.safetensors"], check=True, env=env)
    # Best of two runs each: one slow run (another process, the page cache) says little.
    results = {}
    for run in range(2):
        for name, cmd in (("vireo", [args.cli, "download", "bench/big"]),
                          ("curl", ["curl", "-sS", "-L", "-o", str(work / f"curl{run}.out"),
                                    f"{hub}/bench/big/resolve/main/model.safetensors"]),
                          ("huggingface_hub", [sys.executable, "-c", "from huggingface_hub import hf_hub_download; "
                                               "hf_hub_download('bench/big', 'model.safetensors')"])):
            t = timed(cmd, work / f"{name}{run}")
            results[name] = min(results.get(name, t), t)
        shutil.rmtree(work / f"vireo{run}", ignore_errors=True)
        shutil.rmtree(work / f"huggingface_hub{run}", ignore_errors=True)
        (work / f"curl{run}.out").unlink(missing_ok=True)
    # What the command line pays before any byte moves (loading libtorch, which the studio pays
    # once at launch): measured apart, so the transfer itself can be compared too.
    start = min(timed([args.cli, "--version"], work / "none") for _ in range(3))

    # Interrupt a throttled download halfway with Ctrl-C, then resume it.
    control("POST", "/_control/faults", [{"match": "/blobs/", "server": "cdn", "times": 1,
                                          "action": {"kind": "slow", "bytes_per_second": max(1, size // 4)}}])
    control("DELETE", "/_control/log")
    e = dict(env, HF_HUB_CACHE=str(work / "c4"))
    proc = subprocess.Popen([args.cli, "download", "bench/big"], env=e, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(2.0)
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=60)
    partial = sum(p.stat().st_size for p in (work / "c4").rglob("*.part"))
    first_run = cdn_bytes()
    control("DELETE", "/_control/log")
    subprocess.run([args.cli, "download", "bench/big"], env=e, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    second = [x for x in control("GET", "/_control/log") if x["server"] == "cdn"]
    resumed_from = int(second[0]["range"].split("=")[1].split("-")[0]) if second and second[0]["range"] else 0
    served = first_run + sum(x["bytes_sent"] for x in second)
    report = {
        "file_bytes": size,
        "seconds": results,
        "mb_per_second": {k: size / v / 1e6 for k, v in results.items()},
        "vireo_vs_curl": results["curl"] / results["vireo"],
        "vireo_vs_huggingface_hub": results["huggingface_hub"] / results["vireo"],
        "vireo_process_start_seconds": start,
        "vireo_transfer_vs_curl": results["curl"] / max(1e-6, results["vireo"] - start),
        "interrupt": {"exit_code": proc.returncode, "partial_bytes_kept": partial, "resumed_from": resumed_from,
                      "verified_bytes_fetched_again": max(0, partial - resumed_from),
                      "cdn_bytes_served": served, "lost_in_flight": first_run - partial},
    }
finally:
    server.send_signal(signal.SIGTERM)
    server.wait(timeout=10)
    # Several copies of a file of --mb MiB: never left behind.
    shutil.rmtree(work, ignore_errors=True)

if args.json:
    print(json.dumps(report, indent=2))
else:
    print(f"bench download: one {args.mb} MiB file from the local test Hub (loopback, redirect to a CDN port)")
    for k in ("vireo", "curl", "huggingface_hub"):
        print(f"  {k:16s} {results[k]:7.3f} s  {report['mb_per_second'][k]:8.1f} MB/s")
    print(f"  vireo is {report['vireo_vs_curl']:.2f}x curl's speed and {report['vireo_vs_huggingface_hub']:.2f}x huggingface_hub's")
    print(f"  vireo-cli starts in {start:.3f} s; without it (as in the studio) vireo is "
          f"{report['vireo_transfer_vs_curl']:.2f}x curl's speed, SHA-256 and fsync included")
    i = report["interrupt"]
    print(f"  interrupted after 2 s (exit {i['exit_code']}), kept {i['partial_bytes_kept']} bytes, resumed from byte "
          f"{i['resumed_from']}: {i['verified_bytes_fetched_again']} written bytes fetched again "
          f"({i['lost_in_flight']} bytes were in flight when interrupted)")
