"""The local HTTP API (vireo-cli serve) as other programs drive it, on loopback with the tiny
fixture models: the official openai client makes an image and a video that decode to what
vireo-cli generate makes with the same seed; curl fetches the MP4 in three Range requests that
join to a file ffprobe reads; progress arrives as Server-Sent Events; hostile requests get a 4xx
or a closed connection, never a 5xx; 50 clients at once; a token beyond loopback; and a server
killed with SIGKILL mid-job that comes back with its queue.
Usage: test_api.py PATH_TO_VIREO_CLI"""
import base64
import hashlib
import http.client
import json
import struct
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path

# The openai client warns that OpenAI's own video service closes; this server is not it.
warnings.filterwarnings("ignore", category=DeprecationWarning)

CLI = sys.argv[1]
FIXTURES = Path(os.environ["VIREO_FIXTURES_ROOT"])
VIDEO_MODEL = FIXTURES / "ltx2pipeline" / "v23" / "diffusers"
IMAGE_MODEL = FIXTURES / "ideogram4" / "pipeline" / "model"
RUN_TMP = Path(tempfile.mkdtemp(prefix="vireo-api-test-"))
results = {"passed": 0, "failed": 0}


def check(name, ok, detail=""):
    results["passed" if ok else "failed"] += 1
    print(("PASS   : " if ok else "FAIL!  : ") + name + ("" if ok else f" {str(detail)[:600]}"), flush=True)


def decoded(path):
    """What a viewer sees and hears (frames as RGB, sound as 16-bit PCM), not the container's bytes."""
    frames = subprocess.run(["ffmpeg", "-v", "error", "-i", str(path), "-f", "rawvideo", "-pix_fmt", "rgb24", "-"],
                            capture_output=True).stdout
    sound = b"" if str(path).endswith(".png") else subprocess.run(
        ["ffmpeg", "-v", "error", "-i", str(path), "-vn", "-f", "s16le", "-"], capture_output=True).stdout
    return frames, sound


class Server:
    """One `vireo-cli serve` with its own data folders, on a free loopback port."""

    def __init__(self, name, *extra, home=None, listen="127.0.0.1:0"):
        self.home = home or RUN_TMP / name
        self.home.mkdir(parents=True, exist_ok=True)
        self.outputs = self.home / "outputs"
        self.journal = self.home / "journal.jsonl"
        self.port_file = self.home / "port"
        self.port_file.unlink(missing_ok=True)
        self.env = dict(os.environ, XDG_DATA_HOME=str(self.home / "data"), XDG_CONFIG_HOME=str(self.home / "config"),
                        XDG_CACHE_HOME=str(self.home / "cache"), HOME=str(self.home), no_proxy="*", NO_PROXY="*")
        self.log = open(self.home / "server.log", "ab")
        self.proc = subprocess.Popen(
            [CLI, "serve", "--listen", listen, "--port-file", str(self.port_file), "--model", str(VIDEO_MODEL),
             "--model", str(IMAGE_MODEL), "--outputs", str(self.outputs), "--journal", str(self.journal), *map(str, extra)],
            stdout=self.log, stderr=self.log, env=self.env)
        deadline = time.time() + 60
        while not self.port_file.exists():
            if self.proc.poll() is not None or time.time() > deadline:
                raise RuntimeError(f"vireo-cli serve did not start: {self.read_log()[-2000:]}")
            time.sleep(0.05)
        self.port = int(self.port_file.read_text().strip())
        self.base = f"http://127.0.0.1:{self.port}"

    def read_log(self):
        if not self.log.closed:
            self.log.flush()
        return (self.home / "server.log").read_text(errors="replace")

    def request(self, method, path, body=None, headers=None, timeout=60):
        """One request on its own connection: (status, headers, body bytes)."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        h = {"Host": f"127.0.0.1:{self.port}"}
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
            h["Content-Type"] = "application/json"
        h.update(headers or {})
        conn.request(method, path, body=body, headers=h)
        r = conn.getresponse()
        data = r.read()
        conn.close()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, data

    def raw(self, payload, read_timeout=10):
        """Bytes sent as they are; the answer's bytes until the server closes or goes quiet."""
        s = socket.create_connection(("127.0.0.1", self.port), timeout=read_timeout)
        try:
            s.sendall(payload)
            out = b""
            while True:
                try:
                    chunk = s.recv(65536)
                except socket.timeout:
                    break
                if not chunk:
                    break
                out += chunk
                if len(out) > 1 << 20:
                    break
            return out
        finally:
            s.close()

    def stop(self, sig=signal.SIGINT):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        return self.proc.returncode


def status_of(raw):
    try:
        return int(raw.split(b" ", 2)[1])
    except (IndexError, ValueError):
        return None


def client_for(server, **kw):
    import openai
    return openai.OpenAI(base_url=server.base + "/v1", api_key=kw.pop("api_key", "unused"), max_retries=0, timeout=300, **kw)


def model_ids(server):
    client = client_for(server)
    models = client.models.list()
    by_kind = {}
    for m in models.data:
        extra = m.model_extra or {}
        by_kind.setdefault(extra.get("kind"), []).append(m.id)
    return by_kind


