"""Remote Vireo hosts as a user drives them: two `vireo-cli serve` processes on loopback (the
tiny fixture models) are added with `vireo-cli hosts add`; `vireo-cli generate --host` runs a
job on one, follows its progress, and brings the MP4 home, checked against the SHA-256 the host
states, into the outputs folder and the gallery with the host's recipe. A rerun with the same
--job-id resumes a half-downloaded file with a Range request, and a job brought home is not
fetched twice. A host killed with SIGKILL mid-job fails a job pinned to it (naming it), and a
job for "any host" moves to the other one; after the killed host restarts it lists its copy as
failed and no output is duplicated. A hostile server (a lying digest, a redirect, an endless
event) is refused with the reason and leaves nothing behind.
Usage: test_remotehosts.py PATH_TO_VIREO_CLI"""
import base64
import hashlib
import http.client
import http.server
import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import test_api as api  # noqa: E402  (its Server: one vireo-cli serve with its own folders)

from test_api import CLI, RUN_TMP, check  # noqa: E402

CLIENT = RUN_TMP / "client"
CLIENT_ENV = dict(os.environ, XDG_DATA_HOME=str(CLIENT / "data"), XDG_CONFIG_HOME=str(CLIENT / "config"),
                  XDG_CACHE_HOME=str(CLIENT / "cache"), HOME=str(CLIENT), no_proxy="*", NO_PROXY="*")
JOB = ["--model", "local/diffusers", "--width", "96", "--height", "64", "--frames", "17", "--speed", "fast"]


def cli(*args, timeout=300):
    return subprocess.run([CLI, *map(str, args)], capture_output=True, text=True, env=CLIENT_ENV, timeout=timeout)


def client_outputs():
    return sorted(p for p in CLIENT.rglob("*.mp4") if not p.name.startswith("."))


def gallery_paths():
    dbs = list((CLIENT / "data").rglob("gallery.sqlite"))
    if not dbs:
        return []
    db = sqlite3.connect(dbs[0])
    try:
        return [row[0] for row in db.execute("SELECT path FROM outputs")]
    finally:
        db.close()


def host_jobs(server):
    s, _, b = server.request("GET", "/v1/vireo/jobs?limit=100")
    return json.loads(b)["data"] if s == 200 else []


def test_hosts_list(a, b):
    p = cli("hosts", "add", "A", f"127.0.0.1:{a.port}")
    check("hosts add: a bare host:port is taken as http", p.returncode == 0 and f"http://127.0.0.1:{a.port}" in p.stdout, p.stderr)
    (CLIENT / "token").write_text("not-needed-on-loopback\n")
    p = cli("hosts", "add", "B", f"http://127.0.0.1:{b.port}/", "--token-file", CLIENT / "token")
    check("hosts add with a token file", p.returncode == 0 and "with a token" in p.stdout, p.stderr)
    tokens = list((CLIENT / "config").rglob("B.token"))
    check("the host's token is kept in a file only its owner can read",
          len(tokens) == 1 and (tokens[0].stat().st_mode & 0o077) == 0 and tokens[0].read_text() == "not-needed-on-loopback", tokens)
    settings = "".join(p.read_text(errors="replace") for p in (CLIENT / "config").rglob("*.conf"))
    check("the token is not in the settings file", "not-needed-on-loopback" not in settings and "127.0.0.1" in settings)
    for bad, why in [(("hosts", "add", "C", "ftp://127.0.0.1:1"), "http or https"),
                     (("hosts", "add", "any", "127.0.0.1:1"), "name"),
                     (("hosts", "add", "C", "http://user:pw@127.0.0.1:1"), "token field"),
                     (("hosts", "add", "C", "http://127.0.0.1:1/v1"), "without a path")]:
        p = cli(*bad)
        check(f"hosts add refuses {bad[3]} ({why})", p.returncode == 2 and why in p.stderr, p.stderr[-300:])
    p = cli("hosts", "add", "gone", "127.0.0.1:9")
    p = cli("hosts", "list", "--json")
    listed = {h["name"]: h for h in json.loads(p.stdout)["hosts"]} if p.returncode == 0 else {}
    check("hosts list: both servers reachable, the model ready, no GPU, no job",
          all(listed.get(n, {}).get("reachable") and "local/diffusers" in listed[n]["models_ready"] and listed[n]["gpus"] == 0
              and listed[n]["jobs_active"] == 0 for n in "AB"), listed)
    check("hosts list: a host that does not answer is listed unreachable with the reason",
          listed.get("gone", {}).get("reachable") is False and listed["gone"]["error"], listed.get("gone"))
    p = cli("hosts", "remove", "gone")
    check("hosts remove", p.returncode == 0 and "gone" not in cli("hosts", "list").stdout, p.stderr)


