#!/usr/bin/env python3
"""Local Hugging Face Hub stand-in for downloader integration tests.

Usage:
  hubserver.py --repos SPEC.json --ready-file PATH [--port 0] [--cdn-port 0]
               [--page-size 50] [--token-file PATH] [--url-lifetime 3600]
               [--cdn-name 127.0.0.1] [--verbose]

Two servers listen on 127.0.0.1: the Hub (API, /resolve, /_control) and a
"CDN" on another port that serves LFS blobs behind signed, expiring URLs. The
port differs so that a redirect Hub -> CDN crosses origins, which is what makes
clients drop the Authorization header; the CDN records whether one arrived.

When both listen, the ready file receives (atomically)
  {"hub": "http://127.0.0.1:P1", "cdn": "http://127.0.0.1:P2", "pid": N}
and is removed again on a clean exit (SIGTERM / SIGINT).

File content is generated, never stored: a file {"size": N, "seed": S} is the
first N bytes of the concatenation of blocks
  block[k] = SHAKE-256(b"vireo-hub-content-v1\\0" || le64(S) || le64(k)).digest(1 MiB)
so any byte range can be produced without generating what precedes it, and a
C++ test could regenerate it with OpenSSL's EVP_shake256 if it ever needs to.
{"text": "..."} files are their UTF-8 text. GET /_control/info lists every
file's sha256 and git oid, so tests need not hash anything themselves.

See tests/hub/README.md for the spec format and the control API.
"""

import argparse
import base64
import hashlib
import hmac
import json
import os
import re
import secrets
import select
import signal
import socket
import struct
import sys
import threading
import time
from collections import OrderedDict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, quote, unquote, urlencode, urlsplit

BLOCK_SIZE = 1 << 20
CONTENT_DOMAIN = b"vireo-hub-content-v1\0"
SEND_CHUNK = 256 * 1024
LFS_POINTER_TEMPLATE = "version https://git-lfs.github.com/spec/v1\noid sha256:{sha}\nsize {size}\n"

# Messages the real Hub sends; huggingface_hub and our C++ client key some
# behaviour on them (e.g. the exact "Invalid credentials" text), so keep them verbatim.
MSG_INVALID_CREDENTIALS = "Invalid credentials in Authorization header"
MSG_REPO_NOT_FOUND = "Repository not found"
MSG_ENTRY_NOT_FOUND = "Entry not found"
MSG_GATED_NO_AUTH = ("Access to model {repo} is restricted. You must have access to it and be "
                     "authenticated to access it. Please log in.")
MSG_GATED_NOT_ALLOWED = ("Access to model {repo} is restricted and you are not in the authorized list. "
                         "Visit https://huggingface.co/{repo} to ask for access.")
MSG_EXPIRED = "Request has expired"

FAULT_KINDS = {"status", "retry_after", "drop", "truncate", "corrupt", "stall", "expire",
               "range_not_satisfiable", "slow", "header", "body", "redirect", "ignore_range"}
API_KEYWORDS = {"revision", "tree", "refs", "paths-info"}
COMMIT_RE = re.compile(r"^[0-9a-f]{40}$")


class SpecError(Exception):
    pass


# ----------------------------------------------------------------------------- content

class BlockCache:
    """Small LRU of generated 1 MiB blocks: ranged re-reads (resume, chunked
    downloads, several clients) would otherwise regenerate the same blocks."""

    def __init__(self, capacity_blocks=96):
        self._capacity = capacity_blocks
        self._blocks = OrderedDict()
        self._lock = threading.Lock()

    def get(self, seed, index):
        key = (seed, index)
        with self._lock:
            data = self._blocks.get(key)
            if data is not None:
                self._blocks.move_to_end(key)
                return data
        data = hashlib.shake_256(CONTENT_DOMAIN + struct.pack("<QQ", seed, index)).digest(BLOCK_SIZE)
        with self._lock:
            self._blocks[key] = data
            while len(self._blocks) > self._capacity:
                self._blocks.popitem(last=False)
        return data


BLOCKS = BlockCache()


class Content:
    def __init__(self, size, seed=None, data=None):
        self.size = size
        self.seed = seed
        self.data = data

    def iter_range(self, start, end):
        """Bytes [start, end) as a sequence of pieces."""
        if self.data is not None:
            for pos in range(start, end, SEND_CHUNK):
                yield self.data[pos:min(end, pos + SEND_CHUNK)]
            return
        pos = start
        while pos < end:
            index, offset = divmod(pos, BLOCK_SIZE)
            block = BLOCKS.get(self.seed, index)
            take = min(end - pos, BLOCK_SIZE - offset)
            yield block[offset:offset + take]
            pos += take

    def read(self, start, end):
        return b"".join(self.iter_range(start, end))


def git_blob_oid(data):
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class FileEntry:
    def __init__(self, path, content, lfs, is_text):
        self.path = path
        self.content = content
        self.size = content.size
        self.lfs = lfs
        self.is_text = is_text
        self.sha256 = None
        self.oid = None          # git blob id: of the content, or of the LFS pointer for LFS files
        self.pointer_size = None

    def finish_hashes(self, sha256, git_oid_of_content):
        self.sha256 = sha256
        if self.lfs:
            pointer = LFS_POINTER_TEMPLATE.format(sha=sha256, size=self.size).encode()
            self.pointer_size = len(pointer)
            self.oid = git_blob_oid(pointer)
        else:
            self.oid = git_oid_of_content

    @property
    def etag(self):
        return self.sha256 if self.lfs else self.oid