def test_openai_image_and_video(server):
    by_kind = model_ids(server)
    check("GET /v1/models lists the tiny video and image models with their kind",
          by_kind.get("video") == ["local/diffusers"] and by_kind.get("image") == ["local/model"], by_kind)
    client = client_for(server)
    # An image, as the openai client asks for one.
    image = client.images.generate(model="local/model", prompt="a lighthouse at dusk", size="64x48", n=1,
                                   response_format="b64_json", extra_body={"seed": 3, "steps": 4})
    api_png = RUN_TMP / "api-image.png"
    api_png.write_bytes(base64.b64decode(image.data[0].b64_json))
    cli_png = RUN_TMP / "cli-image.png"
    p = subprocess.run([CLI, "generate", "--model", str(IMAGE_MODEL), "--prompt", "a lighthouse at dusk", "--width", "64",
                        "--height", "48", "--seed", "3", "--steps", "4", "--no-gallery", "--out", str(cli_png)],
                       capture_output=True, text=True, env=server.env, timeout=300)
    check("images.generate: the PNG decodes to what vireo-cli generate makes with the same seed",
          p.returncode == 0 and decoded(api_png) == decoded(cli_png) and len(decoded(api_png)[0]) == 64 * 48 * 3,
          p.stderr[-400:])
    image_url = client.images.generate(model="local/model", prompt="a lighthouse at dusk", size="64x48", response_format="url",
                                       extra_body={"seed": 3, "steps": 4})
    url = image_url.data[0].url
    status, headers, body = server.request("GET", url.replace(server.base, ""))
    check("images.generate response_format=url: the URL serves the PNG",
          status == 200 and headers.get("content-type") == "image/png" and body[:8] == b"\x89PNG\r\n\x1a\n", (status, headers))

    # A video: create, poll, download.
    video = client.videos.create(model="local/diffusers", prompt="a red fox runs through the snow", size="96x64", seconds="0.7",
                                 extra_body={"seed": 7, "speed": "fast"})
    check("videos.create answers at once with a queued job",
          video.status in ("queued", "in_progress") and video.id.startswith("video_") and video.size == "96x64", video)
    deadline = time.time() + 300
    while video.status in ("queued", "in_progress") and time.time() < deadline:
        time.sleep(0.3)
        video = client.videos.retrieve(video.id)
    check("videos.retrieve: the job completes with progress 100", video.status == "completed" and video.progress == 100, video)
    content = client.videos.download_content(video.id)
    api_mp4 = RUN_TMP / "api-video.mp4"
    api_mp4.write_bytes(content.content)
    cli_mp4 = RUN_TMP / "cli-video.mp4"
    p = subprocess.run([CLI, "generate", "--model", str(VIDEO_MODEL), "--prompt", "a red fox runs through the snow", "--width", "96",
                        "--height", "64", "--frames", "17", "--seed", "7", "--speed", "fast", "--no-gallery", "--out", str(cli_mp4)],
                       capture_output=True, text=True, env=server.env, timeout=300)
    a, b = decoded(api_mp4), decoded(cli_mp4)
    check("videos.download_content: frames and sound are what vireo-cli generate makes (17 frames for 0.7 s)",
          p.returncode == 0 and a == b and len(a[0]) == 17 * 96 * 64 * 3 and len(a[1]) > 0, (p.stderr[-300:], len(a[0]), len(b[0])))
    listed = client.videos.list(limit=10)
    check("videos.list holds the video", any(v.id == video.id for v in listed.data), listed)
    thumb = client.videos.download_content(video.id, variant="thumbnail").content
    check("the thumbnail variant is a JPEG", thumb[:3] == b"\xff\xd8\xff", thumb[:8])
    status, _, body = server.request("GET", f"/v1/vireo/jobs/{video.id}")
    recipe = json.loads(body).get("recipe", {}) if status == 200 else {}
    check("/v1/vireo/jobs/{id}: the full recipe (seed, frames, model files)",
          recipe.get("seed") == 7 and recipe.get("frames") == 17 and recipe.get("files"), recipe.keys())
    digest = json.loads(body).get("output", {}) if status == 200 else {}
    check("/v1/vireo/jobs/{id}: the output's bytes and SHA-256 are those downloaded",
          digest.get("sha256") == hashlib.sha256(content.content).hexdigest() and digest.get("bytes") == len(content.content),
          digest)
    return video.id, api_mp4


def test_ranges(server, video_id, whole):
    size = whole.stat().st_size
    url = f"{server.base}/v1/videos/{video_id}/content"
    parts = [(0, 999), (1000, 4999), (5000, None)]
    joined = RUN_TMP / "joined.mp4"
    with open(joined, "wb") as out:
        for first, last in parts:
            r = subprocess.run(["curl", "-s", "-D", "-", "-o", "-", "-r", f"{first}-{'' if last is None else last}", url],
                               capture_output=True)
            head, _, body = r.stdout.partition(b"\r\n\r\n")
            ok = (b"206 Partial Content" in head and f"content-range: bytes {first}-{size - 1 if last is None else last}/{size}".encode()
                  in head.lower() and len(body) == ((size - first) if last is None else last - first + 1))
            check(f"curl -r {first}-{last if last is not None else ''}: a 206 with its Content-Range", ok, head[:300])
            out.write(body)
    probe = subprocess.run(["ffprobe", "-v", "error", "-count_frames", "-show_streams", "-of", "json", str(joined)],
                           capture_output=True, text=True)
    streams = {s["codec_type"]: s for s in json.loads(probe.stdout or "{}").get("streams", [])}
    check("the three ranges join to the whole file, and ffprobe reads it",
          joined.read_bytes() == whole.read_bytes() and streams.get("video", {}).get("nb_read_frames") == "17" and "audio" in streams,
          probe.stderr[-300:])
    path = f"/v1/videos/{video_id}/content"
    status, headers, _ = server.request("GET", path, headers={"Range": f"bytes={size}-"})
    check("a range past the end: 416 with Content-Range bytes */len",
          status == 416 and headers.get("content-range") == f"bytes */{size}", (status, headers))
    etag = headers.get("etag")
    status, headers, body = server.request("GET", path, headers={"Range": "bytes=0-9", "If-Range": etag})
    check("If-Range with the current ETag: 206", status == 206 and len(body) == 10 and headers.get("etag") == etag, (status, headers))
    status, _, body = server.request("GET", path, headers={"Range": "bytes=0-9", "If-Range": '"another"'})
    check("If-Range with another ETag: the whole file, 200", status == 200 and len(body) == size, status)
    status, _, body = server.request("GET", path, headers={"Range": "bytes=-100"})
    check("a suffix range: the last 100 bytes", status == 206 and body == whole.read_bytes()[-100:], status)
    status, _, body = server.request("GET", path, headers={"Range": "bytes=0-1,5-6"})
    check("several ranges: the whole file (allowed by RFC 9110)", status == 200 and len(body) == size, status)
    status, _, _ = server.request("GET", path, headers={"If-None-Match": etag})
    check("If-None-Match with the ETag: 304", status == 304, status)
    status, headers, body = server.request("HEAD", path)
    check("HEAD: the length without the body", status == 200 and int(headers.get("content-length", -1)) == size and body == b"",
          (status, headers))


def test_events(server):
    status, _, body = server.request("POST", "/v1/videos", {"model": "local/diffusers", "prompt": "waves", "size": "96x64",
                                                            "frames": 17, "seed": 5})
    job = json.loads(body)
    check("POST /v1/videos with a JSON body", status == 200 and job.get("status") in ("queued", "in_progress"), body[:300])
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=300)
    conn.request("GET", f"/v1/vireo/jobs/{job['id']}/events?preview_fps=30", headers={"Host": f"127.0.0.1:{server.port}"})
    r = conn.getresponse()
    events = []
    name = None
    while True:
        line = r.fp.readline()
        if not line:
            break
        line = line.decode().rstrip("\n")
        if line.startswith("event: "):
            name = line[7:]
        elif line.startswith("data: "):
            events.append((name, json.loads(line[6:])))
            if name in ("completed", "failed"):
                break
    conn.close()
    kinds = [e[0] for e in events]
    steps = [e[1]["step"] for e in events if e[0] == "progress" and e[1].get("phase") == "denoise"]
    previews = [e[1] for e in events if e[0] == "preview"]
    check("SSE: status, denoise progress step by step, previews, then completed",
          r.status == 200 and kinds[0] == "status" and kinds[-1] == "completed" and steps and steps == sorted(steps)
          and previews and base64.b64decode(previews[0]["jpeg_base64"])[:3] == b"\xff\xd8\xff",
          (r.status, kinds[:6], kinds[-3:], steps))


