"""vireo-cli as a user runs it: exit codes, one-line errors naming the file, and the JSON
keys `inspect --json` promises. Usage: test_cli.py PATH_TO_VIREO_CLI"""
import json
import os
import subprocess
import sys
from pathlib import Path

CLI = sys.argv[1]
SOURCE = Path(os.environ["VIREO_SOURCE_DIR"])
FIXTURES = Path(os.environ["VIREO_FIXTURES_ROOT"])
results = {"passed": 0, "failed": 0}


def run(*args):
    return subprocess.run([CLI, *map(str, args)], capture_output=True, text=True, timeout=120)


def check(name, ok, detail=""):
    results["passed" if ok else "failed"] += 1
    print(("PASS   : " if ok else "FAIL!  : ") + name + ("" if ok else f" {detail}"))


def test_bad_corpus():
    manifest = json.loads((SOURCE / "tests/corpus/bad/manifest.json").read_text())
    for entry in manifest:
        path = SOURCE / "tests/corpus/bad" / entry["file"]
        for extra in ([], ["--json"]):
            p = run("inspect", path, *extra)
            lines = p.stderr.strip().splitlines()
            check(f"inspect {entry['file']} {' '.join(extra)}".strip(),
                  p.returncode == 1 and len(lines) == 1 and str(path) in lines[0]
                  and entry["expect"] in lines[0] and p.stdout == "",
                  f"rc={p.returncode} stderr={p.stderr!r}")


def test_json_keys():
    expected = json.loads((FIXTURES / "models/expected.json").read_text())
    for e in expected:
        p = run("inspect", FIXTURES / "models" / e["path"], "--json")
        ok = p.returncode == 0
        if ok:
            j = json.loads(p.stdout)
            missing = [k for k in ("format", "tensors", "bytes", "dtypes", "family", "version",
                                   "quantization", "components", "files") if k not in j]
            ok = not missing and j["family"] == e["family"] and j["version"] == e["version"]
        check(f"inspect --json {e['path']}", ok, p.stderr or p.stdout[:400])


def test_text_and_usage():
    p = run("inspect", FIXTURES / "tensorfiles/st_all_dtypes.safetensors")
    check("inspect text output", p.returncode == 0 and "tensors" in p.stdout and "F8_E4M3" in p.stdout, p.stderr)
    p = run("inspect", "/nonexistent/model.safetensors")
    check("missing path", p.returncode == 1 and "no such file or folder" in p.stderr, p.stderr)
    p = run("frobnicate")
    check("unknown command", p.returncode == 2 and "unknown command" in p.stderr, p.stderr)
    p = run("bench", "read", FIXTURES / "tensorfiles/gguf_v3_all_types.gguf", "--repeat", "1", "--json")
    ok = p.returncode == 0
    if ok:
        b = json.loads(p.stdout)
        ok = b["bytes"] > 0 and b["raw_seconds"] > 0 and b["tensor_seconds"] > 0 and b["ratio"] > 0
    check("bench read --json", ok, p.stderr or p.stdout)


def test_tensor_dequant(tmp="/tmp/vireo-cli-tensor.f32"):
    root = FIXTURES / "tensorfiles"
    manifest = json.loads((root / "manifest.json").read_text())
    expected = (root / "expected.bin").read_bytes()
    gguf = next(f for f in manifest["files"] if f["path"] == "gguf_v3_all_types.gguf")
    for t in gguf["tensors"]:
        if "dequant_offset" not in t:
            continue
        p = run("tensor", root / gguf["path"], t["name"], "--dequant", "--out", tmp)
        ok = p.returncode == 0 and t["type"] in p.stdout
        if ok:
            got = open(tmp, "rb").read()
            ok = got == expected[t["dequant_offset"]:t["dequant_offset"] + t["dequant_nbytes"]]
        check(f"tensor --dequant {t['name']} ({t['type']})", ok, p.stderr or p.stdout)
    p = run("tensor", root / gguf["path"], "no.such.tensor")
    check("tensor missing name", p.returncode == 1 and "no tensor named" in p.stderr, p.stderr)
    p = run("bench", "dequant", "--small", "--repeat", "1", "--json", "--python", sys.executable)
    ok = p.returncode == 0
    if ok:
        b = json.loads(p.stdout)
        ok = len(b["dequant"]) == 14 and all(r["seconds"] > 0 and r["python_seconds"] > 0 for r in b["dequant"]) \
            and len(b["linear"]) >= 4
    check("bench dequant --small --json", ok, p.stderr[-2000:] or p.stdout[:400])


def test_dit_forward(tmp="/tmp/vireo-cli-dit.safetensors"):
    """dit-forward on the checkpoints users have, checked against diffusers' outputs."""
    import torch
    from safetensors.torch import load_file

    root = FIXTURES / "ltx2dit"
    for version, layout, models in (("23", "single", ["v23/single.safetensors"]),
                                    ("20", "diffusers", ["v20/diffusers"]),
                                    ("23", "gguf", ["v23/transformer.gguf"]),
                                    ("23", "fp8", ["v23/fp8.safetensors"])):
        case = root / f"v{version}/case_{layout if layout != 'diffusers' else 'base'}.safetensors"
        args = ["dit-forward", "--inputs", case, "--out", tmp, "--blocks"]
        for m in models:
            args += ["--model", root / m]
        p = run(*args)
        ok = p.returncode == 0 and "forward" in p.stdout
        detail = p.stderr or p.stdout
        if ok:
            got, want = load_file(tmp), load_file(case)
            err = max((got["sample"] - want["expected.video"]).abs().max().item(),
                      (got["audio_sample"] - want["expected.audio"]).abs().max().item(),
                      (got["block.1.video"] - want["expected.block.1.video"]).abs().max().item())
            ok = err <= 1e-4
            detail = f"max abs error {err}"
        check(f"dit-forward v{version} {layout}", ok, detail)
    # Flags reach the model: --isolate reproduces the isolate case from the base inputs.
    p = run("dit-forward", "--model", root / "v23/diffusers", "--inputs", root / "v23/case_base.safetensors",
            "--out", tmp, "--isolate")
    ok = p.returncode == 0
    if ok:
        err = (load_file(tmp)["sample"] - load_file(root / "v23/case_isolate.safetensors")["expected.video"]).abs().max().item()
        ok = err <= 1e-4
    check("dit-forward --isolate", ok, p.stderr)
    p = run("dit-forward", "--model", root / "v23/single.safetensors", "--load-only", "--json")
    ok = p.returncode == 0 and json.loads(p.stdout)["version"] == "2.3" and json.loads(p.stdout)["layers"] == 3
    check("dit-forward --load-only --json", ok, p.stderr or p.stdout)
    p = run("dit-forward", "--model", root / "v23/single.safetensors", "--inputs", root / "v20/case_base.safetensors",
            "--out", tmp)
    check("dit-forward with inputs of the wrong model", p.returncode == 1 and "features" in p.stderr
          and len(p.stderr.strip().splitlines()) == 1, p.stderr)
    p = run("dit-forward", "--model", "/nonexistent/model.safetensors", "--load-only")
    check("dit-forward missing model", p.returncode == 1 and "/nonexistent/model.safetensors" in p.stderr, p.stderr)
    if os.path.exists(tmp):
        os.remove(tmp)


test_bad_corpus()
test_tensor_dequant()
test_json_keys()
test_text_and_usage()
test_dit_forward()
print(f"Totals: {results['passed']} passed, {results['failed']} failed")
sys.exit(1 if results["failed"] or not results["passed"] else 0)
