#!/usr/bin/env python3
"""Checks tests/hub/hubserver.py against the real huggingface_hub client and curl.

Usage: selfcheck.py [--keep] [--verbose]

Starts the server on a generated spec in a temp dir, then drives it with
huggingface_hub (downloads, snapshot, tree pages, model_info, error mapping,
in-process resume) and with curl (ranges, every fault kind, auth leak).
Prints "N passed, N failed"; exits 1 if anything failed. Needs no network.
"""

import argparse
import hashlib
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import hubserver  # noqa: E402
import specs  # noqa: E402

PAGE_SIZE = 7
GOOD = specs.GOOD_TOKEN
OTHER = specs.OTHER_TOKEN


class Checker:
    def __init__(self, verbose):
        self.passed = 0
        self.failed = 0
        self.verbose = verbose

    def run(self, name, fn):
        try:
            fn()
            self.passed += 1
            print(f"PASS {name}")
        except Exception as ex:  # a failed check must not stop the others
            self.failed += 1
            print(f"FAIL {name}: {type(ex).__name__}: {ex}")
            if self.verbose:
                traceback.print_exc()


def expect(cond, msg):
    if not cond:
        raise AssertionError(msg)


class Hub:
    """Server process plus helpers to talk to its control API."""

    def __init__(self, workdir, spec_path, verbose):
        self.ready = os.path.join(workdir, "ready.json")
        cmd = [sys.executable, os.path.join(HERE, "hubserver.py"), "--repos", spec_path,
               "--ready-file", self.ready, "--page-size", str(PAGE_SIZE), "--cdn-alias", "127.0.0.2"]
        if verbose:
            cmd.append("--verbose")
        self.proc = subprocess.Popen(cmd, stderr=None if verbose else subprocess.DEVNULL)
        deadline = time.time() + 60
        while not os.path.exists(self.ready):
            if self.proc.poll() is not None or time.time() > deadline:
                raise RuntimeError("hubserver did not become ready")
            time.sleep(0.05)
        with open(self.ready) as f:
            info = json.load(f)
        self.url, self.cdn, self.cdn_alias = info["hub"], info["cdn"], info.get("cdn_alias")
        expect(info["pid"] == self.proc.pid, "ready file pid mismatch")
        self.info = self.control("GET", "info")

    def control(self, method, route, body=None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(f"{self.url}/_control/{route}", data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return json.loads(r.read())
        except urllib.error.HTTPError as e:
            return {"http_error": e.code, "body": e.read().decode()}

    def fault(self, **rule):
        out = self.control("POST", "faults", [rule])
        expect("added" in out, f"fault rejected: {out}")

    def reset(self):
        self.control("POST", "reset")

    def log(self, server=None):
        return [e for e in self.control("GET", "log") if server is None or e["server"] == server]

    def file(self, repo, path):
        return self.info["repos"][repo]["files"][path]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                return self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                return None
        return self.proc.returncode


def curl(*args, timeout=30):
    """(exit code, stdout bytes, headers text) of one curl call."""
    with tempfile.NamedTemporaryFile(delete=False) as hf:
        header_file = hf.name
    try:
        p = subprocess.run(["curl", "-sS", "-D", header_file, *args], capture_output=True, timeout=timeout)
        with open(header_file, "rb") as f:
            headers = f.read().decode("latin-1")
        return p.returncode, p.stdout, headers
    finally:
        os.unlink(header_file)


def last_status(headers):
    lines = [line for line in headers.splitlines() if line.startswith("HTTP/")]
    return int(lines[-1].split()[1]) if lines else None


def header(headers, name):
    """Value of `name` in the last response block of a -D dump."""
    block = headers.strip().split("\r\n\r\n")[-1]
    for line in block.splitlines():
        k, _, v = line.partition(":")
        if k.strip().lower() == name.lower():
            return v.strip()
    return None


def expected_bytes(spec, repo, path, start=0, end=None):
    f = spec["repos"][repo]["files"][path]
    if "text" in f:
        data = f["text"].encode()
        return data[start:end]
    c = hubserver.Content(f["size"], seed=f["seed"])
    return c.read(start, f["size"] if end is None else min(end, f["size"]))


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--keep", action="store_true", help="keep the temp dir")
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args(argv)
    if shutil.which("curl") is None:
        print("selfcheck: curl not found")
        return 1

    work = tempfile.mkdtemp(prefix="vireo-hub-selfcheck-")
    spec = specs.make_spec()
    spec["repos"]["selfcheck/big"] = {"files": {"big.safetensors": {"size": 12 << 20, "seed": 12}}}
    spec = specs.add_hashes(spec)
    spec_path = os.path.join(work, "spec.json")
    with open(spec_path, "w") as f:
        json.dump(spec, f)
    hub = Hub(work, spec_path, args.verbose)
    cache = os.path.join(work, "hf-cache")

    # huggingface_hub reads its configuration once at import time.
    for var in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_HUB_OFFLINE", "HF_HUB_DISABLE_IMPLICIT_TOKEN"):
        os.environ.pop(var, None)
    os.environ.update({
        "HF_ENDPOINT": hub.url, "HF_HOME": os.path.join(work, "hf-home"), "HF_HUB_CACHE": cache,
        "HF_HUB_DISABLE_XET": "1", "HF_HUB_ETAG_TIMEOUT": "5", "HF_HUB_DOWNLOAD_TIMEOUT": "5",
        "HF_HUB_DISABLE_TELEMETRY": "1", "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    })
    import huggingface_hub as hfh
    from huggingface_hub import HfApi, hf_hub_download, snapshot_download
    from huggingface_hub.errors import (EntryNotFoundError, GatedRepoError, HfHubHTTPError,
                                        RepositoryNotFoundError, RevisionNotFoundError)

    api = HfApi(endpoint=hub.url)
    ck = Checker(args.verbose)
    plain = hub.info["repos"]["tiny/plain"]
    commit = plain["commit"]
    folder = os.path.join(cache, "models--tiny--plain")
    large = hub.file("tiny/plain", "large.safetensors")
    cdn_large = None

    def resolve(repo, path, rev="main"):
        return f"{hub.url}/{repo}/resolve/{rev}/{path}"

    # ------------------------------------------------------------------ huggingface_hub

    def info_matches_spec():
        for repo_id, r in spec["repos"].items():
            for path, f in r["files"].items():
                got = hub.info["repos"][repo_id]["files"][path]
                expect(got["sha256"] == f["sha256"], f"{repo_id}/{path} sha256")
                expect(got["etag"] == (got["sha256"] if got["lfs"] else got["oid"]), f"{repo_id}/{path} etag")

    def download_lfs():
        hub.reset()
        p = hf_hub_download("tiny/plain", "large.safetensors", token=GOOD)
        expect(sha256_file(p) == large["sha256"], "content sha256")
        blob = os.path.join(folder, "blobs", large["sha256"])
        expect(os.path.realpath(p) == os.path.realpath(blob), f"snapshot link -> {os.path.realpath(p)}")
        expect(os.path.islink(os.path.join(folder, "snapshots", commit, "large.safetensors")), "symlink")
        expect(open(os.path.join(folder, "refs", "main")).read() == commit, "refs/main")
        log = hub.log()
        heads = [e for e in log if e["server"] == "hub" and e["method"] == "HEAD"]
        gets = [e for e in log if e["server"] == "cdn" and e["method"] == "GET"]
        expect(heads and heads[0]["status"] == 302 and heads[0]["authorization"], f"hub HEAD: {heads}")
        expect(len(gets) == 1 and gets[0]["status"] == 200, f"cdn GET: {gets}")
        expect(not gets[0]["authorization"], "Authorization leaked to the CDN")
        expect(gets[0]["bytes_sent"] == large["size"], "bytes_sent")

    def download_text():
        p = hf_hub_download("tiny/plain", "README.md")
        readme = hub.file("tiny/plain", "README.md")
        expect(os.path.basename(os.path.realpath(p)) == readme["oid"], "blob named by git oid")
        expect(open(p, "rb").read() == expected_bytes(spec, "tiny/plain", "README.md"), "content")

    def snapshot():
        hub.reset()
        d = snapshot_download("tiny/plain")
        expect(os.path.basename(d) == commit, "snapshot dir is the commit")
        for path, f in plain["files"].items():
            expect(sha256_file(os.path.join(d, path)) == f["sha256"], f"{path} sha256")
        trees = [e for e in hub.log() if "/tree/" in e["path"]]
        expect(trees and "recursive=" in trees[0]["path"], f"tree call {trees}")

    def snapshot_ltx2():
        ltx = hub.info["repos"]["Lightricks/LTX-2"]
        d = snapshot_download("Lightricks/LTX-2", max_workers=8)
        for path, f in ltx["files"].items():
            expect(sha256_file(os.path.join(d, path)) == f["sha256"], f"{path} sha256")

    def tree_pages():
        hub.reset()
        ltx = hub.info["repos"]["Lightricks/LTX-2"]
        entries = list(api.list_repo_tree("Lightricks/LTX-2", recursive=True))
        files = [e for e in entries if isinstance(e, hfh.hf_api.RepoFile)]
        folders = [e for e in entries if isinstance(e, hfh.hf_api.RepoFolder)]
        expect(len(files) == len(ltx["files"]), f"{len(files)} files, want {len(ltx['files'])}")
        expect({f.path for f in folders} >= {"transformer", "text_encoder", "tokenizer", "vae"}, "folders")
        for f in files:
            want = ltx["files"][f.path]
            expect(f.size == want["size"] and f.blob_id == want["oid"], f"{f.path} size/oid")
            expect((f.lfs.sha256 if f.lfs else None) == (want["sha256"] if want["lfs"] else None), f"{f.path} lfs")
        pages = [e for e in hub.log() if "/tree/" in e["path"]]
        want_pages = math.ceil(len(entries) / PAGE_SIZE)
        expect(len(pages) == want_pages and want_pages > 3, f"{len(pages)} pages, want {want_pages}")
        expect(all("cursor=" in e["path"] for e in pages[1:]), "cursor on later pages")

    def tree_non_recursive():
        top = {e.path for e in api.list_repo_tree("Lightricks/LTX-2")}
        expect("transformer" in top and "model_index.json" in top, "top level")
        expect(not any("/" in p for p in top), f"nested paths in a flat listing: {top}")
        sub = {e.path for e in api.list_repo_tree("Lightricks/LTX-2", path_in_repo="transformer")}
        expect("transformer/config.json" in sub and len(sub) == 10, f"transformer/: {sorted(sub)}")
        try:
            list(api.list_repo_tree("Lightricks/LTX-2", path_in_repo="nope"))
            raise AssertionError("missing folder listed")
        except EntryNotFoundError:
            pass

    def model_info_blobs():
        mi = api.model_info("Lightricks/LTX-2", files_metadata=True)
        ltx = hub.info["repos"]["Lightricks/LTX-2"]
        expect(mi.sha == ltx["commit"], "sha")
        expect(len(mi.siblings) == len(ltx["files"]), "siblings")
        for s in mi.siblings:
            want = ltx["files"][s.rfilename]
            expect(s.size == want["size"] and s.blob_id == want["oid"], f"{s.rfilename}")
            expect((s.lfs.sha256 if s.lfs else None) == (want["sha256"] if want["lfs"] else None), s.rfilename)
        plain_info = api.model_info("tiny/plain")
        expect(plain_info.siblings[0].size is None, "no sizes without blobs=true")
        gated = api.model_info("gated/model")  # metadata of a gated repo is public
        expect(gated.gated == "manual", f"gated={gated.gated}")

    def gated_no_token():
        try:
            hf_hub_download("gated/model", "model.safetensors", token=False)
            raise AssertionError("downloaded without a token")
        except GatedRepoError as e:
            expect(e.response.status_code == 401, f"status {e.response.status_code}")

    def gated_wrong_token():
        try:
            hf_hub_download("gated/model", "model.safetensors", token=OTHER)
            raise AssertionError("downloaded with a token that has no access")
        except GatedRepoError as e:
            expect(e.response.status_code == 403, f"status {e.response.status_code}")
            expect("not in the authorized list" in e.response.headers["X-Error-Message"], "message")

    def gated_good_token():
        hub.reset()
        p = hf_hub_download("gated/model", "model.safetensors", token=GOOD)
        expect(sha256_file(p) == hub.file("gated/model", "model.safetensors")["sha256"], "sha256")
        expect(not any(e["authorization"] for e in hub.log("cdn")), "Authorization leaked to the CDN")

    def missing_file():
        try:
            hf_hub_download("tiny/plain", "nope.bin")
            raise AssertionError("no error")
        except EntryNotFoundError:
            pass
        expect(os.path.exists(os.path.join(folder, ".no_exist", commit, "nope.bin")), ".no_exist marker")

    def unknown_repo():
        for token in (False, GOOD):
            try:
                hf_hub_download("nobody/nothing", "x.bin", token=token)
                raise AssertionError("no error")
            except RepositoryNotFoundError:
                pass

    def unknown_revision():
        try:
            hf_hub_download("tiny/plain", "README.md", revision="no-such-branch")
            raise AssertionError("no error")
        except RevisionNotFoundError:
            pass
        try:
            api.model_info("tiny/plain", revision="0" * 40)
            raise AssertionError("no error")
        except RevisionNotFoundError:
            pass

    def private_repo():
        try:
            api.model_info("tiny/private", token=False)
            raise AssertionError("private repo visible anonymously")
        except RepositoryNotFoundError:
            pass
        try:
            hf_hub_download("tiny/private", "config.json", token=OTHER)
            raise AssertionError("private repo visible to a stranger")
        except RepositoryNotFoundError as e:
            expect(e.response.status_code == 404, "404 when signed in")
        p = hf_hub_download("tiny/private", "weights.safetensors", token=GOOD)
        expect(sha256_file(p) == hub.file("tiny/private", "weights.safetensors")["sha256"], "sha256")

    def invalid_token():
        try:
            api.model_info("tiny/plain", token="hf_notarealtoken0000000000000000000")
            raise AssertionError("no error")
        except RepositoryNotFoundError:
            raise AssertionError("bad token mapped to RepositoryNotFound")
        except HfHubHTTPError as e:
            expect(e.response.status_code == 401, "401")

    def pr_revision():
        hub.reset()
        p = hf_hub_download("tiny/plain", "config.json", revision="refs/pr/1")
        expect(open(p, "rb").read() == expected_bytes(spec, "tiny/plain", "config.json"), "content")
        expect(any("/resolve/refs%2Fpr%2F1/" in e["path"] for e in hub.log()), f"revision percent-encoded: {[e['path'] for e in hub.log()]}")
        refs = api.list_repo_refs("tiny/plain", include_pull_requests=True)
        expect([b.name for b in refs.branches] == ["main"], f"branches {refs.branches}")
        expect([r.ref for r in refs.pull_requests] == ["refs/pr/1"], f"prs {refs.pull_requests}")

    def paths_info():
        got = api.get_paths_info("Lightricks/LTX-2", ["vae", "vae/config.json", "missing.bin"])
        expect(sorted(type(x).__name__ for x in got) == ["RepoFile", "RepoFolder"], f"{got}")

    def resume_after_truncate():
        # huggingface_hub reads the body in 10 MiB chunks and only counts whole
        # chunks as written, so a cut below 10 MiB restarts from 0 (no Range);
        # cut the 12 MiB file after 10.5 MiB to see a real ranged resume.
        hub.reset()
        big = hub.file("selfcheck/big", "big.safetensors")
        hub.fault(match=r"^/blobs/", server="cdn", method="GET", times=1,
                  action={"kind": "truncate", "after_bytes": 10_500_000})
        p = hf_hub_download("selfcheck/big", "big.safetensors")
        expect(sha256_file(p) == big["sha256"], "sha256 after resume")
        gets = [e for e in hub.log("cdn") if e["method"] == "GET"]
        expect(len(gets) == 2, f"{len(gets)} CDN GETs")
        expect(gets[0]["bytes_sent"] == 10_500_000 and gets[0]["cut"] == "close", f"first {gets[0]}")
        expect(gets[1]["range"] == f"bytes={10 << 20}-" and gets[1]["status"] == 206, f"resume {gets[1]}")

    def restart_after_early_truncate():
        hub.reset()
        hub.fault(match=r"^/blobs/", server="cdn", method="GET", times=1,
                  action={"kind": "truncate", "after_bytes": 1_000_000})
        p = hf_hub_download("tiny/plain", "large.safetensors", force_download=True)
        expect(sha256_file(p) == large["sha256"], "sha256 after restart")
        gets = [e for e in hub.log("cdn") if e["method"] == "GET"]
        expect(len(gets) == 2 and gets[1]["range"] is None and gets[1]["status"] == 200, f"{gets}")

    def retry_on_503():
        hub.reset()
        hub.fault(match=r"/resolve/", server="hub", method="HEAD", times=1, action={"kind": "status", "status": 503})
        # The HEAD is not retried by the client when nothing is cached: with
        # force_download it must surface; the next call succeeds.
        try:
            hf_hub_download("tiny/plain", "small.safetensors", force_download=True, etag_timeout=2)
        except Exception:
            pass
        p = hf_hub_download("tiny/plain", "small.safetensors", force_download=True)
        expect(sha256_file(p) == hub.file("tiny/plain", "small.safetensors")["sha256"], "sha256")
        heads = [e["status"] for e in hub.log("hub") if e["method"] == "HEAD"]
        expect(heads[0] == 503 and 302 in heads[1:], f"HEAD statuses {heads}")

    ck.run("info matches the spec's sha256 values", info_matches_spec)
    ck.run("hf_hub_download LFS file (302 -> CDN, cache layout, no auth leak)", download_lfs)
    ck.run("hf_hub_download non-LFS file (blob named by git oid)", download_text)
    ck.run("snapshot_download tiny/plain", snapshot)
    ck.run("snapshot_download Lightricks/LTX-2 (64 files, 8 workers)", snapshot_ltx2)
    ck.run(f"list_repo_tree recursive across pages (page size {PAGE_SIZE})", tree_pages)
    ck.run("list_repo_tree non-recursive and sub-folder", tree_non_recursive)
    ck.run("model_info(files_metadata=True)", model_info_blobs)
    ck.run("gated repo without token -> GatedRepoError 401", gated_no_token)
    ck.run("gated repo with an unlisted token -> GatedRepoError 403", gated_wrong_token)
    ck.run("gated repo with the good token downloads", gated_good_token)
    ck.run("missing file -> EntryNotFoundError + .no_exist", missing_file)
    ck.run("unknown repo -> RepositoryNotFoundError", unknown_repo)
    ck.run("unknown revision -> RevisionNotFoundError", unknown_revision)
    ck.run("private repo hidden / visible with its token", private_repo)
    ck.run("invalid token -> 401 'Invalid credentials'", invalid_token)
    ck.run("refs/pr/1 revision and list_repo_refs", pr_revision)
    ck.run("get_paths_info", paths_info)
    ck.run("in-process ranged resume after a truncated CDN body (12 MiB file)", resume_after_truncate)
    ck.run("restart from 0 after a cut inside the client's first 10 MiB chunk", restart_after_early_truncate)
    ck.run("injected 503 on the metadata HEAD", retry_on_503)

    # ------------------------------------------------------------------ curl

    def cdn_url_for_large():
        rc, _, h = curl("-I", resolve("tiny/plain", "large.safetensors"))
        return header(h, "Location")

    def curl_range():
        nonlocal cdn_large
        hub.reset()
        rc, out, h = curl("-L", "-r", "0-99", "-H", f"Authorization: Bearer {GOOD}",
                          resolve("tiny/plain", "large.safetensors"))
        expect(rc == 0 and last_status(h) == 206, f"rc {rc} status {last_status(h)}")
        expect(out == expected_bytes(spec, "tiny/plain", "large.safetensors", 0, 100), "bytes 0-99")
        expect(header(h, "Content-Range") == f"bytes 0-99/{large['size']}", "Content-Range")
        cdn = hub.log("cdn")
        expect(len(cdn) == 1 and cdn[0]["range"] == "bytes=0-99", f"{cdn}")
        expect(not cdn[0]["authorization"], "curl forwarded Authorization across ports")
        expect(hub.log("hub")[0]["authorization"], "hub got the token")
        cdn_large = cdn_url_for_large()

    def curl_suffix_and_open_ranges():
        size = large["size"]
        rc, out, h = curl("-r", "-100", cdn_large)
        expect(out == expected_bytes(spec, "tiny/plain", "large.safetensors", size - 100), "suffix range")
        rc, out, h = curl("-r", f"{size - 10}-", cdn_large)
        expect(header(h, "Content-Range") == f"bytes {size - 10}-{size - 1}/{size}" and len(out) == 10, "open range")
        rc, out, h = curl("-r", f"{size}-", cdn_large)
        expect(last_status(h) == 416 and header(h, "Content-Range") == f"bytes */{size}", f"416 {h}")
        rc, out, h = curl("-r", "2-5", resolve("tiny/plain", "README.md"))
        expect(last_status(h) == 206 and out == expected_bytes(spec, "tiny/plain", "README.md", 2, 6), "non-LFS range")
        rc, out, h = curl("-I", cdn_large)
        expect(last_status(h) == 200 and header(h, "Content-Length") == str(size), "CDN HEAD")

    def curl_if_range():
        rc, out, h = curl("-r", "0-9", "-H", 'If-Range: "0000"', cdn_large)
        expect(last_status(h) == 200 and len(out) == large["size"], "stale If-Range -> 200 full")
        rc, out, h = curl("-r", "0-9", "-H", f'If-Range: "{large["sha256"]}"', cdn_large)
        expect(last_status(h) == 206 and len(out) == 10, "matching If-Range -> 206")

    def curl_bad_signature():
        tampered = cdn_large.replace("sig=", "sig=00")
        rc, out, h = curl(tampered)
        expect(last_status(h) == 403, "tampered signature")

    def fault_status_once():
        hub.reset()
        hub.fault(match=r"README\.md", server="hub", times=1, action={"kind": "status", "status": 502})
        _, _, h1 = curl(resolve("tiny/plain", "README.md"))
        _, _, h2 = curl(resolve("tiny/plain", "README.md"))
        expect(last_status(h1) == 502 and last_status(h2) == 200, f"{last_status(h1)} {last_status(h2)}")
        expect(hub.control("GET", "faults") == [], "rule expired")

    def fault_retry_after():
        hub.reset()
        hub.fault(match=r"/api/models/", action={"kind": "retry_after", "status": 429, "seconds": 2})
        _, _, h = curl(f"{hub.url}/api/models/tiny/plain")
        expect(last_status(h) == 429 and header(h, "Retry-After") == "2", f"{h}")

    def fault_drop():
        hub.reset()
        hub.fault(match=r"^/blobs/", server="cdn", action={"kind": "drop", "after_bytes": 1000})
        rc, out, _ = curl(cdn_large)
        expect(rc != 0 and len(out) <= 1000, f"rc {rc}, {len(out)} bytes")
        e = hub.log("cdn")[0]
        expect(e["bytes_sent"] == 1000 and e["cut"] == "reset", f"{e}")

    def fault_truncate():
        hub.reset()
        hub.fault(match=r"^/blobs/", server="cdn", action={"kind": "truncate", "after_bytes": 1000})
        rc, out, h = curl(cdn_large)
        expect(rc == 18 and len(out) == 1000, f"rc {rc}, {len(out)} bytes")
        expect(header(h, "Content-Length") == str(large["size"]), "full Content-Length announced")

    def fault_corrupt():
        hub.reset()
        hub.fault(match=r"^/blobs/", server="cdn", times=2, action={"kind": "corrupt", "offset": 150})
        want = expected_bytes(spec, "tiny/plain", "large.safetensors", 100, 200)
        _, out, _ = curl("-r", "100-199", cdn_large)
        diff = [i for i in range(100) if out[i] != want[i]]
        expect(diff == [50] and out[50] == want[50] ^ 0xFF, f"diff at {diff}")
        _, out, _ = curl("-r", "200-299", cdn_large)
        expect(out == expected_bytes(spec, "tiny/plain", "large.safetensors", 200, 300), "outside the range")

    def fault_stall():
        hub.reset()
        hub.fault(match=r"^/blobs/", server="cdn", action={"kind": "stall", "after_bytes": 10, "seconds": 30})
        t0 = time.time()
        rc, out, _ = curl("--max-time", "1", cdn_large)
        expect(rc == 28 and len(out) == 10, f"rc {rc}, {len(out)} bytes")
        # The log entry exists from the request's start; "aborted" is known once it is done.
        deadline = time.time() + 5
        while time.time() < deadline and not (hub.log("cdn") and hub.log("cdn")[0]["done"]):
            time.sleep(0.05)
        e = hub.log("cdn")
        expect(e and e[0]["aborted"] and e[0]["bytes_sent"] == 10, f"{e}")
        expect(time.time() - t0 < 6, "stall did not notice the client leaving")

    def fault_stall_resumes():
        hub.reset()
        hub.fault(match=r"^/blobs/", server="cdn", action={"kind": "stall", "after_bytes": 10, "seconds": 0.5})
        t0 = time.time()
        rc, out, _ = curl("-r", "0-999", cdn_large)
        expect(rc == 0 and out == expected_bytes(spec, "tiny/plain", "large.safetensors", 0, 1000), "content")
        expect(time.time() - t0 >= 0.5, "no stall")

    def fault_slow():
        hub.reset()
        hub.fault(match=r"^/blobs/", server="cdn", action={"kind": "slow", "bytes_per_second": 200_000})
        t0 = time.time()
        rc, out, _ = curl("-r", "0-99999", cdn_large)
        took = time.time() - t0
        expect(rc == 0 and len(out) == 100_000, f"rc {rc}")
        expect(0.4 <= took < 5, f"took {took:.2f}s")

    def fault_expire_hub():
        hub.reset()
        hub.fault(match=r"large\.safetensors", server="hub", action={"kind": "expire"})
        rc, out, h = curl("-L", resolve("tiny/plain", "large.safetensors"))
        expect(last_status(h) == 403 and out == b"Request has expired", f"{last_status(h)} {out[:60]}")
        rc, out, h = curl("-L", "-r", "0-9", resolve("tiny/plain", "large.safetensors"))
        expect(last_status(h) == 206, "fresh URL after the rule expired")

    def fault_expire_cdn():
        hub.reset()
        hub.fault(match=r"^/blobs/", server="cdn", action={"kind": "expire"})
        _, out, h = curl(cdn_large)
        expect(last_status(h) == 403 and out == b"Request has expired", f"{last_status(h)}")

    def fault_416():
        hub.reset()
        hub.fault(match=r"^/blobs/", server="cdn", action={"kind": "range_not_satisfiable"})
        _, _, h = curl("-r", "0-9", cdn_large)
        expect(last_status(h) == 416 and header(h, "Content-Range") == f"bytes */{large['size']}", f"{h}")

    def fault_header():
        hub.reset()
        hub.fault(match=r"large\.safetensors", server="hub", method="HEAD",
                  action={"kind": "header", "name": "X-Linked-Size", "value": "99999999999999999999"})
        _, _, h = curl("-I", resolve("tiny/plain", "large.safetensors"))
        expect(header(h, "X-Linked-Size") == "99999999999999999999", f"{h}")
        hub.reset()
        hub.fault(match=r"/tree/", server="hub", action={"kind": "header", "name": "Link", "value": '<{self}>; rel="next"'})
        _, _, h = curl(f"{hub.url}/api/models/tiny/plain/tree/main?recursive=true")
        expect(header(h, "Link") == f'<{hub.url}/api/models/tiny/plain/tree/main?recursive=true>; rel="next"', f"{h}")

    def fault_body():
        hub.reset()
        hub.fault(match=r"/tree/", server="hub", action={"kind": "body", "hex": "5b7b2270617468223a2261ff227d5d"})
        rc, out, h = curl(f"{hub.url}/api/models/tiny/plain/tree/main")
        expect(out == bytes.fromhex("5b7b2270617468223a2261ff227d5d") and header(h, "Content-Length") == str(len(out)), f"{out}")
        hub.reset()
        hub.fault(match=r"/revision/", server="hub", action={"kind": "body", "text": '{"sha": 5}'})
        _, out, _ = curl(f"{hub.url}/api/models/tiny/plain/revision/main")
        expect(out == b'{"sha": 5}', f"{out}")

    def fault_redirect():
        hub.reset()
        hub.fault(match=r"large\.safetensors", server="hub", times=1, action={"kind": "redirect", "to": "gopher://example.invalid/x"})
        _, _, h = curl("-I", resolve("tiny/plain", "large.safetensors"))
        expect(last_status(h) == 302 and header(h, "Location") == "gopher://example.invalid/x", f"{h}")
        expect(header(h, "X-Linked-Size") == str(large["size"]), "X-Linked-Size kept")
        expect(hub.cdn_alias and hub.cdn_alias.startswith("http://127.0.0.2:"), f"alias {hub.cdn_alias}")
        hub.fault(match=r"large\.safetensors", server="hub", action={"kind": "redirect", "to": "{cdn_alias}{signed}"})
        rc, out, h = curl("-L", "-r", "0-9", resolve("tiny/plain", "large.safetensors"))
        expect(rc == 0 and last_status(h) == 206 and out == expected_bytes(spec, "tiny/plain", "large.safetensors", 0, 10),
               "the alias serves the CDN")

    def fault_ignore_range():
        hub.reset()
        hub.fault(match=r"^/blobs/", server="cdn", action={"kind": "ignore_range"})
        _, out, h = curl("-r", "100-199", cdn_large)
        expect(last_status(h) == 200 and len(out) == large["size"], f"{last_status(h)} {len(out)}")

    def control_api():
        hub.reset()
        bad = hub.control("POST", "faults", [{"match": "x", "action": {"kind": "explode"}}])
        expect(bad.get("http_error") == 400, f"bad rule accepted: {bad}")
        hub.fault(match=r"config\.json", times=-1, action={"kind": "status", "status": 500})
        for _ in range(3):
            _, _, h = curl(resolve("tiny/plain", "config.json"))
            expect(last_status(h) == 500, "unlimited rule")
        expect(len(hub.control("GET", "faults")) == 1, "unlimited rule kept")
        hub.control("DELETE", "faults")
        _, _, h = curl(resolve("tiny/plain", "config.json"))
        expect(last_status(h) == 200, "rules cleared")
        expect(len(hub.log()) == 4 and not any("/_control/" in e["path"] for e in hub.log()), "log")
        hub.control("DELETE", "log")
        expect(hub.log() == [], "log cleared")

    ck.run("curl -L -r 0-99 (206, Content-Range, no Authorization on the CDN)", curl_range)
    ck.run("suffix / open / unsatisfiable ranges, non-LFS range, CDN HEAD", curl_suffix_and_open_ranges)
    ck.run("If-Range", curl_if_range)
    ck.run("tampered CDN signature -> 403", curl_bad_signature)
    ck.run("fault status (times=1)", fault_status_once)
    ck.run("fault retry_after", fault_retry_after)
    ck.run("fault drop (RST after N bytes)", fault_drop)
    ck.run("fault truncate (short body, clean close)", fault_truncate)
    ck.run("fault corrupt (absolute offset)", fault_corrupt)
    ck.run("fault stall ends when the client leaves", fault_stall)
    ck.run("fault stall then continue", fault_stall_resumes)
    ck.run("fault slow", fault_slow)
    ck.run("fault expire on the hub (expired signed URL)", fault_expire_hub)
    ck.run("fault expire on the CDN", fault_expire_cdn)
    ck.run("fault range_not_satisfiable", fault_416)
    ck.run("fault header (absurd size, self-referencing Link)", fault_header)
    ck.run("fault body (raw bytes, wrong JSON types)", fault_body)
    ck.run("fault redirect (other scheme, the CDN on another loopback address)", fault_redirect)
    ck.run("fault ignore_range (200 for a range)", fault_ignore_range)
    ck.run("control API: validation, unlimited rules, clearing, log", control_api)

    def clean_shutdown():
        rc = hub.stop()
        expect(rc == 0, f"exit code {rc}")
        expect(not os.path.exists(hub.ready), "ready file left behind")

    ck.run("SIGTERM -> exit 0, ready file removed", clean_shutdown)
    hub.stop()
    if args.keep:
        print(f"kept {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{ck.passed} passed, {ck.failed} failed")
    return 1 if ck.failed else 0


if __name__ == "__main__":
    sys.exit(main())