def test_errors(server):
    bad = []

    def expect(name, status, wanted, body=b""):
        ok = status == wanted
        if status and status >= 500 and status != wanted:
            bad.append(name)
        try:
            err = json.loads(body).get("error", {}) if body else {}
        except ValueError:
            err = {}
        check(f"{name}: {wanted}", ok and (not body or wanted < 400 or "message" in err), (status, body[:300]))
        return err

    s, _, b = server.request("POST", "/v1/videos", {"model": "nope", "prompt": "x"})
    err = expect("an unknown model", s, 400, b)
    check("  ... names the field", err.get("param") == "model" and err.get("code") == "model_not_found", err)
    s, _, b = server.request("POST", "/v1/videos", {"model": "local/diffusers", "prompt": "x", "size": "100x100"})
    err = expect("a size off the family's grid", s, 400, b)
    check("  ... names size and the rule", err.get("param") == "size" and "32" in err.get("message", ""), err)
    s, _, b = server.request("POST", "/v1/videos", {"model": "local/diffusers", "prompt": "x", "temperature": 1})
    err = expect("an unsupported parameter", s, 400, b)
    check("  ... names it", err.get("param") == "temperature", err)
    s, _, b = server.request("POST", "/v1/videos", {"model": "local/model", "prompt": "x"})
    expect("an image model on /v1/videos", s, 400, b)
    s, _, b = server.request("POST", "/v1/images/generations", {"model": "local/model", "prompt": "x", "n": 1000})
    expect("n out of range", s, 400, b)
    s, _, b = server.request("POST", "/v1/images/generations", {"model": "local/model", "prompt": ["x"]})
    expect("a prompt of the wrong type", s, 400, b)
    s, _, b = server.request("POST", "/v1/videos", b"{not json", {"Content-Type": "application/json"})
    expect("malformed JSON", s, 400, b)
    s, _, b = server.request("POST", "/v1/videos", b"[" * 5000 + b"]" * 5000, {"Content-Type": "application/json"})
    expect("JSON nested 5,000 deep", s, 400, b)
    s, _, b = server.request("POST", "/v1/videos", b"prompt=x", {"Content-Type": "text/plain"})
    expect("a body that is neither JSON nor a form", s, 415, b)
    s, _, b = server.request("POST", "/v1/videos", {"model": "local/diffusers", "prompt": "x", "seconds": "1e9"})
    expect("seconds out of range", s, 400, b)
    s, _, b = server.request("POST", "/v1/videos", {"model": "local/diffusers", "prompt": "x",
                                                     "input_reference": {"image_url": "http://example.com/a.png"}})
    expect("an input_reference URL (nothing is fetched)", s, 400, b)
    s, _, b = server.request("POST", "/v1/videos", {"model": "local/diffusers", "prompt": "x",
                                                     "input_reference": {"image_url": "data:image/png;base64,AAAA"}})
    expect("an input_reference that is not an image", s, 400, b)
    s, _, b = server.request("GET", "/v1/videos/..%2F..%2Fetc%2Fpasswd/content")
    expect("an id with ../", s, 404, b)
    s, _, b = server.request("GET", "/v1/videos/../../etc/passwd")
    expect("a path with ../", s, 404, b)
    s, _, b = server.request("GET", "/v1/vireo/gallery/-1/file")
    expect("a gallery id that does not exist", s, 404, b)
    s, h, b = server.request("PUT", "/v1/videos")
    expect("a method the route does not take", s, 405, b)
    check("  ... with Allow", "POST" in h.get("allow", ""), h)
    s, _, b = server.request("GET", "/v1/nothing")
    expect("an unknown route", s, 404, b)
    s, _, b = server.request("GET", "/v1/models", headers={"Host": "evil.example:80"})
    expect("a foreign Host (DNS rebinding)", s, 403, b)
    s, _, b = server.request("GET", "/v1/models", headers={"Origin": "http://evil.example"})
    expect("a web page's Origin", s, 403, b)
    # RFC 7240 "Prefer: wait=0": the image model is not loaded (the last job was a video), so a
    # 503 with Retry-After while it loads, then the same request goes through.
    body = {"model": "local/model", "prompt": "a kite", "size": "64x48", "seed": 1, "steps": 2}
    s, h, b = server.request("POST", "/v1/images/generations", body, {"Prefer": "wait=0"})
    err = expect("Prefer: wait=0 while the model loads", s, 503, b)
    check("  ... with Retry-After and the code model_loading", int(h.get("retry-after", "0")) >= 1 and err.get("code") == "model_loading",
          (h, err))
    deadline = time.time() + 120
    while s == 503 and time.time() < deadline:
        time.sleep(0.2)
        s, h, b = server.request("POST", "/v1/images/generations", body, {"Prefer": "wait=0"})
    check("  ... and once it is loaded the same request is served", s == 200, (s, b[:200]))
    # Over raw sockets: what no well-behaved client sends.
    hostline = f"Host: 127.0.0.1:{server.port}\r\n".encode()
    r = server.raw(b"POST /v1/videos HTTP/1.1\r\n" + hostline + b"Content-Type: application/json\r\nContent-Length: 100000000\r\n\r\n{")
    expect("a 100 MB body, refused before it is read", status_of(r), 413, r.partition(b"\r\n\r\n")[2])
    chunk = b"ffff\r\n" + b"x" * 0xffff + b"\r\n"
    s = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    s.sendall(b"POST /v1/images/generations HTTP/1.1\r\n" + hostline + b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
    sent = 0
    try:
        while sent < 64 << 20:
            s.sendall(chunk)
            sent += len(chunk)
    except OSError:
        pass
    try:
        answer = s.recv(4096)
    except OSError:
        answer = b""
    s.close()
    check("an endless chunked body: 413 or closed before 64 MB", sent < 64 << 20 and status_of(answer) in (413, None), (sent, answer[:100]))
    r = server.raw(b"GET /v1/models HTTP/1.1\r\n" + hostline + b"X-Big: " + b"a" * 70000 + b"\r\n\r\n")
    expect("70 KB of headers", status_of(r), 431, r.partition(b"\r\n\r\n")[2])
    r = server.raw(b"GET /v1/models HTTP/1.1\r\n" + hostline + b"X-A: b\r\nInjected\r\n\r\n")
    check("a header line without a colon: 400 or closed", status_of(r) in (400, None), r[:100])
    r = server.raw(b"GET /v1/videos/x%0d%0aSet-Cookie:%20a=b HTTP/1.1\r\n" + hostline + b"\r\n")
    check("CR LF in the target never becomes a header", b"\r\nset-cookie" not in r.lower() and status_of(r) in (400, 404), r[:300])
    r = server.raw(b"GARBAGE\r\n\r\n")
    check("not HTTP at all: 400 or closed", status_of(r) in (400, None), r[:100])
    # Slowloris: a header byte every half second is cut off at the header deadline (2 s here).
    s = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    started = time.time()
    closed_after = None
    for c in b"GET /v1/models HTTP/1.1\r\nX-Slow: " + b"a" * 40:
        try:
            s.sendall(bytes([c]))
            s.settimeout(0.5)
            if s.recv(100) == b"":
                closed_after = time.time() - started
                break
        except socket.timeout:
            continue
        except OSError:
            closed_after = time.time() - started
            break
    s.close()
    check("slowloris: closed at the header deadline", closed_after is not None and closed_after < 6, closed_after)
    # 1,000 connections at once: the server holds its cap and answers afterwards.
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
    socks = []
    for _ in range(1000):
        try:
            socks.append(socket.create_connection(("127.0.0.1", server.port), timeout=5))
        except OSError:
            break
    opened = len(socks)
    for c in socks:
        c.close()
    time.sleep(0.5)
    s, _, _ = server.request("GET", "/v1/models")
    check("1,000 connections: the server answers after them", opened >= 900 and s == 200, (opened, s))
    check("no hostile request got a 5xx", not bad, bad)
    check("the server still runs", server.proc.poll() is None, server.read_log()[-500:])


def test_recipe_fields(server):
    """Vireo's own fields beside OpenAI's: keyframes, LoRAs, knobs, stages; refused by name when
    the model cannot take them; uploads kept only until the job has run."""
    import openai
    client = client_for(server)
    still = base64.b64encode((RUN_TMP / "api-image.png").read_bytes()).decode()
    keyframe = {"model": "local/diffusers", "prompt": "a keyframe", "size": "96x64", "frames": 17, "seed": 2,
                "conditions": [{"image": f"data:image/png;base64,{still}", "frame": 8, "strength": 0.9}]}
    s, _, b = server.request("POST", "/v1/videos", keyframe)
    err = json.loads(b).get("error") or {}
    check("a keyframe off the latent grid (frame 8): 400 naming the field, not the server's file",
          s == 400 and err.get("param") == "conditions" and "'conditions[0]'" in err.get("message", "")
          and "api-uploads" not in err.get("message", ""), b[:300])
    keyframe["conditions"][0]["frame"] = 9
    s, _, b = server.request("POST", "/v1/videos", keyframe)
    job = json.loads(b)
    deadline = time.time() + 300
    while s == 200 and job.get("status") in ("queued", "in_progress") and time.time() < deadline:
        time.sleep(0.3)
        s, _, b = server.request("GET", f"/v1/videos/{job['id']}")
        job = json.loads(b)
    recipe = json.loads(server.request("GET", f"/v1/vireo/jobs/{job.get('id')}")[2]).get("recipe", {}) if s == 200 else {}
    conditions = recipe.get("conditions", [])
    check("a keyframe (a data: URL at frame 9) conditions the video and is in its recipe",
          job.get("status") == "completed" and len(conditions) == 1 and conditions[0].get("frame") == 9
          and abs(conditions[0].get("strength", 0) - 0.9) < 1e-9, (job.get("status"), job.get("error"), conditions))
    uploads = server.home / "data" / "Vireo" / "vireo" / "api-uploads"
    left = list(uploads.iterdir()) if uploads.exists() else []
    check("the uploaded still is removed once the job has run (the recipe keeps its copy)", not left, left)
    try:
        client.videos.create(model="local/diffusers", prompt="x", size="96x64", seconds="0.7",
                             extra_body={"loras": [{"path": "/nonexistent/style.safetensors", "strength": 0.5}]})
        err = None
    except openai.BadRequestError as e:
        err = e
    check("a LoRA that is not a file, through the openai client's form: 400 naming loras[0]",
          err is not None and "loras[0].path" in str(err.body), getattr(err, "body", None))
    s, _, b = server.request("POST", "/v1/images/generations", {"model": "local/model", "prompt": "x", "size": "64x48",
                                                                 "loras": [{"path": str(IMAGE_MODEL / "model_index.json")}]})
    err = json.loads(b).get("error", {})
    check("a LoRA on an image model: 400 naming it", s == 400 and err.get("param") == "lora", (s, err))
    s, _, b = server.request("POST", "/v1/images/generations", {"model": "local/model", "prompt": "x", "size": "64x48",
                                                                 "knobs": {"no_such_knob": 1}})
    check("an unknown knob: 400 that names it", s == 400 and "no_such_knob" in json.loads(b)["error"]["message"], b[:300])
    image = client.images.generate(model="local/model", prompt="a kite", size="64x48",
                                   extra_body={"seed": 5, "steps": 2, "knobs": {"schedule_mu": 0.5}})
    vid = (image.data[0].model_extra or {}).get("vireo_id")
    recipe = json.loads(server.request("GET", f"/v1/vireo/jobs/{vid}")[2]).get("recipe", {})
    check("a family knob through the openai client reaches the recipe", recipe.get("knobs", {}).get("schedule_mu") == 0.5,
          recipe.get("knobs"))
    s, _, b = server.request("POST", "/v1/videos", {"model": "local/diffusers", "prompt": "x", "size": "96x64", "stages": "two"})
    check("two stages at a size that does not halve: 400 with the reason", s == 400 and "halve" in b.decode(), b[:300])
    # A job's own device: "auto" places it by plan and queue (here the CPU, the only device) and
    # says where; a device the box lacks, or a word that is not a device, is refused by name.
    s, _, b = server.request("POST", "/v1/videos", {"model": "local/diffusers", "prompt": "a placed fox", "size": "96x64",
                                                    "frames": 9, "seed": 4, "device": "auto"})
    job = json.loads(b)
    deadline = time.time() + 300
    while s == 200 and job.get("status") in ("queued", "in_progress") and time.time() < deadline:
        time.sleep(0.3)
        s, _, b = server.request("GET", f"/v1/videos/{job['id']}")
        job = json.loads(b)
    placed = json.loads(server.request("GET", f"/v1/vireo/jobs/{job.get('id')}")[2]).get("params", {}) if s == 200 else {}
    check("a job with \"device\": \"auto\" is placed by the device pool and says where",
          job.get("status") == "completed" and placed.get("placed_on") in ("cpu", "cuda:0"), (job.get("status"), job.get("error"), placed))
    s, _, b = server.request("POST", "/v1/videos", {"model": "local/diffusers", "prompt": "x", "size": "96x64", "device": "cuda:7"})
    err = json.loads(b).get("error", {})
    check("a device the box does not have: 400 naming the box's devices",
          s == 400 and err.get("param") == "device" and "cuda:7, which this box does not have (cpu" in err.get("message", ""), (s, err))
    s, _, b = server.request("POST", "/v1/videos", {"model": "local/diffusers", "prompt": "x", "size": "96x64", "device": "gpu"})
    err = json.loads(b).get("error", {})
    check("a device that is not one: 400", s == 400 and err.get("param") == "device" and "auto, cpu or cuda:N" in err.get("message", ""),
          (s, err))
    # What a client choosing among hosts reads: every device, the model each holds, the models ready.
    s, _, b = server.request("GET", "/v1/vireo/host")
    host = json.loads(b) if s == 200 else {}
    devices = host.get("devices", [])
    check("GET /v1/vireo/host: version, devices with memory and what they hold, models ready, jobs active",
          host.get("object") == "vireo.host" and host.get("version") and devices and devices[0]["device"] == "cpu"
          and devices[0]["total_bytes"] > 0 and "queued" in devices[0] and "resident_model" in devices[0]
          and "local/diffusers" in host.get("models_ready", []) and isinstance(host.get("jobs_active"), int), b[:600])
    s, _, b = server.request("POST", "/v1/videos", {"model": "local/diffusers", "prompt": "x", "stages": "three"})
    check("an unknown stage path: 400 naming stages", s == 400 and json.loads(b)["error"]["param"] == "stages", b[:300])


def wav_bytes(rate, channels, seconds):
    """16-bit PCM WAV of a chirp per channel."""
    import math
    n = int(rate * seconds)
    data = bytearray()
    for i in range(n):
        t = i / rate
        for c in range(channels):
            data += struct.pack("<h", int(0.4 * math.sin(2 * math.pi * (300 + 400 * c) * t * (1 + t)) * 32767))
    return (b"RIFF" + struct.pack("<I", 36 + len(data)) + b"WAVEfmt " + struct.pack("<IHHIIHH", 16, 1, channels, rate, rate * channels * 2,
            channels * 2, 16) + b"data" + struct.pack("<I", len(data)) + bytes(data))


def test_audio(server):
    """Audio-to-video over the API: "audio" as a data: URL (JSON) or a multipart file; the clip is
    as long as the sound unless "seconds" or "frames" cut it; the video's sound is the user's;
    a body that is not a sound, and a model that cannot follow one, are refused with 400 naming
    'audio' before anything is queued."""
    wav = wav_bytes(44100, 2, 0.8)
    url = "data:audio/wav;base64," + base64.b64encode(wav).decode()
    s, _, b = server.request("POST", "/v1/videos", {"model": "local/diffusers", "prompt": "a fox sings", "size": "96x64", "seed": 4,
                                                     "audio": url})
    job = json.loads(b)
    # 0.8 s at 24 fps: the clip that holds it is 25 frames, 1.042 s (read from the sound's header).
    check("audio as a data: URL: accepted, its length the sound's", s == 200 and job.get("seconds") == "1.042", b[:300])
    deadline = time.time() + 300
    while s == 200 and job.get("status") in ("queued", "in_progress") and time.time() < deadline:
        time.sleep(0.3)
        s, _, b = server.request("GET", f"/v1/videos/{job['id']}")
        job = json.loads(b)
    recipe = json.loads(server.request("GET", f"/v1/vireo/jobs/{job.get('id')}")[2]).get("recipe", {}) if s == 200 else {}
    check("audio: the job completes with the clip that holds the sound (25 frames), its recipe names it",
          job.get("status") == "completed" and recipe.get("frames") == 25 and (recipe.get("audio") or {}).get("sample_rate") == 44100
          and job.get("seconds") not in ("audio", "auto"), (job.get("status"), job.get("error"), recipe.get("frames"), job.get("seconds")))
    s, _, mp4 = server.request("GET", f"/v1/videos/{job.get('id')}/content")
    path = RUN_TMP / "api-a2v.mp4"
    path.write_bytes(mp4)
    probe = subprocess.run(["ffprobe", "-v", "error", "-show_streams", "-of", "json", str(path)], capture_output=True, text=True)
    try:
        streams = json.loads(probe.stdout).get("streams", [])
    except ValueError:
        streams = []
    check("audio: the video carries the sound at its own rate",
          any(st.get("codec_type") == "audio" and st.get("sample_rate") == "44100" for st in streams), probe.stdout[-300:])
    # A multipart upload, cut by "frames".
    boundary = "vireo-boundary"
    parts = []
    for k, v in {"model": "local/diffusers", "prompt": "a fox hums", "size": "96x64", "frames": "9"}.items():
        parts.append(f"--{boundary}\r\nContent-Disposition: form-data; name=\"{k}\"\r\n\r\n{v}\r\n".encode())
    parts.append(f"--{boundary}\r\nContent-Disposition: form-data; name=\"audio\"; filename=\"hum.wav\"\r\n"
                 "Content-Type: audio/wav\r\n\r\n".encode() + wav + b"\r\n")
    parts.append(f"--{boundary}--\r\n".encode())
    s, _, b = server.request("POST", "/v1/videos", b"".join(parts), {"Content-Type": f"multipart/form-data; boundary={boundary}"})
    job = json.loads(b)
    check("audio as a multipart file, cut by frames 9", s == 200 and job.get("seconds") == "0.375", b[:300])
    bad = "data:audio/wav;base64," + base64.b64encode(b"these are words, not a sound").decode()
    s, _, b = server.request("POST", "/v1/videos", {"model": "local/diffusers", "prompt": "x", "audio": bad})
    err = json.loads(b).get("error") or {}
    check("audio that is not a sound: 400 naming 'audio', not the server's file",
          s == 400 and err.get("param") == "audio" and "'audio'" in err.get("message", "") and "api-uploads" not in err.get("message", ""),
          b[:300])
    s, _, b = server.request("POST", "/v1/videos", {"model": "local/diffusers", "prompt": "x", "audio": "http://example.com/a.wav"})
    check("audio by URL: 400 (nothing is fetched)", s == 400 and (json.loads(b).get("error") or {}).get("param") == "audio", b[:300])
    s, _, b = server.request("POST", "/v1/vireo/jobs", {"kind": "image", "model": "local/model", "prompt": "x", "audio": url})
    check("audio for an image model: refused", s == 400, b[:300])


def test_reference_video(server):
    """IC-LoRA over the API: "reference_video" (a data: URL or a multipart file) and "reference_strength" with an
    IC-LoRA among "loras"; the recipe names the clip and its strength; a body that is not a video, a clip shorter
    than the video and a strength without a clip are refused with 400 naming the field before anything is queued."""
    import torch
    from safetensors.torch import save_file
    work = RUN_TMP / "api-iclora"
    work.mkdir(exist_ok=True)
    g = torch.Generator().manual_seed(3)
    tensors = {}
    for m in ("attn1.to_q", "attn1.to_k"):
        tensors[f"diffusion_model.transformer_blocks.0.{m}.lora_A.weight"] = torch.randn(4, 64, generator=g)
        tensors[f"diffusion_model.transformer_blocks.0.{m}.lora_B.weight"] = torch.randn(64, 4, generator=g)
    ic = work / "depth-control.safetensors"
    save_file(tensors, str(ic), metadata={"reference_downscale_factor": "1"})
    clips = {}
    for frames in (17, 9):
        clip = work / f"depth{frames}.mp4"
        subprocess.run(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc=size=96x64:rate=24", "-frames:v", str(frames),
                        "-pix_fmt", "yuv420p", str(clip)], check=True)
        clips[frames] = "data:video/mp4;base64," + base64.b64encode(clip.read_bytes()).decode()
    base = {"model": "local/diffusers", "prompt": "a robot dances", "size": "96x64", "frames": 17, "seed": 2,
            "loras": [{"path": str(ic), "strength": 1.0}]}
    s, _, b = server.request("POST", "/v1/videos", {**base, "reference_video": clips[17], "reference_strength": 0.8})
    job = json.loads(b)
    check("reference_video as a data: URL: accepted", s == 200 and job.get("id"), b[:300])
    deadline = time.time() + 300
    while s == 200 and job.get("status") in ("queued", "in_progress") and time.time() < deadline:
        time.sleep(0.3)
        s, _, b = server.request("GET", f"/v1/videos/{job['id']}")
        job = json.loads(b)
    recipe = json.loads(server.request("GET", f"/v1/vireo/jobs/{job.get('id')}")[2]).get("recipe", {}) if s == 200 else {}
    refs = recipe.get("references") or [{}]
    check("reference_video: the job completes, its recipe names the clip's strength and the IC-LoRA applied",
          job.get("status") == "completed" and refs[0].get("strength") == 0.8 and refs[0].get("frames") == 17
          and (recipe.get("loras") or [{}])[0].get("status") == "applied", (job.get("status"), job.get("error"), refs))
    for name, extra, param, says in [
            ("a body that is not a video", {"reference_video": "data:video/mp4;base64," + base64.b64encode(b"words").decode()},
             "reference_video", "'reference_video'"),
            ("a clip shorter than the video", {"reference_video": clips[9]}, "reference_video", "has 9 frames"),
            ("a strength without a clip", {"reference_strength": 0.5}, "reference_strength", "belongs to"),
            ("a clip by URL", {"reference_video": "http://example.com/depth.mp4"}, "reference_video", "fetches nothing")]:
        s, _, b = server.request("POST", "/v1/videos", {**base, **extra})
        err = json.loads(b).get("error") or {}
        check(f"reference_video: {name} is refused with 400 naming '{param}'",
              s == 400 and err.get("param") == param and says in err.get("message", "") and "api-uploads" not in err.get("message", ""),
              b[:300])


