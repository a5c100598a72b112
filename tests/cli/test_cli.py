"""vireo-cli as a user runs it: exit codes, one-line errors naming the file, and the JSON
keys `inspect --json` promises; and the benchmarks of vireo-bench (built, not installed) that
check a number against diffusers. Usage: test_cli.py PATH_TO_VIREO_CLI (environment:
VIREO_BENCH, the path of vireo-bench)"""
import json
import os
import subprocess
import sys
from pathlib import Path

CLI = sys.argv[1]
BENCH = os.environ["VIREO_BENCH"]
SOURCE = Path(os.environ["VIREO_SOURCE_DIR"])
FIXTURES = Path(os.environ["VIREO_FIXTURES_ROOT"])
# Every temporary file and folder of this run lives in one folder, removed at exit.
import atexit
import shutil
import tempfile
RUN_TMP = tempfile.mkdtemp(prefix="vireo-cli-test-")
tempfile.tempdir = RUN_TMP
atexit.register(shutil.rmtree, RUN_TMP, True)
results = {"passed": 0, "failed": 0}


def run(*args):
    return subprocess.run([CLI, *map(str, args)], capture_output=True, text=True, timeout=120)


def run_bench(*args):
    return subprocess.run([BENCH, *map(str, args)], capture_output=True, text=True, timeout=120)


def check(name, ok, detail=""):
    results["passed" if ok else "failed"] += 1
    print(("PASS   : " if ok else "FAIL!  : ") + name + ("" if ok else f" {detail}"))


def test_bad_corpus():
    manifest = json.loads((SOURCE / "tests/corpus/bad/manifest.json").read_text())
    # --json takes the same error path for every file, so it is checked on the first file of each
    # format only: each run is mostly libtorch's start-up (0.6 s), and the readers' own checks of
    # every file are test_badcorpus's.
    json_on = set()
    for entry in manifest:
        path = SOURCE / "tests/corpus/bad" / entry["file"]
        first_of_format = path.suffix not in json_on
        json_on.add(path.suffix)
        for extra in ([], ["--json"]) if first_of_format else ([],):
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
    p = run("devices", "--json")
    try:
        d = json.loads(p.stdout)
        entries = d["devices"]
        cuda = [e for e in entries if e["device"].startswith("cuda:")]
        ok = (p.returncode == 0 and entries[0]["device"] == "cpu" and entries[0]["total_bytes"] > 0
              and [e["device"] for e in cuda] == [f"cuda:{i}" for i in range(len(cuda))]
              and all(0 <= e["free_bytes"] <= e["total_bytes"] and e["compute_capability"] for e in cuda)
              and (bool(cuda) or isinstance(d["cuda_unavailable"], str)))
    except (ValueError, KeyError, IndexError):
        ok = False
    check("devices --json: the CPU, then cuda:0..N-1 with memory and capability (or why no CUDA)", ok, p.stderr or p.stdout[:600])
    p = run("devices")
    check("devices: text names the CPU", p.returncode == 0 and p.stdout.startswith("cpu: CPU ("), p.stderr or p.stdout[:300])
    p = run("devices", "--all")
    check("devices: an unknown argument is a usage error", p.returncode == 2 and "--all" in p.stderr, p.stderr)
    p = run_bench("read", FIXTURES / "tensorfiles/gguf_v3_all_types.gguf", "--repeat", "1", "--json")
    ok = p.returncode == 0
    if ok:
        b = json.loads(p.stdout)
        ok = b["bytes"] > 0 and b["raw_seconds"] > 0 and b["tensor_seconds"] > 0 and b["ratio"] > 0
    check("vireo-bench read --json", ok, p.stderr or p.stdout)
    # bench generate hands every option its script takes on to it (here a Python that fails at once).
    for opt in ("--two-stage", "--third-stage", "--enhance-image", "--guided"):
        p = run_bench("generate", "--python", "false", "--version", "2.5", opt)
        check(f"vireo-bench generate takes {opt}", "unexpected argument" not in p.stderr, p.stderr[-300:])
    p = run_bench("generate", "--python", "false", "--fourth-stage")
    check("vireo-bench generate names an option it does not know", p.returncode == 2 and "--fourth-stage" in p.stderr, p.stderr[-300:])
    # The benchmarks left vireo-cli; what was typed before gets a pointer, not a run.
    p = run("bench", "read", FIXTURES / "tensorfiles/gguf_v3_all_types.gguf")
    lines = p.stderr.strip().splitlines()
    check("vireo-cli bench names vireo-bench in one line", p.returncode == 2 and len(lines) == 1
          and "vireo-bench read " in lines[0] and p.stdout == "", f"rc={p.returncode} {p.stderr[-300:]!r}")


def test_tensor_dequant(tmp=os.path.join(RUN_TMP, "tensor.f32")):
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
    p = run_bench("dequant", "--small", "--repeat", "1", "--json", "--python", sys.executable)
    ok = p.returncode == 0
    if ok:
        b = json.loads(p.stdout)
        ok = len(b["dequant"]) == 14 and all(r["seconds"] > 0 and r["python_seconds"] > 0 for r in b["dequant"]) \
            and len(b["linear"]) >= 4
    check("vireo-bench dequant --small --json", ok, p.stderr[-2000:] or p.stdout[:400])


def test_dit_forward(tmp=os.path.join(RUN_TMP, "dit.safetensors")):
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
    # VIREO_FUSED_KERNELS=0 reaches the process (on CUDA it swaps the fused kernels for their
    # torch compositions, which are the CPU implementation: here the outputs stay identical).
    base = ["dit-forward", "--model", root / "v23/diffusers", "--inputs", root / "v23/case_base.safetensors", "--json"]
    outs = {}
    for fused in (True, False):
        env = dict(os.environ)
        env.pop("VIREO_FUSED_KERNELS", None)
        if not fused:
            env["VIREO_FUSED_KERNELS"] = "0"
        out = tmp + (".fused" if fused else ".composed")
        q = subprocess.run([CLI, *map(str, base + ["--out", out])], capture_output=True, text=True, timeout=120, env=env)
        reported = json.loads(q.stdout.strip().splitlines()[-1]).get("fused_kernels") if q.returncode == 0 else None
        outs[fused] = (reported, load_file(out)["sample"] if q.returncode == 0 else None, q.stderr)
        if os.path.exists(out):
            os.remove(out)
    ok = outs[True][0] is True and outs[False][0] is False and outs[False][1] is not None \
        and torch.equal(outs[True][1], outs[False][1])
    check("dit-forward VIREO_FUSED_KERNELS=0", ok, f"{outs[True][0]} {outs[False][0]} {outs[False][2]}")
    # Where attention runs is in the report beside the GEMM paths, with the reason when not FP8.
    p = run("dit-forward", "--model", root / "v23/fp8.safetensors", "--inputs", root / "v23/case_fp8.safetensors", "--out", tmp, "--json")
    paths = json.loads(p.stdout.strip().splitlines()[-1]).get("matmul_paths", {}) if p.returncode == 0 else {}
    check("dit-forward reports the attention path", paths.get("self-attention: float32 SDPA (its GEMMs do not run FP8 here)") == 3,
          p.stderr or str(paths))
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


