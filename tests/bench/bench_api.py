"""The local HTTP API's cost, measured against the engine in the same run:
- overhead: a video job through the API (POST, then its events until "completed", as a client
  sees it) against the engine's own load + generate + write time for the same job, warm (the
  model already loaded); the aim is under 2 %;
- status polls per second: clients on keep-alive connections reading one job's status;
- the latency from the studio hearing of a denoise step to the client reading its SSE event
  (both stamp CLOCK_MONOTONIC; the engine thread's queued signal before that is not counted).
Usage: bench_api.py VIREO_CLI [--model PATH] [--size WxH] [--frames N] [--json]"""
import argparse
import http.client
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cli")
    ap.add_argument("--model", help="a video model file or folder (default: the tiny LTX-2.3 test fixture)")
    ap.add_argument("--size", default="96x64")
    ap.add_argument("--frames", type=int, default=17)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    model = a.model
    if not model:
        root = os.environ.get("VIREO_FIXTURES_ROOT")
        if not root:
            sys.exit("bench api: give --model PATH, or set VIREO_FIXTURES_ROOT to the built test fixtures")
        model = str(Path(root) / "ltx2pipeline" / "v23" / "diffusers")
    home = Path(tempfile.mkdtemp(prefix="vireo-bench-api-"))
    env = dict(os.environ, XDG_DATA_HOME=str(home / "data"), XDG_CONFIG_HOME=str(home / "config"), no_proxy="*", NO_PROXY="*")
    port_file = home / "port"
    server = subprocess.Popen([a.cli, "serve", "--listen", "127.0.0.1:0", "--port-file", str(port_file), "--model", model,
                               "--outputs", str(home / "outputs"), "--journal", str(home / "journal.jsonl"), "--max-queue", "64"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    try:
        deadline = time.time() + 60
        while not port_file.exists():
            if server.poll() is not None or time.time() > deadline:
                sys.exit("bench api: vireo-cli serve did not start")
            time.sleep(0.05)
        port = int(port_file.read_text())
        host = {"Host": f"127.0.0.1:{port}"}

        def call(method, path, body=None):
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
            h = dict(host)
            if body is not None:
                h["Content-Type"] = "application/json"
            c.request(method, path, body=json.dumps(body) if body is not None else None, headers=h)
            r = c.getresponse()
            data = r.read()
            c.close()
            return r.status, json.loads(data or b"{}")

        model_id = call("GET", "/v1/models")[1]["data"][0]["id"]
        ratios, latencies, extra = [], [], []
        job_id = None
        for run in range(a.runs + 1):
            started = time.monotonic()
            status, job = call("POST", "/v1/videos", {"model": model_id, "prompt": f"bench {run}", "size": a.size,
                                                       "frames": a.frames, "seed": run})
            if status != 200:
                sys.exit(f"bench api: POST /v1/videos answered {status}: {job}")
            job_id = job["id"]
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
            c.request("GET", f"/v1/vireo/jobs/{job_id}/events", headers=host)
            r = c.getresponse()
            name = None
            while True:
                line = r.fp.readline()
                if not line:
                    break
                line = line.decode().rstrip("\n")
                if line.startswith("event: "):
                    name = line[7:]
                elif line.startswith("data: "):
                    data = json.loads(line[6:])
                    if name == "progress" and "monotonic" in data and run > 0:
                        latencies.append(time.monotonic() - data["monotonic"])
                    if name in ("completed", "failed"):
                        break
            wall = time.monotonic() - started
            c.close()
            timings = call("GET", f"/v1/vireo/jobs/{job_id}")[1].get("timings", {})
            engine = timings.get("load_seconds", 0) + timings.get("generate_seconds", 0) + timings.get("write_seconds", 0)
            if run > 0 and engine > 0:  # the first run loads the model: warm runs only
                ratios.append(wall / engine)
                extra.append(wall - engine)

        polls = [0]
        stop = time.monotonic() + 3

        def poller():
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            n = 0
            while time.monotonic() < stop:
                c.request("GET", f"/v1/videos/{job_id}", headers=host)
                c.getresponse().read()
                n += 1
            c.close()
            polls[0] += n

        threads = [threading.Thread(target=poller) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        ratios.sort()
        latencies.sort()
        extra.sort()
        result = {
            "model": model, "size": a.size, "frames": a.frames, "runs": len(ratios),
            "api_over_engine_median": ratios[len(ratios) // 2] if ratios else None,
            "overhead_percent_median": (ratios[len(ratios) // 2] - 1) * 100 if ratios else None,
            # What the API adds whatever the job's length: the ratio falls as jobs grow.
            "overhead_ms_median": extra[len(extra) // 2] * 1000 if extra else None,
            "status_polls_per_second": polls[0] / 3,
            "sse_latency_ms_median": latencies[len(latencies) // 2] * 1000 if latencies else None,
            "sse_latency_ms_max": latencies[-1] * 1000 if latencies else None,
        }
        if a.json:
            print(json.dumps(result))
        else:
            print(f"API over engine (warm, median of {len(ratios)}): {result['api_over_engine_median']:.4f} "
                  f"({result['overhead_percent_median']:+.2f} %, {result['overhead_ms_median']:.0f} ms a job; aim under 2 %)")
            print(f"status polls: {result['status_polls_per_second']:.0f} per second (8 keep-alive clients)")
            print(f"denoise step -> SSE event: median {result['sse_latency_ms_median']:.2f} ms, max {result['sse_latency_ms_max']:.2f} ms")
    finally:
        server.terminate()
        server.wait(timeout=60)


if __name__ == "__main__":
    main()