def test_retake(server):
    """Retake over the API: "retake_video" (a data: URL or a multipart file) with "retake_from" and "retake_to";
    the clip's size and length unless given, the recipe names the window; a window that ends before it starts, a
    window without a clip and a "retake_keep" that is neither sound nor video are refused with 400 naming the field."""
    work = RUN_TMP / "api-retake"
    work.mkdir(exist_ok=True)
    clip = work / "source.mp4"
    subprocess.run(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc=size=96x64:rate=24", "-f", "lavfi", "-i",
                    "sine=frequency=440:sample_rate=44100", "-frames:v", "17", "-shortest", "-pix_fmt", "yuv420p", "-c:a", "aac",
                    str(clip)], check=True)
    url = "data:video/mp4;base64," + base64.b64encode(clip.read_bytes()).decode()
    base = {"model": "local/diffusers", "prompt": "a fox jumps", "seed": 3}
    s, _, b = server.request("POST", "/v1/videos", {**base, "retake_video": url, "retake_from": 0.1, "retake_to": 0.3,
                                                     "retake_keep": "sound"})
    job = json.loads(b)
    check("retake_video: accepted, the clip's length (17 frames at 24 fps)", s == 200 and job.get("seconds") == "0.7083", b[:300])
    deadline = time.time() + 300
    while s == 200 and job.get("status") in ("queued", "in_progress") and time.time() < deadline:
        time.sleep(0.3)
        s, _, b = server.request("GET", f"/v1/videos/{job['id']}")
        job = json.loads(b)
    recipe = json.loads(server.request("GET", f"/v1/vireo/jobs/{job.get('id')}")[2]).get("recipe", {}) if s == 200 else {}
    k = recipe.get("retake") or {}
    check("retake_video: the job completes at the clip's size, its recipe names the window and what was kept",
          job.get("status") == "completed" and recipe.get("width") == 96 and recipe.get("height") == 64 and recipe.get("frames") == 17
          and k.get("start") == 0.1 and k.get("end") == 0.3 and k.get("audio") is False and k.get("video") is True,
          (job.get("status"), job.get("error"), k))
    for name, extra, param in [
            ("a window that ends before it starts", {"retake_video": url, "retake_from": 0.3, "retake_to": 0.1}, "retake_to"),
            ("a window without a clip", {"retake_from": 0.1, "retake_to": 0.3}, "retake_from"),
            ("retake_keep that is neither", {"retake_video": url, "retake_from": 0.1, "retake_to": 0.3, "retake_keep": "both"},
             "retake_keep"),
            ("a body that is not a video", {"retake_video": "data:video/mp4;base64," + base64.b64encode(b"words").decode(),
                                            "retake_from": 0.1, "retake_to": 0.3}, "retake_video")]:
        s, _, b = server.request("POST", "/v1/videos", {**base, **extra})
        err = json.loads(b).get("error") or {}
        check(f"retake_video: {name} is refused with 400 naming '{param}'",
              s == 400 and err.get("param") == param and "api-uploads" not in err.get("message", ""), b[:300])