def test_pinned_job(a):
    p = cli("generate", "--host", "A", *JOB, "--prompt", "a red fox runs through the snow", "--seed", "7", "--job-id", "fox")
    wrote = [line for line in p.stdout.splitlines() if line.startswith("wrote ")]
    path = Path(wrote[0][len("wrote "):wrote[0].rindex(" (")]) if wrote else None
    check("generate --host A: the MP4 comes home", p.returncode == 0 and path is not None and path.is_file(), (p.stdout[-500:], p.stderr[-800:]))
    check("progress arrives as the host denoises", "progress:" in p.stdout and "denoise" in p.stdout, p.stdout[-500:])
    jobs = host_jobs(a)
    check("host A ran the job once", len(jobs) == 1 and jobs[0]["status"] == "completed", jobs)
    s, _, body = a.request("GET", f"/v1/vireo/jobs/{jobs[0]['id']}") if jobs else (0, {}, b"{}")
    details = json.loads(body)
    local = path.read_bytes() if path else b""
    check("the file is the host's, byte for byte (its SHA-256 as the host states it)",
          details.get("output", {}).get("sha256") == hashlib.sha256(local).hexdigest(), details.get("output"))
    probe = subprocess.run(["ffprobe", "-v", "error", "-show_entries", "format_tags=vireo_recipe", "-of", "json", str(path)],
                           capture_output=True, text=True)
    recipe = json.loads(json.loads(probe.stdout)["format"]["tags"]["vireo_recipe"]) if probe.returncode == 0 else {}
    check("the host's recipe is inside the file (seed, frames)", recipe.get("seed") == 7 and recipe.get("frames") == 17, recipe.keys())
    check("the gallery lists it", str(path) in gallery_paths(), gallery_paths())
    hidden = [x.name for x in path.parent.iterdir() if ".part" in x.name] if path else []
    check("no partial file is left", not hidden, hidden)

    again = cli("generate", "--host", "A", *JOB, "--prompt", "a red fox runs through the snow", "--seed", "7", "--job-id", "fox")
    check("the same --job-id again: brought home before, not fetched twice",
          again.returncode == 0 and "brought home before" in again.stderr and len(client_outputs()) == 1, again.stderr[-400:])
    check("... and no second job on the host", len(host_jobs(a)) == 1, host_jobs(a))
    return path


def test_image_job(a):
    """An Ideogram-4 image goes to the asynchronous jobs route and comes home as the PNG the
    host's synchronous route makes for the same seed."""
    out = CLIENT / "picked" / "lighthouse.png"
    out.parent.mkdir(exist_ok=True)
    p = cli("generate", "--host", "A", "--model", "local/model", "--prompt", "a lighthouse at dusk", "--width", "64", "--height",
            "48", "--seed", "3", "--steps", "4", "--out", out, "--json")
    result = json.loads(p.stdout) if p.returncode == 0 else {}
    check("generate --host with an image model: the PNG comes home under --out", result.get("path") == str(out) and out.is_file(),
          (p.stdout[-300:], p.stderr[-500:]))
    s, _, body = a.request("POST", "/v1/images/generations", {"model": "local/model", "prompt": "a lighthouse at dusk",
                                                               "size": "64x48", "seed": 3, "steps": 4})
    sync = base64.b64decode(json.loads(body)["data"][0]["b64_json"]) if s == 200 else b""
    check("... the same pixels the host's synchronous images route makes", out.is_file() and api.decoded(out)[0] == decoded_png(sync),
          s)
    p = cli("generate", "--host", "A", "--model", "local/model", "--prompt", "again", "--out", out)
    check("--out never replaces a file", p.returncode == 1 and "exists" in p.stderr, p.stderr[-300:])