class Repo:
    def __init__(self, repo_id, commit, branches, gated, private, allowed_tokens, files):
        self.repo_id = repo_id
        self.commit = commit
        self.branches = branches
        self.gated = gated
        self.private = private
        self.allowed_tokens = allowed_tokens
        self.files = files
        self.dirs = set()
        for path in files:
            parts = path.split("/")[:-1]
            for i in range(1, len(parts) + 1):
                if parts[i - 1]:  # "/abs.txt" (hostile specs) has no real parent folder
                    self.dirs.add("/".join(parts[:i]))
        self.dir_oids = {}

    def resolve_revision(self, rev):
        if rev == self.commit or rev in self.branches:
            return self.commit
        return None

    def may_read(self, token, token_valid):
        """Gate decision for file content: gated "auto" admits any valid token
        (the Hub auto-approves), "manual" only the listed ones."""
        if not self.gated:
            return True
        if token in self.allowed_tokens:
            return True
        return self.gated == "auto" and token_valid

    def compute_dir_oids(self):
        for d in self.dirs:
            prefix = d + "/"
            lines = sorted(f"{p} {e.oid}" for p, e in self.files.items() if p.startswith(prefix))
            self.dir_oids[d] = hashlib.sha1(("tree\0" + "\n".join(lines)).encode()).hexdigest()

    def tree_entries(self, base, recursive):
        """Entries below `base` ("" = root), sorted by path; None if `base` is no directory."""
        if base and base not in self.dirs:
            return None
        prefix = base + "/" if base else ""
        out = []
        for d in self.dirs:
            if d.startswith(prefix) and (recursive or "/" not in d[len(prefix):]):
                out.append({"type": "directory", "oid": self.dir_oids[d], "size": 0, "path": d})
        for p, e in self.files.items():
            if p.startswith(prefix) and (recursive or "/" not in p[len(prefix):]):
                out.append(file_tree_entry(e))
        out.sort(key=lambda x: x["path"])
        return out


def file_tree_entry(e):
    entry = {"type": "file", "oid": e.oid, "size": e.size, "path": e.path}
    if e.lfs:
        entry["lfs"] = {"oid": e.sha256, "size": e.size, "pointerSize": e.pointer_size}
    return entry


def load_spec(path, token_file=None):
    with open(path, "r", encoding="utf-8") as f:
        spec = json.load(f)
    if not isinstance(spec, dict) or not isinstance(spec.get("repos"), dict):
        raise SpecError("spec must be an object with a 'repos' object")
    tokens = set(spec.get("tokens", []))
    extra_grants = {}
    if token_file:
        with open(token_file, "r", encoding="utf-8") as f:
            for line in f:
                words = line.split("#", 1)[0].split()
                if words:
                    tokens.add(words[0])
                    for repo_id in words[1:]:
                        extra_grants.setdefault(repo_id, set()).add(words[0])

    repos = {}
    for repo_id, r in spec["repos"].items():
        if not isinstance(r, dict) or not isinstance(r.get("files"), dict):
            raise SpecError(f"{repo_id}: needs a 'files' object")
        commit = r.get("commit") or hashlib.sha1(f"vireo-test-commit:{repo_id}".encode()).hexdigest()
        if not COMMIT_RE.match(commit):
            raise SpecError(f"{repo_id}: commit must be 40 lower-case hex digits")
        gated = r.get("gated", False)
        if gated not in (False, "auto", "manual"):
            raise SpecError(f"{repo_id}: gated must be false, 'auto' or 'manual'")
        allowed = set(r.get("allowed_tokens", [])) | extra_grants.get(repo_id, set())
        tokens |= allowed
        files = {}
        for p, fs in r["files"].items():
            if not p:
                raise SpecError(f"{repo_id}: empty file path")
            if "text" in fs:
                data = fs["text"].encode("utf-8")
                content = Content(len(data), data=data)
                files[p] = FileEntry(p, content, bool(fs.get("lfs", False)), True)
            elif "size" in fs:
                size = int(fs["size"])
                seed = fs.get("seed")
                if seed is None:
                    seed = int.from_bytes(hashlib.sha256(f"{repo_id}/{p}".encode()).digest()[:8], "little")
                if size < 0 or not 0 <= int(seed) < 1 << 64:
                    raise SpecError(f"{repo_id}/{p}: size must be >= 0 and seed in [0, 2^64)")
                files[p] = FileEntry(p, Content(size, seed=int(seed)), bool(fs.get("lfs", True)), False)
            elif "path" in fs:
                # A real file (a fixture model's weights), served byte for byte.
                with open(fs["path"], "rb") as src:
                    data = src.read()
                files[p] = FileEntry(p, Content(len(data), data=data), bool(fs.get("lfs", True)), False)
            else:
                raise SpecError(f"{repo_id}/{p}: needs 'text', 'size' or 'path'")
            files[p].expected_sha256 = fs.get("sha256")
        repos[repo_id] = Repo(repo_id, commit, set(r.get("branches", ["main"])), gated,
                              bool(r.get("private", False)), allowed, files)
    return repos, tokens