def test_enhance_prompt():
    """LTX-2.5's prompt enhancer over the API: "enhance_prompt": true on a model with one (a copy of the tiny 2.5
    pipeline with the tiny Gemma 4 E2B enhancer) completes and the video object and the recipe say what it wrote;
    on a 2.5 model without one the job is refused with 400 naming the field; a value that is not a boolean is 400."""
    model = RUN_TMP / "ltx25enh"
    shutil.copytree(FIXTURES / "ltx2pipeline" / "v25" / "diffusers", model)
    for part in ("prompt_enhancer", "processor"):
        shutil.copytree(FIXTURES / "gemma4enhancer" / part, model / part)
    plain = RUN_TMP / "ltx25plain"
    shutil.copytree(FIXTURES / "ltx2pipeline" / "v25" / "diffusers", plain)
    server = Server("enhance", "--model", model, "--model", plain)
    try:
        base = {"model": "local/ltx25enh", "prompt": "a fox in the snow", "size": "64x64", "frames": 9, "seed": 3}
        s, _, b = server.request("POST", "/v1/videos", {**base, "enhance_prompt": True})
        job = json.loads(b)
        deadline = time.time() + 300
        while s == 200 and job.get("status") in ("queued", "in_progress") and time.time() < deadline:
            time.sleep(0.3)
            s, _, b = server.request("GET", f"/v1/videos/{job['id']}")
            job = json.loads(b)
        recipe = json.loads(server.request("GET", f"/v1/vireo/jobs/{job.get('id')}")[2]).get("recipe", {}) if s == 200 else {}
        check("enhance_prompt: the job completes, the video object and the recipe say what the enhancer wrote",
              job.get("status") == "completed" and job.get("enhanced_prompt") and job.get("prompt") == "a fox in the snow"
              and recipe.get("enhance_prompt") is True and recipe.get("enhanced_prompt") == job.get("enhanced_prompt"),
              (job.get("status"), job.get("error"), job.get("enhanced_prompt")))
        for name, body, param, says in [
                ("a value that is not a boolean", {**base, "enhance_prompt": "maybe"}, "enhance_prompt", "true or false"),
                ("a model without an enhancer", {**base, "model": "local/ltx25plain", "enhance_prompt": True},
                 None, "no prompt enhancer")]:
            s, _, b = server.request("POST", "/v1/videos", body)
            err = json.loads(b).get("error") or {}
            check(f"enhance_prompt: {name} is refused with 400", s == 400 and says in err.get("message", "")
                  and (param is None or err.get("param") == param), b[:300])
    finally:
        server.stop()