def test_enhance_prompt_travels(a):
    """--enhance-prompt reaches the host: its LTX-2.3 text encoder then writes the prompt. The
    tiny fixture's tokenizer has no Gemma 3 turn markers, so the host's job fails saying so, which
    only a job asked to enhance can."""
    p = cli("generate", "--host", "A", *JOB, "--prompt", "a fox", "--enhance-prompt", "--job-id", "enhanced")
    check("generate --host --enhance-prompt: the host's job was asked to enhance (and names what its tokenizer lacks)",
          p.returncode != 0 and "<start_of_turn>" in p.stderr, (p.returncode, p.stderr[-600:]))


def decoded_png(data):
    path = RUN_TMP / "sync.png"
    path.write_bytes(data)
    return api.decoded(path)[0]


def test_resume(a):
    """A download cut off by a crash: the partial file keeps the first half, the rerun asks for the rest."""
    p = cli("generate", "--host", "A", *JOB, "--prompt", "rain on a tin roof", "--seed", "3", "--job-id", "rain", "--json")
    first = json.loads(p.stdout) if p.returncode == 0 else {}
    path = Path(first.get("path", "/nonexistent"))
    whole = path.read_bytes() if path.is_file() else b""
    record = path.parent / ".vireo-remote" / "rain.json"
    rec = json.loads(record.read_text()) if record.is_file() else {}
    check("a job's record beside the outputs says it is done", rec.get("state") == "done" and rec.get("sha256"), rec)
    # As a crash mid-download leaves it: half the bytes, the record still downloading, no output.
    (path.parent / ".rain.part-remote").write_bytes(whole[: len(whole) // 2])
    rec["state"] = "downloading"
    record.write_text(json.dumps(rec))
    path.unlink()
    p = cli("generate", "--host", "A", *JOB, "--prompt", "rain on a tin roof", "--seed", "3", "--job-id", "rain", "--json")
    second = json.loads(p.stdout) if p.returncode == 0 else {}
    resumed = Path(second.get("path", "/nonexistent"))
    check("the rerun resumes at the half it had (a Range request), and the file is whole",
          second.get("resumed_from") == len(whole) // 2 and resumed.is_file() and resumed.read_bytes() == whole,
          (second, p.stderr[-400:]))
    check("the rerun is the same job on the host (its Idempotency-Key)", second.get("remote_id") == first.get("remote_id"), second)


def follow_and_kill(proc, servers):
    """Reads the client's lines; when it names the host and job, waits for that job's first
    denoise step and kills the host with SIGKILL. Returns the name of the host killed."""
    killed = {}

    def run():
        for line in proc.stdout:
            proc.lines.append(line)
            if line.startswith("host: ") and not killed:
                name, job = line[6:].split(", job ")
                job = job.split()[0]
                server = servers[name]
                conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=120)
                conn.request("GET", f"/v1/vireo/jobs/{job}/events", headers={"Host": f"127.0.0.1:{server.port}"})
                events = conn.getresponse()
                while True:
                    ev = events.fp.readline()
                    if not ev or ev.startswith(b"event: completed") or (ev.startswith(b"data: ") and b'"phase":"denoise"' in ev):
                        break
                server.proc.send_signal(signal.SIGKILL)
                server.proc.wait()
                conn.close()
                killed["name"] = name
    proc.lines = []
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, killed


def test_host_killed(a, b):
    servers = {"A": a, "B": b}
    # Pinned to B: the job fails naming B, and nothing is left in the outputs folder.
    before = client_outputs()
    proc = subprocess.Popen([CLI, "generate", "--host", "B", *JOB, "--frames", "49", "--prompt", "pinned to a host that dies",
                             "--grace", "3", "--job-id", "pinned"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=CLIENT_ENV)
    t, killed = follow_and_kill(proc, servers)
    proc.wait(timeout=300)
    t.join(timeout=10)
    err = proc.stderr.read()
    check("pinned host killed mid-job: the job fails naming the host and since when",
          killed.get("name") == "B" and proc.returncode == 1 and "host B unreachable since" in err, (killed, proc.returncode, err[-400:]))
    check("... and no output or partial file is added", client_outputs() == before
          and not [p for p in CLIENT.rglob(".pinned.part-remote") if p.stat().st_size > 0], client_outputs())
    b = api.Server("hostB", home=b.home)
    p = cli("hosts", "add", "B", f"127.0.0.1:{b.port}", "--token-file", CLIENT / "token")
    servers["B"] = b

    # Any host: the job starts on one, that one is killed at its first denoise step, it finishes on the other.
    proc = subprocess.Popen([CLI, "generate", "--host", "any", *JOB, "--frames", "49", "--prompt", "any host will do",
                             "--grace", "3", "--job-id", "anyhost"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=CLIENT_ENV)
    t, killed = follow_and_kill(proc, servers)
    proc.wait(timeout=300)
    t.join(timeout=10)
    err = proc.stderr.read()
    lost = killed.get("name")
    other = "B" if lost == "A" else "A"
    wrote = [line for line in proc.lines if line.startswith("wrote ")]
    check("any host: the host running it is killed, the job completes on the other",
          lost is not None and proc.returncode == 0 and wrote and f"from host {other}," in wrote[0]
          and any(line.startswith(f"host: {other},") and "(attempt 2)" in line for line in proc.lines),
          (lost, proc.returncode, proc.lines[-4:], err[-600:]))
    check("... the client said why it moved", f"host {lost} unreachable since" in err and "trying another host" in err, err[-600:])
    result = {"sha256": None}
    if wrote:
        path = Path(wrote[0][len("wrote "):wrote[0].rindex(" (")])
        s, _, body = servers[other].request("GET", "/v1/vireo/jobs?limit=100")
        done = [j for j in json.loads(body)["data"] if j["prompt"] == "any host will do" and j["status"] == "completed"]
        if done:
            s, _, body = servers[other].request("GET", f"/v1/vireo/jobs/{done[0]['id']}")
            result["sha256"] = json.loads(body).get("output", {}).get("sha256")
    made = [p for p in client_outputs() if "any-host-will-do" in p.name]
    check("... one output for the job, whole", len(made) == 1 and hashlib.sha256(made[0].read_bytes()).hexdigest() == result.get("sha256"),
          made)
    if lost:
        back = api.Server("host" + lost, home=servers[lost].home)
        copies = [j for j in host_jobs(back) if j["prompt"] == "any host will do"]
        check("after the killed host restarts, its copy is failed, with no output there",
              all(j["status"] == "failed" for j in copies) and not [p for p in back.outputs.glob("*.mp4") if "any" in p.name],
              copies)
        back.stop()
    return servers


class LyingHost(http.server.BaseHTTPRequestHandler):
    """A server that speaks the host API but lies: a digest that is not the file's, a redirect
    for a model, an event stream without end."""
    body = b"\x00\x00\x00\x18ftypmp42" + bytes(range(256)) * 40

    def log_message(self, *args):
        pass

    def send(self, status, payload, ctype="application/json", extra=()):
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        for k, v in extra:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path == "/v1/vireo/host":
            return self.send(200, {"version": "9", "devices": [], "models_ready": ["liar", "redirect", "flood", "short"], "jobs_active": 0,
                                   "max_queued_jobs": 4})
        if self.path.startswith("/v1/vireo/jobs/video_flood/events"):
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            try:
                self.wfile.write(b"event: progress\ndata: ")
                for _ in range(40):
                    self.wfile.write(b"x" * (1 << 20))
            except (BrokenPipeError, ConnectionResetError):
                pass
            return
        if self.path.endswith("/events"):
            job = self.path.split("/")[4]
            return self.send(200, f"event: completed\ndata: {json.dumps({'id': job, 'status': 'completed'})}\n\n".encode(),
                             "text/event-stream")
        if self.path == "/v1/vireo/jobs/video_liar":
            return self.send(200, {"id": "video_liar", "status": "completed",
                                   "output": {"bytes": len(self.body), "sha256": "0" * 64}})
        if self.path == "/v1/vireo/jobs/video_short":
            return self.send(200, {"id": "video_short", "status": "completed",
                                   "output": {"bytes": len(self.body) + 100, "sha256": hashlib.sha256(self.body).hexdigest()}})
        if self.path in ("/v1/vireo/jobs/video_liar/content", "/v1/vireo/jobs/video_short/content"):
            return self.send(200, self.body, "video/mp4")
        return self.send(404, {"error": {"message": "no such route", "code": "not_found"}})

    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        model = json.loads(self.rfile.read(length)).get("model")
        if model == "redirect":
            return self.send(307, b"", extra=[("Location", "http://127.0.0.1:9/v1/videos")])
        return self.send(200, {"id": f"video_{model}", "status": "queued"})


def test_hostile_host():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), LyingHost)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        cli("hosts", "add", "liar", f"127.0.0.1:{server.server_address[1]}")
        before = client_outputs()
        p = cli("generate", "--host", "liar", "--model", "liar", "--prompt", "x", "--job-id", "liar")
        check("a digest that is not the file's: downloaded twice, then refused with both digests, nothing kept",
              p.returncode == 1 and "does not match the SHA-256" in p.stderr and "0" * 64 in p.stderr
              and "downloading it again" in p.stderr and client_outputs() == before, p.stderr[-500:])
        check("... and the partial is not kept", not [x for x in CLIENT.rglob(".liar.part-remote") if x.stat().st_size > 0])
        p = cli("generate", "--host", "liar", "--model", "short", "--prompt", "x", "--job-id", "short")
        check("a file of another length than the host stated is refused, nothing kept",
              p.returncode == 1 and "states as" in p.stderr and client_outputs() == before
              and not list(CLIENT.rglob(".short.part-remote")), p.stderr[-300:])
        p = cli("generate", "--host", "liar", "--model", "redirect", "--prompt", "x", "--grace", "1")
        check("a redirect is not followed", p.returncode == 1 and "redirect" in p.stderr, p.stderr[-300:])
        p = cli("generate", "--host", "liar", "--model", "flood", "--prompt", "x", "--grace", "1", timeout=120)
        check("an event larger than the bound is cut off, not held in memory", p.returncode == 1 and "larger than" in p.stderr,
              p.stderr[-300:])
    finally:
        server.shutdown()
        cli("hosts", "remove", "liar")


def main():
    a = api.Server("hostA")
    b = api.Server("hostB")
    try:
        test_hosts_list(a, b)
        test_pinned_job(a)
        test_image_job(a)
        test_resume(a)
        test_enhance_prompt_travels(a)
        test_hostile_host()
        servers = test_host_killed(a, b)
        a, b = servers["A"], servers["B"]
    finally:
        for s in (a, b):
            s.stop()
    print(f"Totals: {api.results['passed']} passed, {api.results['failed']} failed")
    return 1 if api.results["failed"] or not api.results["passed"] else 0


if __name__ == "__main__":
    import shutil
    try:
        code = main()
    finally:
        shutil.rmtree(RUN_TMP, ignore_errors=True)
    sys.exit(code)