def hash_all(repos):
    """Hashes every file once; identical (seed, size) pairs (mirrors) share the work."""
    memo = {}
    for repo in repos.values():
        for e in repo.files.values():
            c = e.content
            key = ("t", c.data) if c.data is not None else ("s", c.seed, c.size)
            if key not in memo:
                sha = hashlib.sha256()
                git = hashlib.sha1(b"blob %d\0" % c.size)
                for piece in c.iter_range(0, c.size):
                    sha.update(piece)
                    git.update(piece)
                memo[key] = (sha.hexdigest(), git.hexdigest())
            e.finish_hashes(*memo[key])
            if e.expected_sha256 and e.expected_sha256 != e.sha256:
                raise SpecError(f"{repo.repo_id}/{e.path}: spec says sha256 {e.expected_sha256}, "
                                f"content hashes to {e.sha256} (generator changed?)")
        repo.compute_dir_oids()


# ----------------------------------------------------------------------------- state

class FaultRule:
    def __init__(self, raw, rule_id):
        if not isinstance(raw, dict):
            raise ValueError("a rule must be an object")
        action = raw.get("action")
        if not isinstance(action, dict) or action.get("kind") not in FAULT_KINDS:
            raise ValueError(f"action.kind must be one of {sorted(FAULT_KINDS)}")
        self.id = rule_id
        self.pattern = raw.get("match", "")
        self.regex = re.compile(self.pattern)
        self.method = str(raw.get("method", "*")).upper()
        self.server = raw.get("server", "*")
        if self.server not in ("hub", "cdn", "*"):
            raise ValueError("server must be 'hub', 'cdn' or '*'")
        times = raw.get("times", 1)
        self.remaining = None if times is None or times < 0 else int(times)
        self.action = action
        kind = action["kind"]
        for key in {"drop": ["after_bytes"], "truncate": ["after_bytes"], "corrupt": ["offset"],
                    "stall": ["after_bytes", "seconds"], "slow": ["bytes_per_second"],
                    "status": ["status"]}.get(kind, []):
            if not isinstance(action.get(key), (int, float)):
                raise ValueError(f"{kind} needs a numeric '{key}'")
        if kind == "slow" and action["bytes_per_second"] <= 0:
            raise ValueError("slow needs bytes_per_second > 0")
        if kind == "header" and not (isinstance(action.get("name"), str) and isinstance(action.get("value"), str)):
            raise ValueError("header needs string 'name' and 'value'")
        if kind == "body" and not (isinstance(action.get("text"), str) or isinstance(action.get("hex"), str)):
            raise ValueError("body needs a string 'text' or 'hex'")
        if kind == "redirect" and not isinstance(action.get("to"), str):
            raise ValueError("redirect needs a string 'to'")

    def matches(self, server, method, path):
        return ((self.server == "*" or self.server == server)
                and (self.method == "*" or self.method == method)
                and self.regex.search(path) is not None)

    def describe(self):
        return {"id": self.id, "match": self.pattern, "method": self.method, "server": self.server,
                "times": -1 if self.remaining is None else self.remaining, "action": self.action}


class HubState:
    def __init__(self, repos, tokens, page_size, url_lifetime, secret):
        self.repos = repos
        self.tokens = tokens
        self.page_size = page_size
        self.url_lifetime = url_lifetime
        self.secret = secret
        self.blobs = {}
        for repo in repos.values():
            for e in repo.files.values():
                if e.lfs:
                    self.blobs[e.sha256] = e
        self.hub_url = None
        self.cdn_url = None
        self.cdn_alias_url = None
        self.lock = threading.Lock()
        self.rules = []
        self.next_rule_id = 1
        self.log = []
        self.next_log_id = 1
        self.stopping = threading.Event()

    def add_rules(self, raws):
        rules = []
        with self.lock:
            for raw in raws:
                rules.append(FaultRule(raw, self.next_rule_id))
                self.next_rule_id += 1
            self.rules.extend(rules)
        return rules

    def take_faults(self, server, method, path):
        """Every live rule that matches fires once for this request, in the order added."""
        fired = []
        with self.lock:
            for rule in self.rules:
                if rule.remaining == 0 or not rule.matches(server, method, path):
                    continue
                if rule.remaining is not None:
                    rule.remaining -= 1
                fired.append(rule.action)
            self.rules = [r for r in self.rules if r.remaining != 0]
        return fired

    def record(self, entry):
        with self.lock:
            entry["id"] = self.next_log_id
            self.next_log_id += 1
            self.log.append(entry)

    def sign(self, sha256, expires):
        return hmac.new(self.secret, f"{sha256}:{expires}".encode(), hashlib.sha256).hexdigest()

    def signed_url(self, sha256, lifetime):
        expires = int(time.time()) + int(lifetime)
        return f"{self.cdn_url}/blobs/{sha256}?{urlencode({'expires': expires, 'sig': self.sign(sha256, expires)})}"

    def expand(self, template, request_url="", signed=""):
        """Placeholders of header, body and redirect faults: {self} (this request's URL),
        {hub}, {cdn}, {cdn_alias} and {signed} (a valid signed CDN path and query)."""
        return (template.replace("{self}", request_url).replace("{hub}", self.hub_url or "")
                .replace("{cdn_alias}", self.cdn_alias_url or "").replace("{cdn}", self.cdn_url or "")
                .replace("{signed}", signed))

    def info(self):
        return {
            "hub": self.hub_url, "cdn": self.cdn_url, "cdn_alias": self.cdn_alias_url,
            "repos": {rid: {
                "commit": r.commit, "branches": sorted(r.branches), "gated": r.gated, "private": r.private,
                "files": {p: {"size": e.size, "lfs": e.lfs, "sha256": e.sha256, "oid": e.oid,
                              "etag": e.etag} for p, e in sorted(r.files.items())},
            } for rid, r in self.repos.items()},
        }