def test_concurrency(server, video_id):
    """50 clients, 500 requests of every kind at once: no 5xx, no crash, every answer whole."""
    failures = []
    statuses = {}
    lock = threading.Lock()

    def worker(n):
        for i in range(10):
            kind = (n + i) % 5
            try:
                if kind == 0:
                    s, _, b = server.request("GET", f"/v1/videos/{video_id}")
                elif kind == 1:
                    s, _, b = server.request("GET", "/v1/videos?limit=5")
                elif kind == 2:
                    s, h, b = server.request("GET", f"/v1/videos/{video_id}/content", headers={"Range": f"bytes={i * 100}-{i * 100 + 99}"})
                    if s == 206 and len(b) != 100:
                        s = -1
                elif kind == 3:
                    s, _, b = server.request("GET", "/v1/models")
                else:
                    s, _, b = server.request("DELETE", "/v1/videos/video_0000000000000000000000")
            except Exception as e:  # noqa: BLE001 - any failure of the exchange is what this counts
                s = repr(e)
            with lock:
                statuses[s] = statuses.get(s, 0) + 1
                if not isinstance(s, int) or s >= 500 or s < 0:
                    failures.append(s)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(50)]
    started = time.time()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    check(f"50 clients, 500 requests in {time.time() - started:.1f} s: no 5xx, no failed exchange",
          not failures and sum(statuses.values()) == 500, statuses)