def test_generate(tmp_dir=RUN_TMP):
    """vireo-cli generate on a tiny LTX-2.3 pipeline: an MP4 ffprobe reads with both streams,
    the requested frame count and duration, and the recipe; Ctrl-C stops it cleanly."""
    import signal
    root = FIXTURES / "ltx2pipeline" / "v23"
    out = Path(tmp_dir) / f"vireo-cli-generate-{os.getpid()}.mp4"
    if out.exists():
        out.unlink()
    p = run("generate", "--model", root / "diffusers", "--prompt", "a red fox runs through the snow at night",
            "--frames", 17, "--width", 96, "--height", 64, "--fps", 24, "--seed", 7, "--speed", "Fast", "--out", out)
    ok = p.returncode == 0 and "denoise            8/8" in p.stdout and "vocoder" in p.stdout and out.exists()
    check("generate writes an MP4", ok, p.stderr or p.stdout)
    # --device auto: the device pool places the job and says where and why (the CPU on a box
    # without a GPU; on the GPU machine, cuda:0 with its queue and memory).
    placed = Path(tmp_dir) / f"vireo-cli-generate-auto-{os.getpid()}.mp4"
    q = run("generate", "--model", root / "diffusers", "--prompt", "a red fox", "--frames", 9, "--width", 64, "--height", 64,
            "--seed", 7, "--device", "auto", "--no-gallery", "--out", placed)
    lines = [line for line in q.stdout.splitlines() if line.startswith("device: ")]
    check("generate --device auto: placed by the pool, with the reason", q.returncode == 0 and placed.exists() and len(lines) == 1
          and (lines[0] == "device: cpu (cpu: the box has no GPU)" or lines[0].startswith("device: cuda:")),
          q.stderr[-600:] or q.stdout[-600:])
    if ok:
        probe = subprocess.run(["ffprobe", "-v", "error", "-count_frames", "-show_streams", "-show_format", "-of", "json", str(out)],
                               capture_output=True, text=True)
        info = json.loads(probe.stdout)
        streams = {s["codec_type"]: s for s in info["streams"]}
        recipe = json.loads(info["format"]["tags"]["vireo_recipe"])
        ok = (streams["video"]["codec_name"] == "h264" and streams["audio"]["codec_name"] == "aac"
              and streams["video"]["nb_read_frames"] == "17" and abs(float(streams["video"]["duration"]) - 17 / 24) < 1e-3
              and abs(float(streams["audio"]["duration"]) - 17 / 24) < 1024 / 48000 + 1e-3
              and recipe["seed"] == 7 and recipe["steps"] == 8 and len(recipe["sigmas"]) == 9
              and recipe["prompt"].startswith("a red fox") and recipe["model_version"] == "2.3"
              and all(len(f["sha256"]) == 64 for f in recipe["files"]) and recipe["frames"] == 17
              and recipe["speed"] == "fast" and 0 <= recipe["steps_skipped"] <= 6
              and recipe.get("audio_sample_rate") == int(streams["audio"]["sample_rate"]) and recipe.get("audio_channels") == streams["audio"]["channels"]
              and recipe.get("paths", "").startswith("GEMM: ") and " dense GEMM" in recipe.get("paths", "")
              and "attention: " in recipe.get("paths", "") and " f32 SDPA" in recipe.get("paths", "")
              and "transformer: dense GEMM in f32 on the CPU" in recipe.get("planned_paths", "")
              and f"compute: {recipe.get('paths')}" in p.stdout and f"paths: {recipe.get('planned_paths')}" in p.stdout)
        check("generate: ffprobe reads both streams, 17 frames, 0.708 s and the recipe", ok, probe.stdout[:600])
        # The studio's gallery lists it with its recipe (the window notices the row by polling).
        import sqlite3
        db = Path(os.environ["XDG_DATA_HOME"]) / "Vireo" / "vireo" / "gallery.sqlite"
        rows = sqlite3.connect(db).execute("SELECT seed, frames, recipe FROM outputs WHERE path = ?", (str(out.resolve()),)).fetchall() \
            if db.exists() else []
        check("generate lists the video in the gallery", len(rows) == 1 and rows[0][0] == 7 and rows[0][1] == 17
              and json.loads(rows[0][2])["prompt"].startswith("a red fox"), f"{db}: {rows}")
    # The command line builds the studio's services without a window: the window's unfinished
    # downloads are neither resumed nor written away (their saved list stays byte for byte).
    config = Path(tmp_dir) / f"config-pending-{os.getpid()}"
    (config / "Vireo").mkdir(parents=True, exist_ok=True)
    conf = config / "Vireo" / "vireo.conf"
    conf.write_text('[downloads]\ntasks="{\\"key\\":\\"catalog:ltx-2.3/distilled-fp8\\"}"\n')
    before = conf.read_bytes()
    q = subprocess.run([CLI, "generate", "--model", str(root / "diffusers"), "--prompt", "x", "--frames", "9", "--width", "64",
                        "--height", "64", "--dry-run"], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, XDG_CONFIG_HOME=str(config), HF_ENDPOINT="http://127.0.0.1:9"))
    check("generate leaves the window's unfinished downloads as they were", q.returncode == 0 and conf.read_bytes() == before,
          q.stderr[-300:] + repr(conf.read_bytes()[:300]))
    # A length left on auto: LTX-2.5's duration head reads it; LTX-2.3 has none, and says so.
    auto_out = Path(tmp_dir) / f"auto-{os.getpid()}.mp4"
    p = run("generate", "--model", root / "diffusers", "--prompt", "x", "--frames", "auto", "--out", auto_out)
    check("generate --frames auto without a duration head is refused with the reason", p.returncode != 0
          and "no duration head" in p.stderr and not auto_out.exists(), p.stderr)
    p = run("generate", "--model", root.parent / "v25" / "diffusers", "--prompt", "x", "--frames", "auto", "--width", 64,
            "--height", 64, "--dry-run")
    check("generate --frames auto --dry-run on LTX-2.5 plans the length from the prompt",
          p.returncode == 0 and "the length from the prompt" in p.stdout, p.stderr[-400:] + p.stdout[-400:])
    p = run("generate", "--model", root / "diffusers", "--prompt", "x", "--speed", "turbo", "--out", out)
    check("generate: an unknown speed mode is a usage error", p.returncode == 2 and "quality, balanced or fast" in p.stderr, p.stderr)
    p = run("generate", "--model", root / "diffusers", "--prompt", "again", "--frames", 9, "--width", 96, "--height", 64, "--out", out)
    check("generate never overwrites an output", p.returncode == 1 and "exists" in p.stderr, p.stderr)
    out.unlink(missing_ok=True)
    p = run("generate", "--model", root / "gguf" / "transformer.gguf", "--prompt", "x", "--out", out)
    check("generate lists missing components", p.returncode == 1 and "missing" in p.stderr and "video VAE" in p.stderr, p.stderr)

    # Ctrl-C during the denoising loop: exit 130, nothing written, no temporary left.
    proc = subprocess.Popen([CLI, "generate", "--model", str(root / "diffusers"), "--prompt", "fox", "--frames", "97",
                             "--width", "768", "--height", "768", "--stages", "single", "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    interrupted = False
    for line in proc.stdout:
        if "denoise            1/" in line:
            proc.send_signal(signal.SIGINT)
            interrupted = True
            break
    rest_out, err = proc.communicate(timeout=60)
    leftovers = [f for f in os.listdir(tmp_dir) if f.startswith(f".{out.name}.part")]
    check("generate: Ctrl-C stops within a step and writes nothing",
          interrupted and proc.returncode == 130 and "cancelled" in err and not out.exists() and not leftovers
          and "decode video" not in rest_out, f"rc={proc.returncode} err={err!r} out={rest_out[-300:]!r}")


def write_png(path, width, height, pixel):
    """An 8-bit RGB PNG written here (zlib only), pixel(x, y) -> (r, g, b)."""
    import struct
    import zlib

    def chunk(kind, body):
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)
    raw = b"".join(b"\0" + bytes(c for x in range(width) for c in pixel(x, y)) for y in range(height))
    Path(path).write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
                          + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def test_generate_image_conditioning(tmp_dir=RUN_TMP):
    """generate --image: every option checked before anything loads (the file decodes, the frame is 0
    or 8k + 1 inside the clip, the strength in 0..1, the stage path possible), --audio refused with
    the reason; then a run on the tiny pipeline whose recipe names the picture by its SHA-256 and
    keeps a copy of it beside the video."""
    import hashlib
    root = FIXTURES / "ltx2pipeline" / "v23"
    model = root / "diffusers"
    picture = Path(tmp_dir) / "start picture.png"
    write_png(picture, 80, 48, lambda x, y: (40 + 2 * x, 30 + 3 * y, 128))
    notes = Path(tmp_dir) / "notes.png"
    notes.write_text("not a picture\n")
    out = Path(tmp_dir) / f"vireo-cli-i2v-{os.getpid()}.mp4"
    out.unlink(missing_ok=True)
    base = ["generate", "--model", model, "--prompt", "a fox", "--frames", 17, "--width", 96, "--height", 64, "--out", out]

    def refused(name, extra, code, *words):
        p = run(*base, *extra)
        ok = p.returncode == code and all(w in p.stderr for w in words) and not out.exists() and "denoise" not in p.stdout
        check(f"generate --image: {name}", ok, f"rc={p.returncode} stderr={p.stderr[-500:]!r}")
        return p

    refused("--audio with a picture is refused before loading, naming it", ["--audio", picture], 1, "start picture.png", "has no audio stream")
    refused("a missing image", ["--image", Path(tmp_dir) / "absent.png"], 1, "absent.png", "no such image file")
    refused("a file that is not a picture", ["--image", notes], 1, "notes.png", "not an image FFmpeg can decode")
    refused("a frame that is not 0 or 8k + 1", ["--image", picture, "--image-frame", 8], 2, "8k + 1")
    refused("a frame past the clip", ["--image", picture, "--image-frame", 17], 2, "past the last frame")
    refused("a strength above 1", ["--image", picture, "--image-strength", 1.5], 2, "--image-strength")
    refused("a CRF above 51", ["--image", picture, "--image-crf", 60], 2, "--image-crf")
    refused("--image-frame before any --image", ["--image-frame", 9], 2, "belongs to an --image or --clip")
    refused("an unknown stage path", ["--stages", "three"], 2, "auto, single or two")
    p = run("generate", "--model", root / "single" / "ltx-2.3-tiny.safetensors", "--text-encoder", root / "single" / "gemma",
            *base[3:], "--two-stage")
    check("generate --image: two stages without an upsampler",
          p.returncode == 2 and "no spatial upsampler" in p.stderr and "--upsampler" in p.stderr and not out.exists(), p.stderr[-500:])
    refused("two stages at a size that does not halve (the folder's own latent_upsampler/)", ["--two-stage"], 2,
            "multiples of 64")
    upsampler = root / "diffusers" / "transformer" / "config.json"  # any file: the plan reads no byte of it
    refused("two stages at a size that does not halve", ["--stages", "two", "--upsampler", upsampler, "--width", 96, "--height", 96], 2,
            "multiples of 64")
    p = refused("the path is said before the picture is read", ["--upsampler", upsampler, "--width", 128, "--image", notes], 1, "notes.png")
    check("generate --image: auto picks two stages where the distilled schedule, an upsampler and the size allow",
          "stages: two stages: the distilled model's default" in p.stdout, p.stdout)
    image_model = FIXTURES / "ideogram4" / "pipeline" / "model"
    p = run("generate", "--model", image_model, "--prompt", "x", "--image", picture, "--out", str(out)[:-4] + ".png")
    check("generate --image: an image model takes no --image", p.returncode == 2 and "--image does not apply" in p.stderr, p.stderr)

    # A run: the recipe names the picture by hash, frame, strength and CRF, and a copy is kept.
    p = run(*base, "--image", picture, "--image-strength", 0.8, "--stages", "single", "--seed", 5, "--no-gallery", "--json")
    ok = p.returncode == 0 and out.exists()
    check("generate --image writes an MP4", ok, p.stderr[-800:] or p.stdout[-400:])
    if ok:
        sha = hashlib.sha256(picture.read_bytes()).hexdigest()
        probe = subprocess.run(["ffprobe", "-v", "error", "-show_format", "-of", "json", str(out)], capture_output=True, text=True)
        recipe = json.loads(json.loads(probe.stdout)["format"]["tags"]["vireo_recipe"])
        conditions = recipe.get("conditions", [])
        ok = (len(conditions) == 1 and conditions[0]["sha256"] == sha and conditions[0]["frame"] == 0
              and conditions[0]["strength"] == 0.8 and conditions[0]["crf"] == 33 and conditions[0]["source"] == str(picture)
              and recipe.get("stages") == "single" and recipe.get("stages_requested") == "single")
        check("generate --image: the recipe has the picture's SHA-256, frame, strength and CRF", ok, json.dumps(conditions))
        copy = out.parent / conditions[0]["copy"] if conditions else None
        check("generate --image: a copy of the picture is kept beside the video",
              copy is not None and copy.name == out.stem + ".cond0.png" and copy.read_bytes() == picture.read_bytes(), str(copy))
        j = json.loads(p.stdout)
        check("generate --image --json reports the conditions and the path", j["conditions"][0]["sha256"] == sha and j["stages"] == "single",
              p.stdout[-400:])
        check("generate --json reports the sound track's sample rate and channels (scripts read them)",
              j.get("audio_sample_rate") == recipe.get("audio_sample_rate") and j.get("audio_sample_rate", 0) > 0
              and j.get("audio_channels") == recipe.get("audio_channels"), p.stdout[-400:])

        # That video's first frames as a clip to continue from: checked, then run.
        clip = Path(tmp_dir) / "clip to continue.mp4"
        out.rename(clip)
        refused("a clip length that is not 8k + 1", ["--clip", clip, "--clip-frames", 10], 2, "8k + 1")
        refused("a clip that runs past the end", ["--clip", clip, "--clip-frames", 9, "--image-frame", 9], 2, "runs past the last frame")
        refused("--image-crf on a clip", ["--clip", clip, "--image-crf", 20], 2, "clips are not re-compressed")
        refused("a clip longer than its video", ["--clip", clip, "--clip-frames", 25, "--frames", 33], 1, "has 17 decodable frames")
        refused("a picture as a clip", ["--clip", notes], 1, "notes.png")
        p = run(*base, "--clip", clip, "--clip-frames", 9, "--image-frame", 1, "--no-gallery", "--json")
        ok = p.returncode == 0 and out.exists()
        if ok:
            c = json.loads(p.stdout)["conditions"]
            ok = (len(c) == 1 and c[0]["frames"] == 9 and c[0]["frame"] == 1 and c[0]["crf"] == 0
                  and c[0]["sha256"] == hashlib.sha256(clip.read_bytes()).hexdigest() and c[0]["copy"] == out.stem + ".cond0.mp4")
        check("generate --clip: the recipe has the clip's SHA-256, its frames and where it starts", ok, p.stderr[-600:] or p.stdout[-400:])
        # Its last frames instead (extending it): recorded, and a different start than its first.
        kept = out.parent / (out.stem + ".cond0.mp4")
        out.unlink(missing_ok=True)
        kept.unlink(missing_ok=True)
        refused("--clip-from-end after an --image", ["--image", picture, "--clip-from-end"], 2, "belongs to a --clip")
        starts = {}
        for tail in ([], ["--clip-from-end"]):
            out.unlink(missing_ok=True)
            kept.unlink(missing_ok=True)
            p = run(*base, "--seed", 5, "--clip", clip, "--clip-frames", 9, *tail, "--no-gallery", "--json")
            c = json.loads(p.stdout)["conditions"] if p.returncode == 0 and out.exists() else []
            first = subprocess.run(["ffmpeg", "-v", "error", "-i", str(out), "-frames:v", "1", "-f", "rawvideo", "-pix_fmt", "rgb24", "-"],
                                   capture_output=True).stdout if c else b""
            starts[bool(tail)] = (len(c) == 1 and c[0].get("from_end") is bool(tail) and c[0]["frames"] == 9, first, p.stderr[-400:])
        ok = starts[False][0] and starts[True][0] and starts[False][1] and starts[True][1] and starts[False][1] != starts[True][1]
        check("generate --clip --clip-from-end: the clip's last 9 frames, recorded as such", ok, starts[True][2] or starts[False][2])
        for f in (out, clip, out.parent / (out.stem + ".cond0.mp4"), copy):
            if f:
                f.unlink(missing_ok=True)

    # The two-stage path end to end from the folder's latent_upsampler/, with a start image: half
    # size, latent upsample, refine; the video at full size and the recipe saying so.
    p = run(*base, "--width", 128, "--height", 64, "--image", picture, "--two-stage", "--no-gallery", "--json")
    ok = p.returncode == 0 and out.exists()
    if ok:
        j = json.loads(p.stdout)
        probe = subprocess.run(["ffprobe", "-v", "error", "-select_streams", "v:0", "-show_entries", "stream=width,height",
                                "-show_format", "-of", "json", str(out)], capture_output=True, text=True)
        info = json.loads(probe.stdout)
        recipe = json.loads(info["format"]["tags"]["vireo_recipe"])
        ok = (j["stages"] == "two" and recipe.get("stages") == "two" and "refine" in j.get("phases", {})
              and "upsample latents" in j.get("phases", {})
              and (info["streams"][0]["width"], info["streams"][0]["height"]) == (128, 64))
    check("generate --two-stage --image: stage 1 at half size, upsampled, refined; recorded as two stages", ok,
          p.stderr[-600:] or p.stdout[-600:])
    for f in (out, out.parent / (out.stem + ".cond0.png")):
        f.unlink(missing_ok=True)
    # An upsampler given as its own file is named in the recipe by its hash: another upsampler
    # makes another video, and the recipe tells them apart.
    upscaler = root / "publisher" / "lightricks" / "ltx-2.3-spatial-upscaler-x2-1.1.safetensors"
    p = run("generate", "--model", root / "single" / "ltx-2.3-tiny.safetensors", "--text-encoder", root / "single" / "gemma",
            "--prompt", "a lighthouse at dusk", "--frames", 9, "--width", 128, "--height", 64, "--seed", 3, "--two-stage",
            "--upsampler", upscaler, "--no-gallery", "--out", out)
    ok = p.returncode == 0 and out.exists()
    if ok:
        probe = subprocess.run(["ffprobe", "-v", "error", "-show_format", "-of", "json", str(out)], capture_output=True, text=True)
        recipe = json.loads(json.loads(probe.stdout)["format"]["tags"]["vireo_recipe"])
        sha = hashlib.sha256(upscaler.read_bytes()).hexdigest()
        ok = recipe.get("stages") == "two" and any(f["path"].endswith(upscaler.name) and f["sha256"] == sha for f in recipe["files"])
    check("generate --two-stage --upsampler FILE: the recipe names the upsampler by its SHA-256", ok, p.stderr[-600:])
    out.unlink(missing_ok=True)


def test_bench_stages(tmp=os.path.join(RUN_TMP, "stages.safetensors")):
    """bench stages on the tiny 2.3 pipeline: its outputs (decode included) are diffusers' on the same seeded inputs."""
    import torch
    from diffusers.models.autoencoders.autoencoder_kl_ltx2 import AutoencoderKLLTX2Video
    from diffusers.pipelines.ltx2.latent_upsampler import LTX2LatentUpsamplerModel
    from safetensors.torch import load_file

    root = FIXTURES / "ltx2pipeline" / "v23" / "diffusers"
    W, H, F, seed = 128, 64, 9, 77
    p = run_bench("stages", "--vae", root / "vae", "--upsampler", root / "latent_upsampler", "--size", f"{W}x{H}x{F}",
            "--dtype", "f32", "--repeat", "1", "--seed", seed, "--out", tmp, "--json")
    ok = p.returncode == 0
    detail = p.stderr or p.stdout[:400]
    if ok:
        b = json.loads(p.stdout)
        ok = [s["name"] for s in b["stages"]] == ["encode_still", "encode_clip", "upsample", "decode"] \
            and all(s["finite"] and s["median_seconds"] > 0 and len(s["seconds"]) == 1 for s in b["stages"])
    if ok:
        with torch.no_grad():
            vae = AutoencoderKLLTX2Video.from_pretrained(root / "vae", torch_dtype=torch.float32).eval()
            up = LTX2LatentUpsamplerModel.from_pretrained(root / "latent_upsampler", torch_dtype=torch.float32).eval()
            mean, std = (t.float().view(1, -1, 1, 1, 1) for t in (vae.latents_mean, vae.latents_std))
            sf = vae.config.scaling_factor
            u = lambda shape, k: torch.rand(shape, generator=torch.Generator().manual_seed(seed + k)) * 2 - 1  # noqa: E731
            ref = {
                "encode_still": (vae.encode(u((1, 3, 1, H, W), 0)).latent_dist.mode() - mean) / std,
                "encode_clip": (vae.encode(u((1, 3, F, H, W), 1)).latent_dist.mode() - mean) / std,
                "upsample": (up(torch.randn((1, mean.numel(), 2, H // 64, W // 64), generator=torch.Generator().manual_seed(seed + 2))
                                * std + mean) - mean) / std,
                "decode": vae.decode(torch.randn((1, mean.numel(), 2, H // 32, W // 32), generator=torch.Generator().manual_seed(seed + 3))
                                     * std / sf + mean).sample,
            }
        got = load_file(tmp)
        errs = {k: float((got[k] - v).norm() / v.norm()) for k, v in ref.items()}
        print(f"        bench stages outputs against diffusers, rel err: {errs}")
        ok = all(e < 1e-4 for e in errs.values())
        detail = str(errs)
    check("vireo-bench stages --json --out matches diffusers on the same inputs", ok, detail)
    p = run_bench("stages", "--vae", root / "vae", "--upsampler", root / "latent_upsampler", "--size", "96x64x9")
    check("vireo-bench stages refuses a size stage 1 cannot halve", p.returncode == 1 and "multiples of 64" in p.stderr
          and len(p.stderr.strip().splitlines()) == 1, p.stderr)
    p = run_bench("stages", "--vae", root / "vae", "--upsampler", root / "vae")
    check("vireo-bench stages refuses a VAE as the upsampler", p.returncode == 1 and "not an LTX-2 latent upsampler" in p.stderr, p.stderr)


def test_bench_ideogram_step(tmp=os.path.join(RUN_TMP, "ideogram-step.safetensors")):
    """bench ideogram-step on the tiny Ideogram-4 DiTs: its velocity is diffusers' on the same seeded inputs."""
    import torch
    from diffusers.models.transformers.transformer_ideogram4 import Ideogram4Transformer2DModel
    from diffusers.pipelines.ideogram4.pipeline_ideogram4 import Ideogram4Pipeline
    from safetensors.torch import load_file

    root = FIXTURES / "ideogram4" / "transformer" / "diffusers"
    W, H, n_text, seed = 64, 48, 5, 91
    gh, gw = H // 16, W // 16
    errs = {}
    for comp in ("transformer", "unconditional_transformer"):
        cond = comp == "transformer"
        p = run_bench("ideogram-step", "--model", root, "--component", comp, "--size", f"{W}x{H}", "--dtype", "f32",
                "--repeat", "1", "--seed", seed, "--out", tmp, "--json", *(["--text-tokens", n_text] if cond else []))
        ok = p.returncode == 0
        detail = p.stderr or p.stdout[:400]
        if ok:
            b = json.loads(p.stdout)
            ok = b["finite"] and b["median_seconds"] > 0 and len(b["seconds"]) == 1 and b["image_tokens"] == gh * gw \
                and b["text_tokens"] == (n_text if cond else 0) and b["resident_bytes"] == sum(b["bytes_by_representation"].values())
        if ok:
            with torch.no_grad():
                model = Ideogram4Transformer2DModel.from_pretrained(root / comp, torch_dtype=torch.float32).eval()
                g = lambda k: torch.Generator().manual_seed(seed + k)  # noqa: E731
                latents = torch.randn((gh * gw, model.config.in_channels), generator=g(0))
                text = torch.randn((n_text, model.config.llm_features_dim), generator=g(1))
                t = torch.rand((1,), generator=g(2))
                m = n_text if cond else 0
                pos, seg, ind = Ideogram4Pipeline._prepare_ids([m], gh, gw, m, torch.device("cpu"))
                feats = torch.zeros(1, m + gh * gw, model.config.llm_features_dim)
                feats[0, :m] = text[:m]
                z = torch.cat([torch.zeros(m, model.config.in_channels), latents]).unsqueeze(0)
                ref = model(hidden_states=z, timestep=t, encoder_hidden_states=feats, position_ids=pos, segment_ids=seg,
                            indicator=ind, return_dict=False)[0][0, m:]
            got = load_file(tmp)["velocity"]
            errs[comp] = float((got - ref).norm() / ref.norm()) if got.shape == ref.shape else float("inf")
            ok = errs[comp] < 1e-4
            detail = str(errs)
        check(f"vireo-bench ideogram-step --component {comp} --json --out matches diffusers on the same inputs", ok, detail)
    print(f"        bench ideogram-step velocity against diffusers, rel err: {errs}")
    p = run_bench("ideogram-step", "--model", root, "--component", "unconditional_transformer", "--text-tokens", "3")
    check("vireo-bench ideogram-step refuses text tokens for the unconditional DiT", p.returncode == 1 and "without text tokens" in p.stderr
          and len(p.stderr.strip().splitlines()) == 1, p.stderr)
    p = run_bench("ideogram-step", "--model", root, "--size", "40x48")
    check("vireo-bench ideogram-step refuses a size off the 16-pixel grid", p.returncode == 1 and "multiples of 16" in p.stderr, p.stderr)


def png_chunks(path):
    """The chunks of a PNG as (type, data), after checking the signature."""
    import struct
    data = Path(path).read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG signature"
    chunks, at = [], 8
    while at < len(data):
        (length,) = struct.unpack(">I", data[at:at + 4])
        chunks.append((data[at + 4:at + 8], data[at + 8:at + 8 + length]))
        at += 12 + length
    return chunks


def png_text(chunks):
    """Every tEXt, zTXt and iTXt entry of a PNG as a dict."""
    import zlib
    out = {}
    for kind, body in chunks:
        if kind == b"tEXt":
            key, _, value = body.partition(b"\0")
            out[key.decode("latin-1")] = value.decode("latin-1")
        elif kind == b"zTXt":
            key, _, rest = body.partition(b"\0")
            out[key.decode("latin-1")] = zlib.decompress(rest[1:]).decode("latin-1")
        elif kind == b"iTXt":
            key, _, rest = body.partition(b"\0")
            compressed, rest = rest[0], rest[2:]
            _, _, rest = rest.partition(b"\0")  # language tag
            _, _, text = rest.partition(b"\0")  # translated keyword
            out[key.decode("latin-1")] = (zlib.decompress(text) if compressed else text).decode("utf-8")
    return out


def png_pixels(chunks):
    """Width, height and the decoded scanlines' byte count of an 8-bit RGB PNG (None otherwise)."""
    import struct
    import zlib
    ihdr = next(body for kind, body in chunks if kind == b"IHDR")
    width, height, depth, color = struct.unpack(">IIBB", ihdr[:10])
    if depth != 8 or color not in (2, 6):
        return width, height, None
    raw = zlib.decompress(b"".join(body for kind, body in chunks if kind == b"IDAT"))
    return width, height, len(raw) == height * (1 + width * (3 if color == 2 else 4))


def test_generate_image(tmp_dir=RUN_TMP):
    """vireo-cli generate on a tiny Ideogram-4 folder: a PNG that decodes at the requested size,
    with the recipe (kind image, pipeline ideogram4) in a text chunk, listed in the gallery;
    numbers and the output's extension are checked before anything loads."""
    model = FIXTURES / "ideogram4" / "pipeline" / "model"
    out = Path(tmp_dir) / f"vireo-cli-image-{os.getpid()}.png"
    out.unlink(missing_ok=True)
    p = run("generate", "--model", model, "--prompt", "A photo of a cat holding a sign that says hello world",
            "--width", 64, "--height", 48, "--steps", 5, "--guidance", 3.5, "--seed", 1234, "--out", out)
    ok = p.returncode == 0 and "denoise            5/5" in p.stdout and "decode image" in p.stdout and out.exists()
    check("generate (Ideogram-4) writes a PNG", ok, p.stderr or p.stdout)
    if ok:
        chunks = png_chunks(out)
        width, height, pixels_ok = png_pixels(chunks)
        check("generate (Ideogram-4): the PNG decodes at 64x48", width == 64 and height == 48 and pixels_ok,
              f"{width}x{height} pixels_ok={pixels_ok}")
        text = png_text(chunks)
        recipe = json.loads(text.get("vireo_recipe", "{}"))
        ok = (recipe.get("kind") == "image" and recipe.get("pipeline") == "ideogram4" and recipe.get("seed") == 1234
              and recipe.get("steps") == 5 and len(recipe.get("sigmas", [])) == 6 and recipe.get("guidance_scale") == 3.5
              and recipe.get("width") == 64 and recipe.get("height") == 48 and recipe.get("model_version") == "4"
              and recipe.get("prompt", "").startswith("A photo of a cat")
              and len(recipe.get("files", [])) > 0 and all(len(f["sha256"]) == 64 for f in recipe["files"]))
        check("generate (Ideogram-4): the recipe chunk says how it was made", ok, str(text)[:600])
        import sqlite3
        db = Path(os.environ["XDG_DATA_HOME"]) / "Vireo" / "vireo" / "gallery.sqlite"
        rows = sqlite3.connect(db).execute("SELECT kind, seed, recipe FROM outputs WHERE path = ?", (str(out.resolve()),)).fetchall() \
            if db.exists() else []
        check("generate (Ideogram-4) lists the image in the gallery", len(rows) == 1 and rows[0][0] == "image" and rows[0][1] == 1234
              and json.loads(rows[0][2])["pipeline"] == "ideogram4", f"{db}: {rows}")
    # The reference's defaults: 48 steps with 45 x 7.0 then 3 x 3.0 (kept in the recipe).
    out2 = Path(tmp_dir) / f"vireo-cli-image-default-{os.getpid()}.png"
    out2.unlink(missing_ok=True)
    p = run("generate", "--model", model, "--prompt", "a lighthouse", "--width", 32, "--height", 32, "--seed", 3, "--no-gallery", "--out", out2)
    ok = p.returncode == 0 and "48 steps" in p.stdout and "denoise            48/48" in p.stdout and out2.exists()
    if ok:
        recipe = json.loads(png_text(png_chunks(out2)).get("vireo_recipe", "{}"))
        ok = recipe.get("steps") == 48 and recipe.get("guidance_schedule") == [7.0] * 45 + [3.0] * 3
    check("generate (Ideogram-4): unset steps and guidance are the reference's 48 and its schedule", ok, p.stderr or p.stdout[-400:])
    out2.unlink(missing_ok=True)

    bad = Path(tmp_dir) / f"vireo-cli-image-bad-{os.getpid()}"
    p = run("generate", "--model", model, "--prompt", "x", "--out", str(bad) + ".mp4")
    check("generate: an image model with --out .mp4 is a usage error", p.returncode == 2 and "must name a .png" in p.stderr
          and not Path(str(bad) + ".mp4").exists(), p.stderr)
    p = run("generate", "--model", FIXTURES / "ltx2pipeline" / "v23" / "diffusers", "--prompt", "x", "--out", str(bad) + ".png")
    check("generate: a video model with --out .png is a usage error", p.returncode == 2 and "must name a .mp4" in p.stderr, p.stderr)
    p = run("generate", "--model", model, "--prompt", "x", "--frames", 9, "--out", str(bad) + ".png")
    check("generate: --frames does not apply to an image model", p.returncode == 2 and "--frames does not apply" in p.stderr, p.stderr)
    p = run("generate", "--model", model, "--prompt", "x", "--width", 72, "--out", str(bad) + ".png")
    check("generate: an image width off the 16-pixel grid is refused before loading", p.returncode == 2 and "multiples of 16" in p.stderr,
          p.stderr)
    p = run("generate", "--model", model, "--prompt", "x", "--steps", 0, "--out", str(bad) + ".png")
    check("generate: image steps are validated", p.returncode == 2 and "--steps" in p.stderr, p.stderr)
    # The family's knobs: --set within their ranges, named when unknown or out of range.
    p = run("generate", "--model", model, "--prompt", "x", "--set", "schedule_std=9", "--out", str(bad) + ".png")
    check("generate: a knob out of its range is refused", p.returncode == 2 and "schedule_std must be from 0.1 to 5, not 9" in p.stderr,
          p.stderr)
    p = run("generate", "--model", model, "--prompt", "x", "--set", "stg_scale=1", "--out", str(bad) + ".png")
    check("generate: a knob the family does not have is named with the ones it has",
          p.returncode == 2 and "no control named 'stg_scale' (its controls: schedule_mu, schedule_std)" in p.stderr, p.stderr)
    p = run("generate", "--help")
    check("generate --help lists every family's knobs", p.returncode == 0 and "Ideogram-4: schedule_mu (-3 to 3, default 0)" in p.stdout
          and "LTX-2: temporal_rounds (0 to 2, default 0)" in p.stdout, p.stdout[-600:])
    p = run("generate", "--model", model, "--prompt", "x", "--set", "schedule_mu", "--out", str(bad) + ".png")
    check("generate: --set without a value is a usage error", p.returncode == 2 and "KNOB=VALUE" in p.stderr, p.stderr)
    p = run("generate", "--model", model, "--prompt", "x", "--set", "schedule_mu=0.5", "--dry-run", "--json")
    request = json.loads(p.stdout.strip().splitlines()[-1]).get("request", {}) if p.returncode == 0 else {}
    check("generate --dry-run --json shows every knob of the family in the request",
          request.get("knobs") == {"schedule_mu": 0.5, "schedule_std": 1.5}, p.stderr or p.stdout[-400:])
    check("generate: nothing written by refused image requests", not Path(str(bad) + ".png").exists())


def test_trust_gate():
    """download refuses a repo outside the catalog's publishers until it is approved (the same
    record the studio's trust gate keeps); approvals are listed and revocable."""
    import tempfile
    config = tempfile.mkdtemp(prefix="vireo-cli-trust-")
    env = dict(os.environ, XDG_CONFIG_HOME=config, HF_HUB_OFFLINE="1", HF_HUB_CACHE=config + "/cache")

    def cli(*a):
        return subprocess.run([CLI, *a], capture_output=True, text=True, timeout=60, env=env)

    p = cli("download", "someone/ltx-lookalike")
    check("download refuses an unapproved repo", p.returncode == 1 and "not from a catalog publisher" in p.stderr
          and "vireo-cli trust add someone/ltx-lookalike" in p.stderr, p.stderr)
    p = cli("trust", "add", "someone/ltx-lookalike")
    listed = cli("trust", "list")
    check("trust add records the approval", p.returncode == 0 and "someone/ltx-lookalike" in listed.stdout, listed.stdout)
    p = cli("download", "someone/ltx-lookalike")
    check("an approved repo passes the gate (then fails offline)", p.returncode != 0 and "catalog publisher" not in p.stderr, p.stderr)
    cli("trust", "remove", "someone/ltx-lookalike")
    check("trust remove revokes it", "someone/ltx-lookalike" not in cli("trust", "list").stdout)
    check("trust add refuses what is not a repo id", cli("trust", "add", "../etc").returncode == 2)


def le64(v):
    return v.to_bytes(8, "little")


def gguf_with_strings(pairs):
    """A tensor-free GGUF v3 whose metadata holds the given (key bytes, value bytes) strings."""
    out = b"GGUF" + (3).to_bytes(4, "little") + le64(0) + le64(len(pairs))
    for key, value in pairs:
        out += le64(len(key)) + key + (8).to_bytes(4, "little") + le64(len(value)) + value
    return out


def test_hostile_files():
    """Files built to hurt the reader end in one line and exit 1, or in a report; never in a
    crash, and nothing printed carries an escape sequence."""
    import tempfile
    work = Path(tempfile.mkdtemp(prefix="vireo-cli-hostile-"))
    # A config.json beside the weights that is a symlink loop used to abort the process
    # (std::filesystem::exists threw).
    model = work / "loop"
    model.mkdir()
    (model / "model.safetensors").write_bytes((FIXTURES / "tensorfiles/st_all_dtypes.safetensors").read_bytes())
    os.symlink("config.json", model / "config.json")
    for target in (model, model / "model.safetensors"):
        p = run("inspect", target)
        check(f"inspect beside a symlink loop ({target.name})", p.returncode in (0, 1) and (p.returncode == 0 or len(p.stderr.strip().splitlines()) == 1),
              f"rc={p.returncode} stderr={p.stderr[-300:]!r}")
    # Escape sequences and invalid UTF-8 in GGUF keys and strings.
    evil = work / "evil.gguf"
    evil.write_bytes(gguf_with_strings([(b"general.architecture", b"ltxv\xff"),
                                        (b"evil\x1b[2J\nrecognized", b"\x1b]0;owned\x07\xe2\x80\xaeabc")]))
    p = run("inspect", evil)
    check("inspect text output carries no control characters", p.returncode == 0 and "\x1b" not in p.stdout
          and "\x07" not in p.stdout and "\u202e" not in p.stdout and "\nrecognized" not in p.stdout, repr(p.stdout[-400:]))
    p = run("inspect", evil, "--json")
    ok = p.returncode == 0
    if ok:
        j = json.loads(p.stdout)
        ok = j["quantization"]["gguf_architecture"] == "ltxv\ufffd"
    check("inspect --json with invalid UTF-8 in the file is valid JSON", ok, p.stderr or p.stdout[:300])
    # A safetensors header nested 100,000 deep in __metadata__.
    header = b'{"__metadata__":{"x":' + b"[" * 100000 + b"]" * 100000 + b'}}'
    deep = work / "deep.safetensors"
    deep.write_bytes(le64(len(header)) + header)
    p = run("inspect", deep)
    check("inspect of a header nested 100,000 deep", p.returncode == 1 and len(p.stderr.strip().splitlines()) == 1
          and "deeper than 64" in p.stderr, p.stderr[-300:])


class TestHub:
    """tests/hub/hubserver.py for the plan and download commands."""

    def __init__(self, work):
        sys.path.insert(0, str(SOURCE / "tests/hub"))
        import specs
        spec = work / "spec.json"
        spec.write_text(json.dumps(specs.add_hashes(specs.make_spec())))
        ready = work / "ready.json"
        self.proc = subprocess.Popen([sys.executable, str(SOURCE / "tests/hub/hubserver.py"), "--repos", str(spec),
                                      "--ready-file", str(ready)], stderr=subprocess.DEVNULL)
        import time
        deadline = time.time() + 60
        while not ready.exists():
            if self.proc.poll() is not None or time.time() > deadline:
                raise RuntimeError("hubserver did not start")
            time.sleep(0.05)
        self.url = json.loads(ready.read_text())["hub"]

    def fault(self, rule):
        import urllib.request
        req = urllib.request.Request(f"{self.url}/_control/faults", data=json.dumps([rule]).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
        urllib.request.urlopen(req, timeout=10).read()

    def stop(self):
        self.proc.terminate()
        self.proc.wait(10)


def test_hostile_hub():
    """plan and download against a Hub that lies: the JSON stays JSON, the terminal stays clean,
    and every refusal is one line with exit status 1."""
    import tempfile
    work = Path(tempfile.mkdtemp(prefix="vireo-cli-hub-"))
    hub = TestHub(work)
    env = dict(os.environ, XDG_CONFIG_HOME=str(work / "config"), HF_HUB_CACHE=str(work / "cache"), HF_ENDPOINT=hub.url,
               no_proxy="127.0.0.1,localhost", NO_PROXY="127.0.0.1,localhost")
    for var in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_HUB_OFFLINE"):
        env.pop(var, None)

    def cli(*a):
        return subprocess.run([CLI, *map(str, a)], capture_output=True, text=True, timeout=120, env=env)

    try:
        spoof = ['q"uote", "path": "/etc/passwd', "\u202egnp.safetensors", "\u009b31mred.txt", "caf\u00e9.json"]
        p = cli("plan", "tiny/spoof", "--json")
        ok = p.returncode == 0
        if ok:
            j = json.loads(p.stdout)
            ok = sorted(f["path"] for f in j["files"]) == sorted(spoof) and j["repo"] == "tiny/spoof" and set(j) == {
                "repo", "revision", "commit", "total_bytes", "present_bytes", "free_bytes", "needed_bytes", "fits", "volume", "files"}
        check("plan --json: a file name cannot forge a key", ok, p.stderr or p.stdout[:400])
        p = cli("plan", "tiny/spoof")
        check("plan: names with bidi overrides and C1 controls are printed safely",
              p.returncode == 0 and "\u202e" not in p.stdout and "\u009b" not in p.stdout and "caf\u00e9.json" in p.stdout, repr(p.stdout))
        p = cli("plan", "tiny/hostile")
        check("plan: a listing with '../' names is refused", p.returncode == 1 and len(p.stderr.strip().splitlines()) == 1
              and "would leave the cache" in p.stderr, p.stderr)
        cli("trust", "add", "tiny/plain")
        hub.fault({"match": r"small\.safetensors", "server": "hub", "times": -1,
                   "action": {"kind": "redirect", "to": "gopher://127.0.0.1:70/x"}})
        p = cli("download", "tiny/plain", "--include", "small.safetensors")
        lines = [l for l in p.stderr.strip().splitlines() if l.startswith("vireo-cli:")]
        check("download: a redirect to gopher:// is refused", p.returncode == 1 and len(lines) == 1
              and "neither http nor https" in lines[0], p.stderr[-400:])
        hub.fault({"match": r"/tree/", "server": "hub", "times": -1,
                   "action": {"kind": "header", "name": "Link", "value": '<{self}>; rel="next"'}})
        p = cli("plan", "tiny/plain")
        check("plan: a self-referencing Link ends", p.returncode == 1 and "links back" in p.stderr, p.stderr)
    finally:
        hub.stop()


def test_inputs_checked_before_loading(tmp_dir=RUN_TMP):
    """What a user types is checked before a byte of weights is read (issue #25), --help works on
    every command, environment switches are parsed one way, and --dry-run plans without loading
    (issue #24)."""
    root = FIXTURES / "ltx2pipeline" / "v23"
    out = Path(tmp_dir) / "checked.mp4"
    base = ["generate", "--model", root / "diffusers", "--prompt", "a quiet harbour", "--frames", 9, "--width", 64, "--height", 64]

    for command in ("generate", "inspect", "lora", "plan", "cache"):
        p = run(command, "--help")
        check(f"{command} --help prints its usage", p.returncode == 0 and f"vireo-cli {command}" in p.stdout and not p.stderr,
              f"rc={p.returncode} {p.stderr[-300:]!r}")
    p = run("--help")
    check("vireo-cli --help lists no benchmark", p.returncode == 0 and "inspect" in p.stdout and "bench" not in p.stdout, p.stdout[-600:])
    p = run_bench("--help")
    check("vireo-bench --help lists the benchmarks", p.returncode == 0 and all(f"\n  {b} " in p.stdout for b in ("read", "stages", "dit"))
          and not p.stderr, f"rc={p.returncode} {p.stderr[-300:]!r}")
    for command in ("stages", "ideogram-step", "lora"):
        p = run_bench(command, "--help")
        check(f"vireo-bench {command} --help prints its usage", p.returncode == 0 and f"vireo-bench {command}" in p.stdout
              and not p.stderr, f"rc={p.returncode} {p.stderr[-300:]!r}")

    def refused(name, extra, code, *words, env=None):
        p = subprocess.run([CLI, *map(str, base), *map(str, extra)], capture_output=True, text=True, timeout=120,
                           env={**os.environ, **(env or {})})
        ok = p.returncode == code and all(w in p.stderr for w in words) and "denoise" not in p.stdout and "load" not in p.stdout
        check(f"generate: {name}", ok, f"rc={p.returncode} stderr={p.stderr[-400:]!r}")

    lora = FIXTURES / "ltx2pipeline" / "v23" / "loras" / "style.safetensors"
    for strength in ("1e308", "nan", "inf", "-200"):
        refused(f"--lora FILE:{strength} is a bad strength, not a missing file", ["--lora", f"{lora}:{strength}", "--out", out], 2,
                "strength after ':'", "-100 to 100")
    refused("--lora FILE:abc", ["--lora", f"{lora}:abc", "--out", out], 2, "strength after ':'")
    colon = Path(tmp_dir) / "style:2.safetensors"
    shutil.copy(lora, colon)
    p = run(*base, "--lora", colon, "--out", out, "--dry-run")
    check("generate: a LoRA whose name holds ':2' is taken whole", p.returncode == 0, p.stderr[-300:])
    fifo = Path(tmp_dir) / "pipe.png"
    os.mkfifo(fifo)
    refused("a pipe as --image", ["--image", fifo, "--out", out], 1, "is a pipe, not a file")
    refused("a folder as --clip", ["--clip", tmp_dir, "--out", out], 1, "is a folder")
    refused("/dev/zero as --image", ["--image", "/dev/zero", "--out", out], 1, "is a device, not a file")
    refused("--out under /proc", ["--out", "/proc/vireo-test.mp4"], 1, "cannot be written there")
    refused("--out with a 300-byte name", ["--out", Path(tmp_dir) / ("x" * 296 + ".mp4")], 1, "too long")
    refused("an environment switch that is no switch value", ["--out", out], 2, "VIREO_CUDA_GRAPHS", "'of'",
            env={"VIREO_CUDA_GRAPHS": "of"})
    p = subprocess.run([CLI, *map(str, base), "--out", out, "--dry-run"], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "VIREO_CUDA_GRAPHS": "OFF", "VIREO_FUSED_KERNELS": "yes"})
    check("generate: switches take on/off/yes/no in any case", p.returncode == 0, p.stderr[-300:])

    # --dry-run: the plan and each component's path, nothing loaded, nothing written.
    p = run(*base, "--dry-run")
    ok = (p.returncode == 0 and "device: cpu" in p.stdout and "transformer" in p.stdout and "dense GEMM in f32 on the CPU" in p.stdout
          and "fits: yes" in p.stdout and "denoise" not in p.stdout)
    check("generate --dry-run prints the plan and the paths", ok, p.stdout[-600:] + p.stderr[-300:])
    fp8 = root / "fp8" / "ltx-2.3-tiny-fp8.safetensors"
    gemma = root / "single" / "gemma"
    plans = {}
    for device in ("t4", "rtx-3090", "rtx-4090", "h100"):
        p = run("generate", "--model", fp8, "--text-encoder", gemma, "--prompt", "x", "--frames", 9, "--width", 64, "--height", 64,
                "--dry-run", "--plan-for", device, "--json")
        plans[device] = json.loads(p.stdout) if p.returncode == 0 else {"error": p.stderr}
    paths = {d: {c["component"]: c["path"] for c in pl.get("paths", [])} for d, pl in plans.items()}
    check("generate --dry-run --plan-for: each GPU gets its dtype and FP8 path",
          plans["t4"].get("dtype") == "f16" and paths["t4"].get("transformer", "").startswith("dequantize to f16")
          and plans["rtx-3090"].get("dtype") == "bf16" and paths["rtx-3090"].get("transformer", "").startswith("dequantize to bf16")
          and paths["rtx-4090"].get("transformer") == "FP8 tensor-core GEMM" and plans["rtx-4090"].get("attention") == "bf16 SDPA"
          and plans["h100"].get("attention") == "FP8 flash attention (cuDNN)"
          and any("save memory, not time" in w for w in plans["rtx-3090"].get("path_warnings", [])),
          json.dumps(plans)[:1500])
    p = run("generate", "--model", fp8, "--text-encoder", gemma, "--prompt", "x", "--dry-run", "--plan-for", "gtx-1080")
    check("generate --plan-for gtx-1080: too old, with what would work",
          p.returncode == 1 and "older than this build supports" in p.stderr and "CPU" in p.stderr, p.stderr[-400:])
    p = run(*base, "--dtype", "bf16", "--dry-run", "--plan-for", "rtx-2080")
    check("generate --dtype bf16 on Turing is refused before loading", p.returncode == 1 and "choose auto or f16" in p.stderr, p.stderr[-400:])
    check("nothing was written by the checks", not out.exists(), str(out))

    # Defaults follow the model's own files, as the window applies them (tests/core's
    # test_catalogmodels and tests/ui's test_generategui check the other sides): a 2.0 folder
    # that says nothing gets 2.0's distilled defaults; under a dev name, 2.0's dev ones (40
    # steps, not 2.3's 30); an explicit guidance means dev.
    v20 = FIXTURES / "ltx2pipeline" / "v20" / "diffusers"
    named = Path(tmp_dir) / "LTX-2-19b-dev"
    if not named.exists():
        named.symlink_to(v20, target_is_directory=True)
    want = {v20: ("distilled", 8, 1.0, "nothing in its files says"), named: ("dev", 40, 3.0, "LTX-2-19b-dev says dev")}
    for model, (schedule, steps, guidance, basis) in want.items():
        p = run("generate", "--model", model, "--prompt", "x", "--frames", 9, "--width", 64, "--height", 64, "--dry-run", "--json")
        r = json.loads(p.stdout).get("request", {}) if p.returncode == 0 else {}
        check(f"generate --dry-run: {model.name} gets {schedule} defaults from its files",
              r.get("schedule") == schedule and r.get("steps") == steps and r.get("guidance") == guidance
              and basis in r.get("defaults_basis", "") and r.get("defaults_basis", "").startswith("LTX-2.0 "),
              json.dumps(r) + p.stderr[-300:])
    p = run("generate", "--model", v20, "--prompt", "x", "--frames", 9, "--width", 64, "--height", 64, "--guidance", 4, "--dry-run", "--json")
    r = json.loads(p.stdout).get("request", {}) if p.returncode == 0 else {}
    check("generate --guidance 4 on an unnamed model runs the dev schedule at its family's steps",
          r.get("schedule") == "dev" and r.get("steps") == 40 and r.get("guidance") == 4, json.dumps(r) + p.stderr[-300:])


def decoded(path):
    """The frames (RGB) and the sound (16-bit PCM) of a video, or the pixels of a PNG, as ffmpeg
    decodes them: what a viewer sees and hears, not the container's bytes."""
    frames = subprocess.run(["ffmpeg", "-v", "error", "-i", str(path), "-f", "rawvideo", "-pix_fmt", "rgb24", "-"], capture_output=True).stdout
    sound = b"" if str(path).endswith(".png") else subprocess.run(
        ["ffmpeg", "-v", "error", "-i", str(path), "-vn", "-f", "s16le", "-"], capture_output=True).stdout
    return frames, sound


def test_generate_again(tmp_dir=RUN_TMP):
    """Every kind of job made again from its file alone (issue #26): text-to-video with a prompt
    of runs of spaces, a tab, a no-break space and other scripts; image-to-video; keyframes; a
    clip extended from its end; the two-stage path with its upsampler; a LoRA; an Ideogram-4
    image. `generate --again FILE` reads the recipe inside FILE and must give the same pixels and
    the same sound; --seed after it makes a variation."""
    root = FIXTURES / "ltx2pipeline" / "v23"
    work = Path(tmp_dir) / "again"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    picture = work / "harbour.png"
    write_png(picture, 80, 48, lambda x, y: (40 + 2 * x, 30 + 3 * y, 128))
    second = work / "dusk.png"
    write_png(second, 64, 64, lambda x, y: (200 - 2 * x, 90, 40 + 2 * y))
    prompt = "  a lighthouse  at dusk,\tgulls\u00a0crying, \u65e5\u672c\u8a9e, \u0627\u0644\u0639\u0631\u0628\u064a\u0629   "
    model = ["--model", root / "diffusers"]
    size = ["--frames", 9, "--width", 64, "--height", 64]
    first = work / "t2v.mp4"
    jobs = {
        "text to video": (first, [*model, *size, "--prompt", prompt, "--seed", 11]),
        "image to video": (work / "i2v.mp4", [*model, *size, "--prompt", "the harbour wakes", "--seed", 12, "--image", picture,
                                              "--image-strength", 0.8]),
        "keyframes": (work / "keys.mp4", [*model, "--frames", 17, "--width", 64, "--height", 64, "--prompt", "from dawn to dusk",
                                         "--seed", 13, "--image", picture, "--image", second, "--image-frame", 9, "--image-strength", 0.6]),
        "clip extended from its end": (work / "extend.mp4", [*model, *size, "--prompt", "the tide goes on", "--seed", 14, "--clip", first,
                                                           "--clip-frames", 9, "--clip-from-end"]),
        "two stages": (work / "two.mp4", ["--model", root / "single" / "ltx-2.3-tiny.safetensors", "--text-encoder", root / "single" / "gemma",
                                          "--frames", 9, "--width", 128, "--height", 64, "--prompt", "a pier at night", "--seed", 15,
                                          "--two-stage", "--upsampler", root / "publisher" / "lightricks" / "ltx-2.3-spatial-upscaler-x2-1.1.safetensors"]),
        "a LoRA": (work / "lora.mp4", [*model, *size, "--prompt", "a painted sea", "--seed", 16,
                                       "--lora", f"{root / 'loras' / 'style.safetensors'}:0.7"]),
        "an Ideogram-4 image": (work / "image.png", ["--model", FIXTURES / "ideogram4" / "pipeline" / "model", "--width", 64, "--height", 48,
                                                     "--steps", 4, "--seed", 17, "--prompt", "  sign says \u00abhello\u00a0world\u00bb  \u4f60\u597d  "]),
    }
    for kind, (out, args) in jobs.items():
        p = run("generate", *args, "--no-gallery", "--out", out)
        if not (p.returncode == 0 and out.exists()):
            check(f"generate --again: {kind}: the first run", False, p.stderr[-800:])
            continue
        again = out.with_name(out.stem + ".again" + out.suffix)
        p = run("generate", "--again", out, "--no-gallery", "--out", again)
        same = p.returncode == 0 and again.exists() and decoded(out) == decoded(again) and len(decoded(out)[0]) > 0
        check(f"generate --again: {kind}: the same pixels and sound from the file alone", same, p.stderr[-800:] + p.stdout[-300:])
    # The prompt came back byte for byte, and a seed after --again makes another video.
    varied = work / "t2v.varied.mp4"
    p = run("generate", "--again", first, "--seed", 99, "--no-gallery", "--out", varied)
    check("generate --again FILE --seed N: a variation", p.returncode == 0 and decoded(varied) != decoded(first), p.stderr[-400:])
    probe = subprocess.run(["ffprobe", "-v", "error", "-show_format", "-of", "json", str(first.with_name("t2v.again.mp4"))],
                           capture_output=True, text=True)
    try:
        recipe = json.loads(json.loads(probe.stdout)["format"]["tags"]["vireo_recipe"])
    except (ValueError, KeyError):
        recipe = {}
    check("generate --again: the prompt byte for byte", recipe.get("prompt") == prompt, repr(recipe.get("prompt")))
    p = run("generate", "--again", picture, "--no-gallery", "--out", work / "none.mp4")
    check("generate --again on a file without a recipe says so", p.returncode == 1 and "holds no Vireo recipe" in p.stderr, p.stderr[-300:])


def write_wav(path, rate, channels, seconds=None, frames=None):
    """16-bit PCM, a chirp per channel (unlike channels: a swap would show)."""
    import math
    import struct
    n = frames if frames is not None else int(rate * seconds)
    data = bytearray()
    for i in range(n):
        t = i / rate
        for c in range(channels):
            v = 0.4 * math.sin(2 * math.pi * (300 + 500 * c) * t * (1 + t))
            data += struct.pack("<h", int(v * 32767))
    size = n * channels * 2
    header = b"RIFF" + struct.pack("<I", 36 + size) + b"WAVEfmt " + struct.pack("<IHHIIHH", 16, 1, channels, rate, rate * channels * 2,
                                                                           channels * 2, 16) + b"data" + struct.pack("<I", size)
    Path(path).write_bytes(header + bytes(data))


def float_wav_samples(path):
    """A 32-bit float WAV's samples (interleaved) and its channel count and rate."""
    import struct
    b = Path(path).read_bytes()
    fmt, channels, rate = struct.unpack("<HHI", b[20:28])
    assert b[:4] == b"RIFF" and fmt == 3 and b[36:40] == b"data", b[:44]
    n = struct.unpack("<I", b[40:44])[0] // 4
    return list(struct.unpack(f"<{n}f", b[44:44 + 4 * n])), channels, rate


def ffprobe_json(path, *what):
    p = subprocess.run(["ffprobe", "-v", "error", *what, "-of", "json", str(path)], capture_output=True, text=True)
    try:
        return json.loads(p.stdout)
    except ValueError:
        return {}


def test_audio_to_video(tmp_dir=RUN_TMP):
    """Audio-to-video (issue #31): --audio makes the video follow a sound; the clip is as long as
    the sound unless --frames cuts it; the sound's samples are kept beside the video and
    --again makes it again from them; a video's soundtrack serves too; a file that is not a
    sound, silence of no length, 10 hours, an image model: refused before loading, with the
    file's name and the reason."""
    import struct
    root = FIXTURES / "ltx2pipeline" / "v23"
    work = Path(tmp_dir) / "a2v"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    tone = work / "tone.wav"
    write_wav(tone, 44100, 2, seconds=0.8)
    model = ["--model", root / "diffusers", "--width", 96, "--height", 64, "--no-gallery"]
    out = work / "sung.mp4"
    p = run("generate", *model, "--prompt", "a fox sings", "--seed", 3, "--audio", tone, "--out", out)
    ok = p.returncode == 0 and out.exists()
    check("generate --audio: a video that follows the sound", ok, p.stderr[-800:])
    if not ok:
        return
    streams = ffprobe_json(out, "-show_streams").get("streams", [])
    video = [st for st in streams if st.get("codec_type") == "video"]
    audio = [st for st in streams if st.get("codec_type") == "audio"]
    # 0.8 s at 24 fps is 19.2 frames: the clip that holds it is 25 (8k + 1).
    check("generate --audio: the clip is as long as the sound (25 frames for 0.8 s at 24 fps)",
          len(video) == 1 and int(video[0].get("nb_frames", 0)) == 25, json.dumps(video)[:300])
    check("generate --audio: the sound is the video's, at its own rate", len(audio) == 1 and audio[0].get("sample_rate") == "44100"
          and audio[0].get("channels") == 2, json.dumps(audio)[:300])
    kept = out.with_name("sung.audio.wav")
    samples, channels, rate = float_wav_samples(kept) if kept.exists() else ([], 0, 0)
    raw = tone.read_bytes()[44:]
    want = [v / 32768 for v in struct.unpack(f"<{len(raw) // 2}h", raw)]
    check("generate --audio: the samples used are kept beside the video, as they were read",
          channels == 2 and rate == 44100 and len(samples) == len(want) and max(abs(a - b) for a, b in zip(samples, want)) == 0,
          f"{kept.exists()} {channels} {rate} {len(samples)} {len(want)}")
    recipe = json.loads(ffprobe_json(out, "-show_format").get("format", {}).get("tags", {}).get("vireo_recipe", "{}"))
    a = recipe.get("audio") or {}
    import hashlib
    check("generate --audio: the recipe names the sound by hash, and its copy",
          a.get("source") == str(tone) and a.get("sha256") == hashlib.sha256(tone.read_bytes()).hexdigest()
          and a.get("copy") == kept.name and a.get("sample_rate") == 44100 and recipe.get("frames") == 25, json.dumps(a))
    check("generate --audio: the stage line says what the video follows", "the video follows" in recipe.get("stages_reason", ""),
          recipe.get("stages_reason", ""))
    # Made again from the file alone, the source gone: the kept samples make the same video.
    tone.rename(work / "moved.wav")
    again = work / "sung.again.mp4"
    p = run("generate", "--again", out, "--no-gallery", "--out", again)
    check("generate --audio: --again from the kept samples gives the same pixels and sound, the source gone",
          p.returncode == 0 and decoded(out) == decoded(again), p.stderr[-600:])
    # Extending the clip continues its sound: the last 9 frames at frame 0 bring their sound, held at
    # the start of the new one; kept beside it for --again.
    ext = work / "sung.more.mp4"
    p = run("generate", *model, "--prompt", "a fox sings on", "--seed", 4, "--clip", out, "--clip-frames", 9, "--clip-from-end",
            "--frames", 17, "--out", ext)
    er = json.loads(ffprobe_json(ext, "-show_format").get("format", {}).get("tags", {}).get("vireo_recipe", "{}")) if ext.exists() else {}
    cond = (er.get("conditions") or [{}])[0]
    check("generate --clip --clip-from-end: the clip's sound is continued, its samples kept beside the extension",
          p.returncode == 0 and "sound over its frames continued" in er.get("stages_reason", "")
          and cond.get("sound_copy") == "sung.more.cond0.wav" and (work / "sung.more.cond0.wav").exists(), p.stderr[-400:] + json.dumps(cond))
    # The extension's first 0.3 s sound as the clip's last 0.375 s did (both through AAC: compared by correlation).
    import array

    def sound_at(path, rate=44100):  # the extension's sound is at the vocoder's rate: both decoded at one
        return array.array("h", subprocess.run(["ffmpeg", "-v", "error", "-i", str(path), "-vn", "-ar", str(rate), "-f", "s16le", "-"],
                                               capture_output=True).stdout)

    a, b = sound_at(out), sound_at(ext)
    start = round((25 - 9) / 24 * 44100) * 2  # the last 9 of its 25 frames; stereo, interleaved
    n = round(0.3 * 44100) * 2
    x, y = a[start:start + n], b[:n]
    dot = sum(p * q for p, q in zip(x, y))
    norm = (sum(p * p for p in x) * sum(q * q for q in y)) ** 0.5
    check("generate --clip --clip-from-end: the extension starts with the clip's own sound (correlation > 0.9)",
          len(x) == n and len(y) == n and norm > 0 and dot / norm > 0.9, f"{dot / norm if norm else 0:.3f}")
    again_ext = work / "sung.more.again.mp4"
    p = run("generate", "--again", ext, "--no-gallery", "--out", again_ext)
    check("generate --clip --clip-from-end: --again continues the same sound from what was kept",
          p.returncode == 0 and decoded(ext) == decoded(again_ext), p.stderr[-400:])
    # --frames cuts the sound: 9 frames keep 0.375 s of it.
    cut = work / "cut.mp4"
    p = run("generate", *model, "--prompt", "a fox sings", "--seed", 3, "--audio", work / "moved.wav", "--frames", 9, "--out", cut)
    cut_samples, _, _ = float_wav_samples(cut.with_name("cut.audio.wav")) if p.returncode == 0 else ([], 0, 0)
    check("generate --audio --frames 9: the clip cuts the sound (0.375 s kept)",
          p.returncode == 0 and len(cut_samples) == 2 * round(9 / 24 * 44100), p.stderr[-400:])
    # A video's soundtrack, and a mono sound at another rate.
    from_video = work / "from-video.mp4"
    p = run("generate", *model, "--prompt", "again", "--audio", out, "--out", from_video)
    check("generate --audio VIDEO: a video's soundtrack serves", p.returncode == 0 and from_video.exists(), p.stderr[-400:])
    mono = work / "mono.wav"
    write_wav(mono, 16000, 1, seconds=0.4)
    p = run("generate", *model, "--prompt", "hum", "--audio", mono, "--out", work / "mono.mp4")
    m_audio = [st for st in ffprobe_json(work / "mono.mp4", "-show_streams").get("streams", []) if st.get("codec_type") == "audio"]
    check("generate --audio: a mono sound is heard on both sides", p.returncode == 0 and m_audio and m_audio[0].get("channels") == 2,
          p.stderr[-400:])
    # Refused before anything loads, naming the file and the reason; nothing written.
    text = work / "notes.wav"
    text.write_text("these are words, not a sound\n")
    empty = work / "empty.wav"
    write_wav(empty, 44100, 2, frames=0)
    # Ten hours for real (1 kHz, 8-bit mono: 36 MB of silence), said from its header.
    long_one = work / "ten-hours.wav"
    n = 1000 * 36000
    long_one.write_bytes(b"RIFF" + struct.pack("<I", 36 + n) + b"WAVEfmt " + struct.pack("<IHHIIHH", 16, 1, 1, 1000, 1000, 1, 8)
                         + b"data" + struct.pack("<I", n) + b"\x80" * n)
    for name, sound, says in [("a file that is not a sound", text, "notes.wav"), ("silence of no length", empty, "0 s"),
                              ("ten hours", long_one, "at most 1200 s")]:
        bad = work / f"bad-{sound.stem}.mp4"
        p = run("generate", *model, "--prompt", "x", "--audio", sound, "--out", bad)
        check(f"generate --audio: {name} is refused before loading, said", p.returncode != 0 and says in p.stderr
              and "load transformer" not in p.stdout and not bad.exists(), p.stderr[-300:] + p.stdout[-200:])
    p = run("generate", "--model", FIXTURES / "ideogram4" / "pipeline" / "model", "--prompt", "x", "--audio", mono, "--width", 64,
            "--height", 48, "--out", work / "image.png", "--no-gallery")
    check("generate --audio with an image model: refused, named", p.returncode != 0 and "audio" in p.stderr, p.stderr[-300:])
    p = run("generate", *model, "--prompt", "x", "--audio", mono, "--audio", mono, "--out", work / "twice.mp4")
    check("generate --audio twice: refused", p.returncode != 0 and "once" in p.stderr, p.stderr[-300:])


def test_retake(tmp_dir=RUN_TMP):
    """Retake (issue #31): --retake FILE --from S --to S makes that span of a clip again and keeps
    the rest; the pixels handed to the encoder outside the span are the clip's (what a viewer sees
    there differs only by the new file's own H.264 and AAC encoding, measured here); the frames and
    samples it started from are kept beside it and --again makes the same video; bad windows and
    files are refused before loading."""
    root = FIXTURES / "ltx2pipeline" / "v23"
    work = Path(tmp_dir) / "retake"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    tone = work / "tone.wav"
    write_wav(tone, 44100, 2, seconds=0.8)
    model = ["--model", root / "diffusers", "--no-gallery"]
    source = work / "source.mp4"
    p = run("generate", *model, "--prompt", "a fox", "--seed", 5, "--audio", tone, "--frames", 17, "--width", 96, "--height", 64,
            "--out", source)
    if not (p.returncode == 0 and source.exists()):
        check("generate --retake: the source clip", False, p.stderr[-600:])
        return
    out = work / "retaken.mp4"
    p = run("generate", *model, "--prompt", "a fox jumps", "--seed", 6, "--retake", source, "--from", 0.1, "--to", 0.3, "--out", out)
    ok = p.returncode == 0 and out.exists()
    check("generate --retake: the span made again", ok, p.stderr[-800:])
    if not ok:
        return
    streams = ffprobe_json(out, "-show_streams").get("streams", [])
    video = [st for st in streams if st.get("codec_type") == "video"]
    check("generate --retake: the clip's size and length", video and int(video[0].get("nb_frames", 0)) == 17
          and video[0].get("width") == 96 and video[0].get("height") == 64, json.dumps(video)[:300])
    recipe = json.loads(ffprobe_json(out, "-show_format").get("format", {}).get("tags", {}).get("vireo_recipe", "{}"))
    k = recipe.get("retake") or {}
    check("generate --retake: the recipe names the clip, the window and what was kept beside it",
          k.get("source") == str(source) and k.get("start") == 0.1 and k.get("end") == 0.3 and k.get("video") and k.get("audio")
          and (work / k.get("copy", "-")).exists() and (work / k.get("sound_copy", "-")).exists()
          and "retake: one pass" in recipe.get("stages_reason", ""), json.dumps(k) + recipe.get("stages_reason", ""))
    # Frames 1..8 (latent frame 1, the window) made again; 0 and 9..16 the clip's own (the pipeline
    # test checks them bit for bit; here each file's H.264 and the decoders' colour conversion add noise).
    frame = 96 * 64 * 3
    src, new = decoded(source)[0], decoded(out)[0]

    def mean_diff(i):
        a, b = src[i * frame:(i + 1) * frame], new[i * frame:(i + 1) * frame]
        return sum(abs(x - y) for x, y in zip(a, b)) / frame if len(a) == len(b) == frame else 999

    kept = max(mean_diff(i) for i in [0, *range(9, 17)])
    redone = min(mean_diff(i) for i in range(1, 9))
    check(f"generate --retake: outside the span the clip's frames (mean {kept:.1f}/255 apart), inside new ones ({redone:.1f}/255)",
          kept <= 8 and redone > 3 * kept, f"kept {kept} redone {redone}")
    again = work / "retaken.again.mp4"
    p = run("generate", "--again", out, "--no-gallery", "--out", again)
    check("generate --retake: --again makes the same video from what was kept", p.returncode == 0 and decoded(out) == decoded(again),
          p.stderr[-600:])
    keep = work / "keep-sound.mp4"
    p = run("generate", *model, "--prompt", "a fox jumps", "--retake", source, "--from", 0.1, "--to", 0.3, "--keep-sound", "--out", keep)
    kr = json.loads(ffprobe_json(keep, "-show_format").get("format", {}).get("tags", {}).get("vireo_recipe", "{}")) if keep.exists() else {}
    check("generate --retake --keep-sound: the sound kept whole", p.returncode == 0 and (kr.get("retake") or {}).get("audio") is False
          and "the sound kept" in kr.get("stages_reason", ""), p.stderr[-400:])
    for name, extra, says in [("a window past the clip's end", ["--from", 5, "--to", 6], "inside the clip"),
                              ("a window that ends before it starts", ["--from", 0.3, "--to", 0.1], "--from S and --to S"),
                              ("no window", [], "--from S and --to S"),
                              ("temporal rounds", ["--from", 0.1, "--to", 0.3, "--set", "temporal_rounds=1"],
                               "no temporal rounds, third stage or Fast recipe"),
                              ("the Fast recipe", ["--from", 0.1, "--to", 0.3, "--set", "fast=1"],
                               "no temporal rounds, third stage or Fast recipe")]:
        bad = work / "bad.mp4"
        p = run("generate", *model, "--prompt", "x", "--retake", source, *extra, "--out", bad)
        check(f"generate --retake: {name} is refused before loading", p.returncode != 0 and says in p.stderr and not bad.exists()
              and "load transformer" not in p.stdout, p.stderr[-300:])
    notes = work / "notes.mp4"
    notes.write_text("not a video\n")
    p = run("generate", *model, "--prompt", "x", "--retake", notes, "--from", 0, "--to", 0.1, "--out", work / "bad2.mp4")
    check("generate --retake: a file that is not a video is refused, named", p.returncode != 0 and "notes.mp4" in p.stderr, p.stderr[-300:])
    p = run("generate", *model, "--prompt", "x", "--from", 0, "--to", 0.1, "--out", work / "bad3.mp4")
    check("generate --from without --retake: refused", p.returncode != 0 and "--retake" in p.stderr, p.stderr[-300:])


def test_ic_lora(tmp_dir=RUN_TMP):
    """IC-LoRA (issue #31): --lora with an in-context LoRA (reference_downscale_factor in its metadata) and
    --reference FILE: the video follows the clip (another clip, another video at the same seed), the recipe names
    the clip, its strength and the frames kept beside the video, and --again makes the same video from them; a
    length on auto is the reference's. Refused before loading: an IC-LoRA without its clip, a clip without an
    IC-LoRA, a clip shorter than the video, a file that is not a video."""
    import torch
    from safetensors.torch import save_file
    root = FIXTURES / "ltx2pipeline" / "v23"
    work = Path(tmp_dir) / "iclora"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    g = torch.Generator().manual_seed(3)
    tensors = {}
    for m in ("attn1.to_q", "attn1.to_k", "attn1.to_v"):
        tensors[f"diffusion_model.transformer_blocks.0.{m}.lora_A.weight"] = torch.randn(4, 64, generator=g)
        tensors[f"diffusion_model.transformer_blocks.0.{m}.lora_B.weight"] = torch.randn(64, 4, generator=g)
    ic = work / "pose-control.safetensors"
    save_file(tensors, str(ic), metadata={"reference_downscale_factor": "1"})
    model = ["--model", root / "diffusers", "--no-gallery", "--width", 96, "--height", 64]
    clips = []
    for seed, frames in ((5, 17), (8, 17), (9, 9)):
        clip = work / f"pose{seed}.mp4"
        p = run("generate", *model, "--prompt", "a dancer", "--seed", seed, "--frames", frames, "--out", clip)
        if p.returncode != 0:
            check("generate --reference: the reference clips", False, p.stderr[-600:])
            return
        clips.append(clip)
    out = work / "ic.mp4"
    p = run("generate", *model, "--prompt", "a robot dances", "--seed", 4, "--frames", 17, "--lora", ic, "--reference", clips[0],
            "--reference-strength", 0.9, "--out", out)
    ok = p.returncode == 0 and out.exists()
    check("generate --reference: the IC-LoRA follows the clip", ok, p.stderr[-800:])
    if not ok:
        return
    recipe = json.loads(ffprobe_json(out, "-show_format").get("format", {}).get("tags", {}).get("vireo_recipe", "{}"))
    refs = recipe.get("references") or [{}]
    loras = recipe.get("loras") or [{}]
    check("generate --reference: the recipe names the clip, its strength, its kept frames and the IC-LoRA applied",
          len(refs) == 1 and refs[0].get("source") == str(clips[0]) and refs[0].get("strength") == 0.9
          and refs[0].get("frames") == 17 and (work / refs[0].get("copy", "-")).exists()
          and loras[0].get("path") == str(ic) and loras[0].get("status") == "applied"
          and "IC-LoRA pose-control.safetensors follows 1 reference clip" in recipe.get("stages_reason", ""),
          json.dumps(refs) + json.dumps(loras) + recipe.get("stages_reason", ""))
    other = work / "ic-other.mp4"
    p = run("generate", *model, "--prompt", "a robot dances", "--seed", 4, "--frames", 17, "--lora", ic, "--reference", clips[1],
            "--reference-strength", 0.9, "--out", other)
    check("generate --reference: another clip, another video (same seed)", p.returncode == 0 and decoded(other)[0] != decoded(out)[0],
          p.stderr[-400:])
    clips[0].rename(work / "moved.mp4")
    again = work / "ic.again.mp4"
    p = run("generate", "--again", out, "--no-gallery", "--out", again)
    check("generate --reference: --again makes the same video from the kept frames (the clip moved)",
          p.returncode == 0 and decoded(out) == decoded(again), p.stderr[-600:])
    auto = work / "ic-auto.mp4"
    p = run("generate", *model, "--prompt", "a robot", "--frames", "auto", "--lora", ic, "--reference", clips[1], "--out", auto)
    streams = ffprobe_json(auto, "-show_streams").get("streams", []) if auto.exists() else []
    video = [st for st in streams if st.get("codec_type") == "video"]
    check("generate --reference --frames auto: the reference's length", p.returncode == 0 and video
          and int(video[0].get("nb_frames", 0)) == 17, p.stderr[-400:])
    notes = work / "notes.mp4"
    notes.write_text("not a video\n")
    for name, extra, says in [
            ("an IC-LoRA without its reference clip", ["--lora", ic], "follows a reference clip"),
            ("a reference clip without an IC-LoRA", ["--reference", clips[1]], "none of the LoRAs is one"),
            ("a reference shorter than the video", ["--lora", ic, "--reference", clips[2]], "has 9 frames"),
            ("a reference that is not a video", ["--lora", ic, "--reference", notes], "notes.mp4"),
            ("a strength above 1", ["--lora", ic, "--reference", clips[1], "--reference-strength", 2], "--reference-strength")]:
        bad = work / "bad.mp4"
        p = run("generate", *model, "--prompt", "x", "--frames", 17, *extra, "--out", bad)
        check(f"generate --reference: {name} is refused before loading", p.returncode != 0 and says in p.stderr
              and not bad.exists() and "load transformer" not in p.stdout, p.stderr[-300:])


def test_prompt_enhancer(tmp_dir=RUN_TMP):
    """LTX-2.5's prompt enhancer (issue #29): --enhance-prompt on a diffusers folder with prompt_enhancer/ (the
    tiny Gemma 4 E2B fixture) rewrites the prompt before encoding; the run prints what it wrote, --json and the
    recipe keep it beside the prompt as typed, and --again makes the same video. --prompt-enhancer FOLDER gives
    one to a folder without its own; LTX-2.3's text encoder writes its own. Refused before loading: a 2.5 model
    without one, a folder that is not there."""
    root = FIXTURES / "ltx2pipeline"
    enhancer = FIXTURES / "gemma4enhancer"
    work = Path(tmp_dir) / "enhancer"
    shutil.rmtree(work, ignore_errors=True)
    model = work / "ltx25"
    shutil.copytree(root / "v25" / "diffusers", model)
    for part in ("prompt_enhancer", "processor"):
        shutil.copytree(enhancer / part, model / part)
    size = ["--frames", 9, "--width", 64, "--height", 64, "--seed", 3, "--no-gallery"]
    out = work / "fox.mp4"
    p = run("generate", "--model", model, "--prompt", "a fox in the snow", "--enhance-prompt", *size, "--json", "--out", out)
    try:
        info = json.loads(p.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        info = {}
    ok = p.returncode == 0 and out.exists() and info.get("enhanced_prompt")
    check("generate --enhance-prompt: the enhancer writes the prompt the video follows", bool(ok), p.stderr[-800:])
    if not ok:
        return
    recipe = json.loads(ffprobe_json(out, "-show_format").get("format", {}).get("tags", {}).get("vireo_recipe", "{}"))
    check("generate --enhance-prompt: the recipe keeps the prompt as typed and as written, and says so",
          recipe.get("prompt") == "a fox in the snow" and recipe.get("enhance_prompt") is True
          and recipe.get("enhanced_prompt") == info["enhanced_prompt"]
          and "the prompt enhancer rewrote the prompt" in recipe.get("stages_reason", ""), json.dumps(recipe)[:600])
    again = work / "fox.again.mp4"
    p = run("generate", "--again", out, "--no-gallery", "--out", again)
    check("generate --enhance-prompt: --again makes the same video", p.returncode == 0 and decoded(out) == decoded(again)
          and "prompt enhancer: " in p.stdout, p.stderr[-600:])
    given = work / "given.mp4"
    p = run("generate", "--model", root / "v25" / "diffusers", "--prompt", "a fox in the snow", "--enhance-prompt",
            "--prompt-enhancer", enhancer, *size, "--out", given)
    check("generate --prompt-enhancer FOLDER: an enhancer for a model without its own (the same words, the same video)",
          p.returncode == 0 and decoded(given) == decoded(out), p.stderr[-600:])
    given_again = work / "given.again.mp4"
    p = run("generate", "--again", given, "--no-gallery", "--out", given_again)
    check("generate --again of a run given --prompt-enhancer: the recipe keeps the enhancer, the same video",
          p.returncode == 0 and decoded(given_again) == decoded(given) and "prompt enhancer: " in p.stdout, p.stderr[-600:])
    for name, extra, says in [
            ("a model without a prompt enhancer", ["--model", root / "v25" / "diffusers"], "no prompt enhancer"),
            ("an enhancer folder that is not there", ["--model", model, "--prompt-enhancer", work / "nowhere"], "no such prompt enhancer")]:
        bad = work / "bad.mp4"
        p = run("generate", *extra, "--prompt", "x", "--enhance-prompt", *size, "--out", bad)
        check(f"generate --enhance-prompt: {name} is refused before loading", p.returncode != 0 and says in p.stderr
              and not bad.exists() and "load transformer" not in p.stdout, p.stderr[-300:])
    # LTX-2.3: its Gemma 3 text encoder (here the fixture's, with Gemma 3's turn markers) writes the prompt,
    # sampled from the seed, and the recipe says so.
    gemma = enhancer / "gemma3"
    self23 = work / "self23.mp4"
    p = run("generate", "--model", root / "v23" / "diffusers", "--text-encoder", gemma, "--prompt", "a fox in the snow",
            "--enhance-prompt", *size, "--json", "--out", self23)
    try:
        info = json.loads(p.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        info = {}
    recipe = json.loads(ffprobe_json(self23, "-show_format").get("format", {}).get("tags", {}).get("vireo_recipe", "{}")) \
        if self23.exists() else {}
    check("generate --enhance-prompt on LTX-2.3: the text encoder writes the prompt, sampled from the seed",
          p.returncode == 0 and info.get("enhanced_prompt") and recipe.get("enhanced_prompt") == info.get("enhanced_prompt")
          and "written by the text encoder (Gemma 3), sampled: temperature 0.7, top_k 24, top_p 0.9, seed 3"
          in recipe.get("stages_reason", ""), (p.stderr[-600:], recipe.get("stages_reason")))


def test_batch_local(tmp_dir=RUN_TMP):
    """vireo-cli batch: a JSONL of jobs checked line by line before anything runs, run here
    through the device pool into a batch folder (fixed names, markers with the SHA-256, the
    lines' copy with seeds), and resumed: what is missing is made again with its seed, what
    is done is never made twice."""
    import hashlib
    work = Path(tmp_dir) / "batch"
    work.mkdir()
    model = FIXTURES / "ltx2pipeline" / "v23" / "diffusers"
    base = {"model": str(model), "width": 64, "height": 64, "frames": 9}
    def write(name, lines):
        path = work / name
        path.write_text("\n".join(l if isinstance(l, str) else json.dumps(l) for l in lines) + "\n")
        return path
    for name, lines, said in [
        ("unknown.jsonl", [{**base, "prompt": "a"}, {**base, "prompt": "b", "temprature": 1}], "unknown.jsonl:2: unknown field 'temprature'"),
        ("noprompt.jsonl", [{**base}], "noprompt.jsonl:1: 'prompt' is required"),
        ("twice.jsonl", [{**base, "prompt": "a", "id": "x"}, "", {**base, "prompt": "b", "id": "x"}],
         "twice.jsonl:3: the id 'x' is taken by an earlier line"),
        ("deep.jsonl", ['{"a": ' + "[" * 50 + "]" * 50 + "}"], "deep.jsonl:1: nested deeper than 8 levels"),
        ("notjson.jsonl", ["{prompt: x}"], "notjson.jsonl:1: not JSON"),
        ("badid.jsonl", [{**base, "prompt": "a", "id": "../up"}], "badid.jsonl:1: 'id' must be 1 to 64 letters"),
        ("nomodel.jsonl", [{**base, "prompt": "a", "model": "no/such-variant"}], "nomodel.jsonl:1:"),
        ("size.jsonl", [{**base, "prompt": "a", "width": 100}], "size.jsonl:1:"),
        ("enhance.jsonl", [{**base, "prompt": "a", "enhance_prompt": "yes"}], "enhance.jsonl:1: 'enhance_prompt' must be true or false"),
        ("noenhancer.jsonl", [{**base, "prompt": "a", "enhance_prompt": True, "model": str(FIXTURES / "ltx2pipeline" / "v25" / "diffusers")}],
         "noenhancer.jsonl:1: this model has no prompt enhancer"),
    ]:
        p = run("batch", write(name, lines), "--local", "--outputs", work / "out")
        check(f"batch refuses {name} before anything runs, naming the line", p.returncode == 2 and said in p.stderr
              and not (work / "out").exists(), p.stderr[-400:])
    jobs = write("jobs.jsonl", [{**base, "prompt": "a red fox", "id": "fox", "seed": 5}, {**base, "prompt": "a heron"},
                                {**base, "prompt": "an owl", "id": "owl", "device": "auto"}])
    p = run("batch", "check", jobs)
    check("batch check: every line prepared, nothing run", p.returncode == 0 and "3 jobs, each checked" in p.stdout, p.stderr[-300:])
    p = run("batch", jobs, "--local", "--outputs", work / "out", "--name", "b1", "--no-gallery")
    folder = work / "out" / "b1"
    copy = [json.loads(l) for l in (folder / ".vireo" / "jobs.jsonl").read_text().splitlines()] if folder.exists() else []
    def marker_ok(job_id):
        m = json.loads((folder / f"{job_id}.json").read_text())
        data = (folder / m["output"]).read_bytes()
        return m["status"] == "done" and m["bytes"] == len(data) and m["sha256"] == hashlib.sha256(data).hexdigest()
    ok = (p.returncode == 0 and [c["id"] for c in copy] == ["fox", "job-1", "owl"] and copy[0]["seed"] == 5
          and all(isinstance(c["seed"], int) for c in copy) and all(marker_ok(i) for i in ("fox", "job-1", "owl")))
    check("batch --local: each output under its id, a marker with its SHA-256, seeds fixed in the copy", ok,
          p.stderr[-600:] or p.stdout[-600:])
    def recipe_seed(path):
        probe = subprocess.run(["ffprobe", "-v", "error", "-show_format", "-of", "json", str(path)], capture_output=True, text=True)
        try:
            return json.loads(json.loads(probe.stdout)["format"]["tags"]["vireo_recipe"])["seed"]
        except (ValueError, KeyError):
            return None
    check("batch: the seed drawn at submit is the one that ran", bool(copy) and recipe_seed(folder / "job-1.mp4") == copy[1]["seed"],
          recipe_seed(folder / "job-1.mp4"))
    if not ok:
        return
    # A task lost (its output and marker gone) and one killed between its output and its marker.
    (folder / "job-1.mp4").unlink()
    (folder / "job-1.json").unlink()
    (folder / "owl.json").unlink()
    owl_before = (folder / "owl.mp4").stat().st_mtime_ns
    fox_before = (folder / "fox.mp4").stat().st_mtime_ns
    p = run("batch", "resume", folder, "--no-gallery")
    check("batch resume: only the lost task runs again, with its seed; a whole output only gets its marker",
          p.returncode == 0 and "2 done before, 1 queued" in p.stdout and marker_ok("job-1") and marker_ok("owl")
          and recipe_seed(folder / "job-1.mp4") == copy[1]["seed"] and (folder / "owl.mp4").stat().st_mtime_ns == owl_before
          and (folder / "fox.mp4").stat().st_mtime_ns == fox_before, p.stderr[-400:] or p.stdout[-400:])
    files = sorted(x.name for x in folder.iterdir())
    p = run("batch", "resume", folder, "--no-gallery")
    check("batch resume of a finished batch makes nothing", p.returncode == 0 and "3 done before, 0 queued" in p.stdout
          and sorted(x.name for x in folder.iterdir()) == files, p.stdout[-300:])
    p = run("batch", "status", folder, "--json")
    try:
        st = json.loads(p.stdout)
    except ValueError:
        st = {}
    check("batch status --json: 3 of 3 done with their hashes", st.get("done") == 3 and st.get("total") == 3
          and all(len(t["sha256"]) == 64 for t in st.get("tasks", [])), p.stdout[-300:])
    p = run("batch", jobs, "--local", "--outputs", work / "out", "--name", "b1")
    check("batch into an existing folder is refused, pointing at resume", p.returncode == 1 and "batch resume" in p.stderr, p.stderr[-300:])


test_bad_corpus()
test_inputs_checked_before_loading()
test_hostile_files()
test_hostile_hub()
test_trust_gate()
test_tensor_dequant()
test_json_keys()
test_text_and_usage()
test_dit_forward()
test_generate()
test_generate_image()
test_generate_image_conditioning()
test_bench_stages()
test_bench_ideogram_step()
test_generate_again()
test_audio_to_video()
test_retake()
test_ic_lora()
test_prompt_enhancer()
test_batch_local()
print(f"Totals: {results['passed']} passed, {results['failed']} failed")
sys.exit(1 if results["failed"] or not results["passed"] else 0)