# ----------------------------------------------------------------------------- HTTP

class ClientGone(Exception):
    pass


def parse_range(header, size):
    """None: serve everything (no header, or one we may ignore per RFC 9110);
    "unsatisfiable"; or (first, last) inclusive."""
    if not header:
        return None
    m = re.fullmatch(r"\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*", header)
    if not m or (m.group(1) == "" and m.group(2) == ""):
        return None
    first, last = m.group(1), m.group(2)
    if first == "":
        suffix = int(last)
        if suffix == 0 or size == 0:
            return "unsatisfiable"
        return (max(0, size - suffix), size - 1)
    first = int(first)
    if last != "" and int(last) < first:
        return None
    if first >= size:
        return "unsatisfiable"
    end = size - 1 if last == "" else min(int(last), size - 1)
    return (first, end)


def strip_etag(value):
    value = value.strip()
    if value.startswith("W/"):
        value = value[2:]
    return value.strip('"')


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "VireoTestHub/1.0"
    sys_version = ""
    # Also bounds how long a write to a client that stopped reading can block.
    timeout = 120
    kind = "hub"
    state = None
    verbose = False

    def version_string(self):
        return self.server_version

    def log_message(self, fmt, *args):
        if self.verbose:
            sys.stderr.write(f"[{self.kind}] {self.address_string()} {fmt % args}\n")

    def do_GET(self):
        self._handle("GET")

    def do_HEAD(self):
        self._handle("HEAD")

    def do_POST(self):
        self._handle("POST")

    def do_DELETE(self):
        self._handle("DELETE")

    def do_PUT(self):
        self._handle("PUT")

    # -- request plumbing

    def _handle(self, method):
        self.method = method
        length = int(self.headers.get("Content-Length") or 0)
        self.req_body = self.rfile.read(length) if length > 0 else b""
        split = urlsplit(self.path)
        self.raw_path = split.path
        self.query = parse_qs(split.query, keep_blank_values=True)
        if self.kind == "hub" and self.raw_path.startswith("/_control/"):
            try:
                self._control()
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True
            return

        self.resource_size = None
        self.faults = self.state.take_faults(self.kind, method, self.path)
        # Logged when the request starts and filled in as it goes (every key exists
        # up front): a test that reads the log right after its download finished
        # must not race the handler thread's bookkeeping.
        self.rec = {"server": self.kind, "method": method, "path": self.path,
                    "range": self.headers.get("Range"), "if_range": self.headers.get("If-Range"),
                    "status": None, "bytes_sent": 0,
                    "authorization": self.headers.get("Authorization") is not None,
                    "location": None, "faults": [a["kind"] for a in self.faults], "cut": None,
                    "aborted": False, "done": False, "time": time.time(), "duration": None}
        self.state.record(self.rec)
        try:
            if not self._terminal_fault():
                if self.kind == "hub":
                    self._hub()
                else:
                    self._cdn()
        except (ClientGone, BrokenPipeError, ConnectionResetError, socket.timeout, TimeoutError):
            self.rec["aborted"] = True
            self.close_connection = True
        finally:
            self.rec["duration"] = round(time.time() - self.rec["time"], 4)
            self.rec["done"] = True
            if self.verbose:
                sys.stderr.write(f"[{self.kind}] {method} {self.path} -> {self.rec['status']} "
                                 f"{self.rec['bytes_sent']}B faults={self.rec['faults']}\n")

    def _fault(self, kind):
        for a in self.faults:
            if a["kind"] == kind:
                return a
        return None

    def _terminal_fault(self):
        a = self._fault("status")
        if a:
            status = int(a["status"])
            msg = a.get("message", f"Injected {status}")
            headers = [("X-Error-Message", msg)]
            if a.get("error_code"):
                headers.append(("X-Error-Code", a["error_code"]))
            self._send_json(status, {"error": msg}, headers)
            return True
        a = self._fault("retry_after")
        if a:
            seconds = int(a.get("seconds", 1))
            headers = [("Retry-After", str(seconds)), ("X-Error-Message", "Too many requests")]
            if a.get("ratelimit_header"):
                # IETF RateLimit draft as the Hub sends it; huggingface_hub prefers it over Retry-After.
                headers += [("RateLimit", f'"api";r=0;t={seconds}'),
                            ("RateLimit-Policy", '"fixed window";"api";q=500;w=300')]
            self._send_json(int(a.get("status", 429)), {"error": "Too many requests"}, headers)
            return True
        if self.kind == "cdn" and self._fault("expire"):
            self._send_text(403, MSG_EXPIRED)
            return True
        return False

    # -- response writing

    def _send(self, status, headers, body=b"", content=None, start=0, length=None):
        """Sends a response whose body is `body` bytes or `length` bytes of
        `content` from `start`. Body faults (drop, truncate, stall, slow, corrupt)
        are applied here so they work on every route."""
        if self._fault("range_not_satisfiable") and status < 400:
            total = self.resource_size or 0
            status, headers, body, content = 416, [("Content-Range", f"bytes */{total}")], b"", None
        base = self.state.hub_url if self.kind == "hub" else self.state.cdn_url
        for a in self.faults:
            if a["kind"] == "header":
                # Replaces (or adds) one header: absurd sizes, a wrong Content-Range, a Link loop.
                name = a["name"]
                headers = [(k, v) for k, v in headers if k.lower() != name.lower()]
                headers.append((name, self.state.expand(a["value"], f"{base}{self.path}")))
            elif a["kind"] == "body" and status < 400:
                # Raw bytes ("hex") reach the client as they are: non-UTF-8 names, wrong JSON types.
                body = bytes.fromhex(a["hex"]) if "hex" in a else self.state.expand(a["text"], f"{base}{self.path}").encode()
                content = None
        if content is None:
            length = len(body)
        self.rec["status"] = status
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        if not any(a["kind"] == "header" and a["name"].lower() == "content-length" for a in self.faults):
            self.send_header("Content-Length", str(length))
        if self.state.stopping.is_set():
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        if self.method == "HEAD":
            pieces = iter(())
        elif content is None:
            pieces = iter([body]) if body else iter(())
        else:
            pieces = content.iter_range(start, start + length)
        self._stream(pieces, start if content is not None else 0)

    def _stream(self, pieces, abs_start):
        drop, trunc = self._fault("drop"), self._fault("truncate")
        stall, slow, corrupt = self._fault("stall"), self._fault("slow"), self._fault("corrupt")
        # With both a drop and a truncate, the smaller byte count wins (and decides RST vs FIN).
        cuts = sorted((int(a["after_bytes"]), a is drop) for a in (drop, trunc) if a is not None)
        limit, abrupt = cuts[0] if cuts else (None, False)
        stall_at = int(stall["after_bytes"]) if stall else None
        bps = slow["bytes_per_second"] if slow else None
        corrupt_at = int(corrupt["offset"]) if corrupt else None
        sent = 0
        for piece in pieces:
            if corrupt_at is not None and abs_start + sent <= corrupt_at < abs_start + sent + len(piece):
                i = corrupt_at - abs_start - sent
                piece = piece[:i] + bytes([piece[i] ^ 0xFF]) + piece[i + 1:]
            while piece:
                if stall_at is not None and sent >= stall_at:
                    stall_at = None
                    self._wait(float(stall.get("seconds", 1)))
                if limit is not None and sent >= limit:
                    return self._cut(abrupt)
                n = len(piece)
                if limit is not None:
                    n = min(n, limit - sent)
                if stall_at is not None:
                    n = min(n, stall_at - sent)
                if bps:
                    n = min(n, max(1, int(bps / 20)))
                sent += n
                self.rec["bytes_sent"] = sent  # before the write: the client may look right after
                self.wfile.write(piece[:n])
                piece = piece[n:]
                if bps:
                    self._wait(n / bps, poll=False)
        if stall_at is not None and sent >= stall_at:
            self._wait(float(stall.get("seconds", 1)))
        if limit is not None:
            # A body shorter than after_bytes still ends the way the rule says.
            self._cut(abrupt)

    def _cut(self, abrupt):
        self.close_connection = True
        self.rec["cut"] = "reset" if abrupt else "close"
        if abrupt:
            # SO_LINGER 0 + close sends a RST instead of a FIN: the client sees a
            # reset mid-body, like a dropped connection, not a clean end of stream.
            try:
                self.wfile.flush()
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                self.connection.close()
            except OSError:
                pass

    def _wait(self, seconds, poll=True):
        """Sleeps, but ends early on shutdown and (poll=True) when the client hangs up,
        so a stalled response does not pin a thread after a test cancels."""
        deadline = time.monotonic() + seconds
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            if self.state.stopping.wait(min(left, 0.05)):
                raise ClientGone()
            if poll and self._client_gone():
                raise ClientGone()

    def _client_gone(self):
        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
            if readable:
                return self.connection.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return True
        return False

    def _send_json(self, status, obj, headers=()):
        body = json.dumps(obj, separators=(",", ":")).encode()
        self._send(status, [("Content-Type", "application/json; charset=utf-8"), *headers], body)

    def _send_text(self, status, text, headers=()):
        self._send(status, [("Content-Type", "text/plain; charset=utf-8"), *headers], text.encode())

    def _error(self, status, code, message, headers=()):
        h = [("X-Error-Message", message), *headers]
        if code:
            h.insert(0, ("X-Error-Code", code))
        self._send_json(status, {"error": message}, h)

    # -- Hub routes

    def _auth(self):
        """(token, state) with state "none" | "valid" | "invalid"."""
        value = self.headers.get("Authorization")
        if value is None:
            return None, "none"
        m = re.fullmatch(r"\s*Bearer\s+(\S+)\s*", value)
        if not m:
            return None, "invalid"
        token = m.group(1)
        return token, ("valid" if token in self.state.tokens else "invalid")

    def _visible_repo(self, repo_id):
        """The repo, or None after having sent the error the Hub would send."""
        token, auth = self._auth()
        if auth == "invalid":
            self._error(401, None, MSG_INVALID_CREDENTIALS)
            return None
        repo = self.state.repos.get(repo_id)
        if repo is None or (repo.private and token not in repo.allowed_tokens):
            # The Hub does not reveal whether a private repo exists: 401 anonymous, 404 signed in.
            self._error(401 if auth == "none" else 404, "RepoNotFound", MSG_REPO_NOT_FOUND)
            return None
        return repo

    def _hub(self):
        segs = self.raw_path.split("/")[1:]
        if len(segs) >= 3 and segs[0] == "api" and segs[1] == "models":
            return self._api(segs[2:])
        for k in (2, 1):
            if len(segs) > k + 1 and segs[k] == "resolve":
                return self._resolve(unquote("/".join(segs[:k])), unquote(segs[k + 1]),
                                     unquote("/".join(segs[k + 2:])))
        self._error(404, None, "Not found")

    def _api(self, rest):
        if len(rest) >= 2 and rest[1] not in API_KEYWORDS:
            repo_id, tail = unquote(rest[0] + "/" + rest[1]), rest[2:]
        else:
            repo_id, tail = unquote(rest[0]), rest[1:]
        while tail and tail[-1] == "":
            tail = tail[:-1]
        repo = self._visible_repo(repo_id)
        if repo is None:
            return
        if not tail:
            return self._model_info(repo, "main")
        if tail[0] == "revision" and len(tail) >= 2:
            return self._model_info(repo, unquote("/".join(tail[1:])))
        if tail[0] == "tree" and len(tail) >= 2:
            return self._tree(repo, unquote(tail[1]), unquote("/".join(tail[2:])))
        if tail[0] == "refs" and len(tail) == 1:
            return self._refs(repo)
        if tail[0] == "paths-info" and len(tail) >= 2 and self.method == "POST":
            return self._paths_info(repo, unquote("/".join(tail[1:])))
        self._error(404, None, "Not found")

    def _revision_or_error(self, repo, rev):
        commit = repo.resolve_revision(rev)
        if commit is None:
            self._error(404, "RevisionNotFound", f"Invalid rev id: {rev}")
        return commit

    def _flag(self, name):
        values = self.query.get(name)
        return bool(values) and values[-1].lower() in ("1", "true", "yes")

    def _model_info(self, repo, rev):
        if self._revision_or_error(repo, rev) is None:
            return
        blobs = self._flag("blobs")
        siblings = []
        for p, e in sorted(repo.files.items()):
            s = {"rfilename": p}
            if blobs:
                s["size"] = e.size
                s["blobId"] = e.oid
                if e.lfs:
                    s["lfs"] = {"size": e.size, "sha256": e.sha256, "pointerSize": e.pointer_size}
            siblings.append(s)
        stamp = "2026-01-01T00:00:00.000Z"
        self._send_json(200, {
            "_id": hashlib.sha1(repo.repo_id.encode()).hexdigest()[:24], "id": repo.repo_id,
            "modelId": repo.repo_id, "author": repo.repo_id.split("/")[0] if "/" in repo.repo_id else None,
            "sha": repo.commit, "lastModified": stamp, "createdAt": stamp, "private": repo.private,
            "gated": repo.gated, "disabled": False, "downloads": 0, "likes": 0, "tags": [],
            "siblings": siblings, "usedStorage": sum(e.size for e in repo.files.values()),
        })

    def _tree(self, repo, rev, base):
        commit = self._revision_or_error(repo, rev)
        if commit is None:
            return
        entries = repo.tree_entries(base.strip("/"), self._flag("recursive"))
        if entries is None:
            return self._error(404, "EntryNotFound", f"{MSG_ENTRY_NOT_FOUND}: {base}",
                               [("X-Repo-Commit", commit)])
        if self._flag("expand"):
            for e in entries:
                e["lastCommit"] = {"id": commit, "title": "Upload", "date": "2026-01-01T00:00:00.000Z"}
        offset = 0
        cursor = self.query.get("cursor", [None])[-1]
        if cursor:
            try:
                offset = int(base64.urlsafe_b64decode(cursor.encode()).decode().split(":", 1)[1])
            except (ValueError, IndexError, UnicodeDecodeError):
                return self._error(400, None, "Invalid cursor")
        page = entries[offset:offset + self.state.page_size]
        headers = [("X-Repo-Commit", commit)]
        if offset + self.state.page_size < len(entries):
            params = {k: v[-1] for k, v in self.query.items() if k != "cursor"}
            params["cursor"] = base64.urlsafe_b64encode(
                f"offset:{offset + self.state.page_size}".encode()).decode()
            headers.append(("Link", f'<{self.state.hub_url}{self.raw_path}?{urlencode(params)}>; rel="next"'))
        self._send_json(200, page, headers)

    def _refs(self, repo):
        branches, prs = [], []
        for b in sorted(repo.branches):
            if b.startswith("refs/pr/"):
                prs.append({"name": b[len("refs/"):], "ref": b, "targetCommit": repo.commit})
            else:
                branches.append({"name": b, "ref": f"refs/heads/{b}", "targetCommit": repo.commit})
        out = {"branches": branches, "converts": [], "tags": []}
        if self._flag("include_prs"):
            out["pullRequests"] = prs
        self._send_json(200, out)

    def _paths_info(self, repo, rev):
        commit = self._revision_or_error(repo, rev)
        if commit is None:
            return
        ctype = self.headers.get("Content-Type", "")
        if "json" in ctype:
            paths = json.loads(self.req_body or b"{}").get("paths", [])
        else:
            paths = parse_qs(self.req_body.decode(), keep_blank_values=True).get("paths", [])
        out = []
        for p in paths:
            p = p.strip("/")
            if p in repo.files:
                out.append(file_tree_entry(repo.files[p]))
            elif p in repo.dirs:
                out.append({"type": "directory", "oid": repo.dir_oids[p], "size": 0, "path": p})
        self._send_json(200, out)

    def _resolve(self, repo_id, rev, path):
        repo = self._visible_repo(repo_id)
        if repo is None:
            return
        token, auth = self._auth()
        if not repo.may_read(token, auth == "valid"):
            if auth == "none":
                return self._error(401, "GatedRepo", MSG_GATED_NO_AUTH.format(repo=repo.repo_id))
            return self._error(403, "GatedRepo", MSG_GATED_NOT_ALLOWED.format(repo=repo.repo_id))
        commit = self._revision_or_error(repo, rev)
        if commit is None:
            return
        e = repo.files.get(path)
        if e is None:
            # The commit header lets clients cache the absence (.no_exist/<commit>/<path>).
            return self._error(404, "EntryNotFound", MSG_ENTRY_NOT_FOUND, [("X-Repo-Commit", commit)])
        self.resource_size = e.size
        base = [("X-Repo-Commit", commit), ("Accept-Ranges", "bytes"), ("ETag", f'"{e.etag}"')]
        a = self._fault("redirect")
        if a:
            # Where a hostile Hub may send a download: another scheme, a private address.
            signed = self.state.signed_url(e.sha256, self.state.url_lifetime)
            signed = signed[len(self.state.cdn_url):]
            location = self.state.expand(a["to"], signed=signed)
            self.rec["location"] = location
            self._send(302, base + [("Location", location), ("X-Linked-Etag", f'"{e.etag}"'),
                                    ("X-Linked-Size", str(e.size)), ("Content-Type", "text/plain; charset=utf-8")],
                       f"Found. Redirecting to {location}".encode())
            return
        if e.lfs:
            a = self._fault("expire")
            lifetime = a.get("lifetime", -60) if a else self.state.url_lifetime
            location = self.state.signed_url(e.sha256, lifetime)
            self.rec["location"] = location
            body = f"Found. Redirecting to {location}".encode()
            self._send(302, base + [("Location", location), ("X-Linked-Etag", f'"{e.sha256}"'),
                                    ("X-Linked-Size", str(e.size)),
                                    ("Content-Type", "text/plain; charset=utf-8")], body)
            return
        name = path.rsplit("/", 1)[-1]
        ctype = "text/plain; charset=utf-8" if e.is_text else "application/octet-stream"
        self._serve_content(e.content, e.oid, base + [
            ("Content-Type", ctype),
            ("Content-Disposition", f"inline; filename*=UTF-8''{quote(name)}; filename=\"{name}\";")])

    def _serve_content(self, content, etag, headers):
        size = content.size
        self.resource_size = size
        rng = None if self._fault("ignore_range") else self.headers.get("Range")
        if_range = self.headers.get("If-Range")
        if rng and if_range is not None and strip_etag(if_range) != etag:
            rng = None  # representation changed: RFC 9110 says send it all
        r = parse_range(rng, size)
        if r == "unsatisfiable":
            return self._send(416, [("Content-Range", f"bytes */{size}"), *headers], b"")
        if r is None:
            return self._send(200, headers, content=content, start=0, length=size)
        first, last = r
        self._send(206, [*headers, ("Content-Range", f"bytes {first}-{last}/{size}")],
                   content=content, start=first, length=last - first + 1)

    # -- CDN route

    def _cdn(self):
        m = re.fullmatch(r"/blobs/([0-9a-f]{64})", self.raw_path)
        if not m or self.method not in ("GET", "HEAD"):
            return self._send_text(404, "NoSuchKey")
        sha = m.group(1)
        e = self.state.blobs.get(sha)
        if e is None:
            return self._send_text(404, "NoSuchKey")
        expires = self.query.get("expires", [""])[-1]
        sig = self.query.get("sig", [""])[-1]
        if not expires.lstrip("-").isdigit() or not hmac.compare_digest(sig, self.state.sign(sha, int(expires))):
            return self._send_text(403, "SignatureDoesNotMatch")
        if int(expires) < time.time():
            return self._send_text(403, MSG_EXPIRED)
        self._serve_content(e.content, sha, [("ETag", f'"{sha}"'), ("Accept-Ranges", "bytes"),
                                             ("Content-Type", "application/octet-stream")])

    # -- control API (hub port only, not logged)

    def _control(self):
        route = self.raw_path[len("/_control/"):].rstrip("/")
        st = self.state
        self.rec = {"status": None, "bytes_sent": 0}
        self.faults = []
        self.resource_size = None
        if route == "faults" and self.method == "POST":
            try:
                raw = json.loads(self.req_body or b"[]")
                rules = st.add_rules(raw if isinstance(raw, list) else [raw])
            except (ValueError, re.error, TypeError) as ex:
                return self._send_json(400, {"error": str(ex)})
            return self._send_json(200, {"added": [r.describe() for r in rules]})
        if route == "faults" and self.method == "GET":
            with st.lock:
                return self._send_json(200, [r.describe() for r in st.rules])
        if route == "faults" and self.method == "DELETE":
            with st.lock:
                st.rules = []
            return self._send_json(200, {"ok": True})
        if route == "log" and self.method == "GET":
            with st.lock:
                body = json.dumps(st.log, separators=(",", ":")).encode()
            return self._send(200, [("Content-Type", "application/json; charset=utf-8")], body)
        if route == "log" and self.method == "DELETE":
            with st.lock:
                st.log = []
            return self._send_json(200, {"ok": True})
        if route == "reset" and self.method == "POST":
            with st.lock:
                st.rules, st.log = [], []
            return self._send_json(200, {"ok": True})
        if route == "info" and self.method == "GET":
            return self._send_json(200, st.info())
        self._send_json(404, {"error": f"no control route {self.method} /_control/{route}"})


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 64