def test_queue_and_cancel(server):
    client = client_for(server)
    accepted, refused = [], []
    for i in range(6):
        s, h, b = server.request("POST", "/v1/videos", {"model": "local/diffusers", "prompt": f"clip {i}", "size": "96x64",
                                                         "frames": 17, "seed": i})
        (accepted if s == 200 else refused).append((s, h, b))
    check("a full queue: 429 with Retry-After",
          refused and all(s == 429 and int(h.get("retry-after", "0")) >= 1 for s, h, _ in refused), [(s, b[:200]) for s, _, b in refused])
    ids = [json.loads(b)["id"] for _, _, b in accepted]
    # The last two are cancelled while they wait; the first two run, in the order they came.
    for vid in ids[2:]:
        d = client.videos.delete(vid)
        check("videos.delete cancels a queued or running job", d.deleted and d.object == "video.deleted", d)
    done = []
    deadline = time.time() + 300
    while time.time() < deadline:
        done = [client.videos.retrieve(vid) for vid in ids[:2]]
        if all(v.status in ("completed", "failed") for v in done):
            break
        time.sleep(0.3)
    check("jobs run in the order they were accepted",
          all(v.status == "completed" for v in done) and done[0].completed_at <= done[1].completed_at, done)
    files_before = {p.name for p in server.outputs.glob("*.mp4")}
    d = client.videos.delete(ids[0])
    files_after = {p.name for p in server.outputs.glob("*.mp4")}
    trash = list((server.home / "data" / "Trash" / "files").glob("*.mp4"))
    check("videos.delete of a finished video moves its file to the trash (nothing is lost)",
          d.deleted and len(files_before - files_after) == 1 and len(trash) == 1, (files_before - files_after, trash))
    for vid in (ids[0], ids[2]):
        s, _, _ = server.request("GET", f"/v1/videos/{vid}")
        check("a deleted video is gone (404)", s == 404, s)


def test_openapi(server):
    s, _, b = server.request("GET", "/v1/vireo/openapi.json")
    doc = json.loads(b) if s == 200 else {}
    paths = doc.get("paths", {})
    check("the OpenAPI document lists every route", s == 200 and "/v1/videos/{id}/content" in paths and "post" in paths.get("/v1/videos", {})
          and "/v1/vireo/jobs/{id}/events" in paths, list(paths)[:20])
    s, _, b = server.request("POST", "/v1/vireo/plan", {"model": "local/diffusers", "prompt": "x", "size": "96x64"})
    plan = json.loads(b) if s == 200 else {}
    check("/v1/vireo/plan: the memory plan before anything runs", s == 200 and plan.get("components") and "fits" in plan, b[:300])
    s, _, b = server.request("GET", "/v1/vireo/gallery?limit=50")
    items = json.loads(b).get("data", []) if s == 200 else []
    check("/v1/vireo/gallery lists the API's outputs", s == 200 and any(i["kind"] == "video" for i in items), b[:300])
    if items:
        s, h, body = server.request("GET", items[0]["file"], headers={"Range": "bytes=0-15"})
        check("a gallery file with Range", s == 206 and len(body) == 16, (s, h))


def test_token_beyond_loopback():
    home = RUN_TMP / "public"
    try:
        server = Server("public", listen="0.0.0.0:0")
    except RuntimeError as e:
        check("a server on 0.0.0.0 starts with a token", False, e)
        return
    said = [line for line in server.read_log().splitlines() if "bearer token in " in line]
    token_file = Path(said[0].split("bearer token in ", 1)[1].strip()) if said else home / "missing"
    mode = stat.S_IMODE(token_file.stat().st_mode) if token_file.exists() else None
    token = token_file.read_text().strip() if token_file.exists() else ""
    check("beyond loopback a token is made, readable by its owner only", mode == 0o600 and len(token) > 20, mode)
    s, h, _ = server.request("GET", "/v1/models", headers={"Host": "somewhere.example"})
    check("no token: 401 with WWW-Authenticate", s == 401 and "bearer" in h.get("www-authenticate", "").lower(), (s, h))
    s, _, _ = server.request("GET", "/v1/models", headers={"Authorization": "Bearer wrong", "Host": "somewhere.example"})
    check("a wrong token: 401", s == 401, s)
    s, _, _ = server.request("GET", "/v1/models", headers={"Authorization": f"Bearer {token}", "Host": "somewhere.example"})
    check("the token: 200", s == 200, s)
    client = client_for(server, api_key=token)
    check("the openai client with the token", len(client.models.list().data) == 2)
    server.stop()
    check("the token never reaches the log", token and token not in (home / "server.log").read_text(errors="replace"))
    bad = home / "bad-token"
    bad.write_text("x" * 40)
    os.chmod(bad, 0o644)
    p = subprocess.run([CLI, "serve", "--listen", "0.0.0.0:0", "--token-file", str(bad)], capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, XDG_DATA_HOME=str(home / "data"), XDG_CONFIG_HOME=str(home / "config")))
    check("a token file others can read is refused", p.returncode == 1 and "chmod 600" in p.stderr, p.stderr[-300:])
    short = home / "short-token"
    short.write_text("abc")
    os.chmod(short, 0o600)
    p = subprocess.run([CLI, "serve", "--listen", "127.0.0.1:0", "--token-file", str(short)], capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, XDG_DATA_HOME=str(home / "data"), XDG_CONFIG_HOME=str(home / "config")))
    check("a token file that holds no token is refused", p.returncode == 1 and "does not hold a token" in p.stderr, p.stderr[-300:])
    p = subprocess.run([CLI, "serve", "--listen", "localhost:0"], capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, XDG_DATA_HOME=str(home / "data"), XDG_CONFIG_HOME=str(home / "config")))
    check("a listen address that is not an IP address is refused", p.returncode == 1 and "not an IP address" in p.stderr, p.stderr[-300:])