def make_server(kind, port, state, verbose, host="127.0.0.1"):
    handler = type(f"{kind.capitalize()}Handler", (Handler,), {"kind": kind, "state": state, "verbose": verbose})
    return Server((host, port), handler)


def write_ready(path, payload):
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(payload, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repos", required=True, help="spec JSON (see tests/hub/README.md)")
    ap.add_argument("--ready-file", required=True)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--cdn-port", type=int, default=0)
    ap.add_argument("--page-size", type=int, default=50, help="tree entries per page")
    ap.add_argument("--token-file", help="extra valid tokens, one per line: TOKEN [org/repo ...] grants")
    ap.add_argument("--url-lifetime", type=int, default=3600, help="seconds a signed CDN URL stays valid")
    ap.add_argument("--cdn-name", default="127.0.0.1",
                    help="host name put in CDN URLs (still bound to 127.0.0.1), e.g. localhost")
    ap.add_argument("--secret", help="HMAC key for CDN URLs (default: random per run)")
    ap.add_argument("--cdn-alias", metavar="ADDRESS",
                    help="also serve the CDN on this loopback address (e.g. 127.0.0.2), named cdn_alias in the "
                         "ready file: a target the client must refuse, being on this machine but not the Hub's address")
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args(argv)
    if args.page_size < 1:
        ap.error("--page-size must be >= 1")

    try:
        repos, tokens = load_spec(args.repos, args.token_file)
        hash_all(repos)
    except (OSError, ValueError, SpecError) as ex:
        print(f"hubserver: bad spec: {ex}", file=sys.stderr)
        return 2

    secret = args.secret.encode() if args.secret else secrets.token_bytes(32)
    state = HubState(repos, tokens, args.page_size, args.url_lifetime, secret)
    hub = make_server("hub", args.port, state, args.verbose)
    cdn = make_server("cdn", args.cdn_port, state, args.verbose)
    state.hub_url = f"http://127.0.0.1:{hub.server_address[1]}"
    state.cdn_url = f"http://{args.cdn_name}:{cdn.server_address[1]}"
    servers = [hub, cdn]
    if args.cdn_alias:
        alias = make_server("cdn", 0, state, args.verbose, host=args.cdn_alias)
        state.cdn_alias_url = f"http://{args.cdn_alias}:{alias.server_address[1]}"
        servers.append(alias)

    stop = threading.Event()

    def on_signal(signum, frame):
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    threads = [threading.Thread(target=s.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True)
               for s in servers]
    for t in threads:
        t.start()
    ready = {"hub": state.hub_url, "cdn": state.cdn_url, "pid": os.getpid()}
    if state.cdn_alias_url:
        ready["cdn_alias"] = state.cdn_alias_url
    write_ready(args.ready_file, ready)
    print(f"hubserver: hub {state.hub_url} cdn {state.cdn_url} "
          f"({len(repos)} repos, {sum(len(r.files) for r in repos.values())} files)", file=sys.stderr, flush=True)
    try:
        while not stop.wait(0.5):
            pass
    finally:
        state.stopping.set()
        for s in servers:
            s.shutdown()
            s.server_close()
        try:
            with open(args.ready_file, "r", encoding="utf-8") as f:
                if json.load(f).get("pid") == os.getpid():
                    os.unlink(args.ready_file)
        except (OSError, ValueError):
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