def test_model_not_ready():
    """A model whose files went away: listed with what is missing, and a 409 that says so."""
    gone = RUN_TMP / "gone-model"
    shutil.copytree(IMAGE_MODEL, gone)
    server = Server("gone", "--model", gone)
    try:
        shutil.rmtree(gone)
        time.sleep(3.5)  # the model list is read again after 3 s
        s, _, b = server.request("GET", "/v1/models")
        listed = json.loads(b)
        missing = [m for m in listed.get("unavailable", []) if m["id"] == "local/gone-model"]
        check("GET /v1/models: a model whose files went away is listed as unavailable, with why",
              s == 200 and missing and "gone" in missing[0].get("missing", "") and all(m["id"] != "local/gone-model" for m in listed["data"]),
              b[:400])
        s, _, b = server.request("POST", "/v1/images/generations", {"model": "local/gone-model", "prompt": "x"})
        err = json.loads(b).get("error", {})
        check("a request for it: 409 model_not_ready, saying what is missing",
              s == 409 and err.get("code") == "model_not_ready" and "gone" in err.get("message", ""), (s, err))
    finally:
        server.stop()


def test_restart_after_kill():
    """kill -9 while a job runs and another waits: after the restart the running one is failed
    with the reason, the queued one runs, and no output is half-written."""
    server = Server("killed")
    ids = []
    for i in range(2):
        s, _, b = server.request("POST", "/v1/videos", {"model": "local/diffusers", "prompt": f"killed {i}", "size": "96x64",
                                                         "frames": 49, "seed": 11 + i}, {"Idempotency-Key": f"retry-{i}"})
        ids.append(json.loads(b)["id"] if s == 200 else None)
    # A client that lost the answer sends the same request with the same key: the same job.
    s, h, b = server.request("POST", "/v1/videos", {"model": "local/diffusers", "prompt": "killed 1", "size": "96x64",
                                                     "frames": 49, "seed": 12}, {"Idempotency-Key": "retry-1"})
    check("Idempotency-Key: a retried submit gets the job it made, not a second one",
          s == 200 and json.loads(b).get("id") == ids[1] and h.get("idempotent-replayed") == "true", (s, h, b[:200]))
    s, _, b = server.request("POST", "/v1/videos", {"model": "local/diffusers", "prompt": "something else", "size": "96x64"},
                             {"Idempotency-Key": "retry-1"})
    check("Idempotency-Key reused for another request: 422", s == 422 and json.loads(b)["error"]["code"] == "idempotency_key_reused",
          (s, b[:200]))
    # Killed on the first denoise step its events report: the job is surely mid-run.
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=120)
    conn.request("GET", f"/v1/vireo/jobs/{ids[0]}/events", headers={"Host": f"127.0.0.1:{server.port}"})
    events = conn.getresponse()
    mid_run = False
    while not mid_run:
        line = events.fp.readline()
        if not line or line.startswith(b"event: completed"):
            break
        mid_run = line.startswith(b"data: ") and b'"phase":"denoise"' in line
    server.proc.send_signal(signal.SIGKILL)
    server.proc.wait()
    server.log.close()
    conn.close()
    check("the kill came while the first job was denoising", mid_run)
    again = Server("killed", home=server.home)
    s, _, b = again.request("GET", f"/v1/videos/{ids[0]}")
    first = json.loads(b)
    check("after kill -9: the job that ran is failed with the reason",
          s == 200 and first["status"] == "failed" and "stopped while this job ran" in (first.get("error") or {}).get("message", ""), b[:300])
    deadline = time.time() + 300
    second = {}
    while time.time() < deadline:
        s, _, b = again.request("GET", f"/v1/videos/{ids[1]}")
        second = json.loads(b)
        if second.get("status") in ("completed", "failed"):
            break
        time.sleep(0.3)
    check("after kill -9: the queued job runs after the restart", second.get("status") == "completed", second)
    s, h, b = again.request("POST", "/v1/videos", {"model": "local/diffusers", "prompt": "killed 1", "size": "96x64",
                                                    "frames": 49, "seed": 12}, {"Idempotency-Key": "retry-1"})
    check("Idempotency-Key after the restart: still the same job (kept in the journal)",
          s == 200 and json.loads(b).get("id") == ids[1] and h.get("idempotent-replayed") == "true", (s, b[:200]))
    outputs = [p for p in again.outputs.iterdir() if p.suffix == ".mp4"] if again.outputs.exists() else []
    readable = all(subprocess.run(["ffprobe", "-v", "error", str(p)], capture_output=True).returncode == 0 for p in outputs)
    check("no half-written output: every MP4 in the outputs folder reads", len(outputs) == 1 and readable, [p.name for p in outputs])
    parts = [p.name for p in again.outputs.iterdir() if ".part" in p.name]
    check("the part file of the job that was cut off is gone", not parts, parts)
    again.stop()


def main():
    try:
        import openai  # noqa: F401
    except ImportError:
        check("the openai client is installed (requirements.txt)", False)
        return 1
    server = Server("main", "--max-queue", "4", "--header-timeout", "2")
    try:
        video_id, mp4 = test_openai_image_and_video(server)
        test_ranges(server, video_id, mp4)
        test_events(server)
        test_concurrency(server, video_id)
        test_openapi(server)
        test_errors(server)
        test_queue_and_cancel(server)
        test_recipe_fields(server)
        test_audio(server)
        test_reference_video(server)
        test_retake(server)
        check("the server still runs after everything", server.proc.poll() is None)
        taken = subprocess.run([CLI, "serve", "--listen", f"127.0.0.1:{server.port}"], capture_output=True, text=True, timeout=60,
                               env=server.env)
        check("a port already taken: the second server says so and stops",
              taken.returncode == 1 and "another program" in taken.stderr, taken.stderr[-300:])
        shared = subprocess.run([CLI, "serve", "--listen", "127.0.0.1:0", "--journal", str(server.journal)], capture_output=True,
                                text=True, timeout=60, env=server.env)
        check("a second server on the same journal is refused (it would run the queued jobs again)",
              shared.returncode == 1 and "in use by another Vireo server" in shared.stderr, shared.stderr[-300:])
    finally:
        rc = server.stop()
    check("Ctrl-C stops the server cleanly", rc == 0, server.read_log()[-800:])
    test_token_beyond_loopback()
    test_enhance_prompt()
    test_model_not_ready()
    test_restart_after_kill()
    print(f"Totals: {results['passed']} passed, {results['failed']} failed")
    return 1 if results["failed"] or not results["passed"] else 0


if __name__ == "__main__":
    try:
        code = main()
    finally:
        shutil.rmtree(RUN_TMP, ignore_errors=True)
    sys.exit(code)
