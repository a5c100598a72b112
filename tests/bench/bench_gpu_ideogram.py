"""The GPU benchmark of one Ideogram-4 denoising step, Vireo against diffusers in one run.

Ideogram4Transformer2DModel at its real width (18x256 heads, hidden 4608, SwiGLU 12288, adaLN
512, 53248 text features: the released config) with random weights and --layers of its 34
layers, saved (a) in bf16 as a diffusers folder and (b) in the vendor FP8 layout (fused
attention.qkv and attention.o, F8_E4M3 weights with per-output-channel F32 scales, the rest
bf16: the fixture script's writer). Both folders hold transformer/ and an
unconditional_transformer/ linking to it (the two DiTs share a shape; one set of random weights
serves both). At 1024x1024 (64x64 = 4096 image tokens) with --text-tokens (default 512, a long
prompt in Qwen3-VL's chat template):
  * diffusers eager bf16, timed with CUDA events: the conditional DiT on [text][image] as one
    unpadded sequence (what Vireo computes), the same with the text left-padded to 2048 (what
    Ideogram4Pipeline runs by default), and the unconditional DiT on the image tokens alone;
  * Vireo (vireo-bench ideogram-step, a synchronized clock) on the bf16 and FP8 folders,
    conditional and unconditional.
Each figure is a median of --repeat after a warm-up; peak memory is the allocator's peak above
the weights and inputs. Both sides draw the same inputs (CPU float32 generators seeded seed,
seed + 1, seed + 2, rounded to bf16), so the velocities are compared: Vireo bf16 against
diffusers bf16, and Vireo FP8 against diffusers bf16 (which includes the FP8 rounding of the
weights). A full 1024x1024 generation at the pipeline's default 48 steps, each running both DiTs
(the default guidance schedule never reaches 1), is extrapolated as
48 * (t_cond + t_uncond) * 34 / layers.

Usage: bench_gpu_ideogram.py VIREO_BENCH [--layers 4] [--size 1024x1024] [--text-tokens 512]
                                         [--repeat 5] [--seed 1234] [--skip fp8,padded]
                                         [--work DIR] [--report FILE.json]
                                         [--dry-run-cpu [--real-width]]
--dry-run-cpu: the fixtures' tiny config on the CPU at 64x64; checks this script end to end,
measures nothing meaningful. With --real-width, the real widths on the CPU (the real files'
layout and sizes; take --layers 1 and a small --size).
Needs torch with CUDA, diffusers 0.42.1 and transformers (the fixture script imports them).
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "fixtures"))
import model_fixture_codecs as codecs  # noqa: E402

# The fixture script (the vendor FP8 writer) also imports transformers and tokenizers; without
# them the bf16 half still runs, and the report says why FP8 is missing.
try:
    import make_ideogram4_fixtures as ig  # noqa: E402  (quiets diffusers)
    IG_ERROR = None
except ImportError as e:
    ig, IG_ERROR = None, f"{type(e).__name__}: {e}"

import diffusers  # noqa: E402
from diffusers.models.transformers import transformer_ideogram4 as tig  # noqa: E402
from diffusers.models.transformers.transformer_ideogram4 import Ideogram4Transformer2DModel  # noqa: E402
from safetensors.torch import load_file  # noqa: E402

try:
    from diffusers.pipelines.ideogram4.pipeline_ideogram4 import Ideogram4Pipeline  # noqa: E402
    prepare_ids = Ideogram4Pipeline._prepare_ids
except ImportError:
    def prepare_ids(text_lengths, grid_h, grid_w, max_text, device):
        """Ideogram4Pipeline._prepare_ids (diffusers 0.42.1) for one unpadded sample."""
        (n,) = text_lengths
        assert n == max_text, "the fallback packs no pads"
        h = torch.arange(grid_h).view(-1, 1).expand(grid_h, grid_w).reshape(-1)
        w = torch.arange(grid_w).view(1, -1).expand(grid_h, grid_w).reshape(-1)
        image = torch.stack([torch.zeros_like(h), h, w], dim=1) + tig.IMAGE_POSITION_OFFSET
        text = torch.arange(n).view(-1, 1).expand(n, 3)
        pos = torch.cat([text, image]).unsqueeze(0)
        ind = torch.cat([torch.full((n,), tig.LLM_TOKEN_INDICATOR), torch.full((grid_h * grid_w,), tig.OUTPUT_IMAGE_INDICATOR)])
        ind = ind.unsqueeze(0)
        return pos.to(device), torch.ones_like(ind).to(device), ind.to(device)

BF16 = torch.bfloat16
FULL_LAYERS, STEPS, PIPELINE_TEXT = 34, 48, 2048

ap = argparse.ArgumentParser()
ap.add_argument("bench", help="path of vireo-bench")
ap.add_argument("--layers", type=int, default=4)
ap.add_argument("--size", default="", help="WxH (default 1024x1024; 64x64 with --dry-run-cpu)")
ap.add_argument("--text-tokens", type=int, default=-1, help="default 512 (7 with --dry-run-cpu)")
ap.add_argument("--repeat", type=int, default=5)
ap.add_argument("--seed", type=int, default=1234)
ap.add_argument("--skip", default="", help="comma list of: fp8, padded")
ap.add_argument("--work", default="")
ap.add_argument("--report", default="")
ap.add_argument("--dry-run-cpu", action="store_true", help="a tiny model on the CPU: checks this script, measures nothing")
ap.add_argument("--real-width", action="store_true", help="with --dry-run-cpu: the real widths (take --layers 1, a small --size)")
args = ap.parse_args()
skip = set(filter(None, args.skip.split(",")))
DRY = args.dry_run_cpu
assert DRY or torch.cuda.is_available(), "bench gpu ideogram needs a CUDA device (or --dry-run-cpu)"
dev = torch.device("cpu" if DRY else "cuda")
W, H = (int(v) for v in (args.size or ("64x64" if DRY else "1024x1024")).split("x"))
assert W % 16 == 0 and H % 16 == 0, "--size needs W and H multiples of 16"
GH, GW = H // 16, W // 16
N_IMG = GH * GW
N_TEXT = args.text_tokens if args.text_tokens >= 0 else (7 if DRY else 512)
PAD_TO = 32 if DRY else PIPELINE_TEXT
t_start = time.perf_counter()


def log(msg: str) -> None:
    print(f"[{time.perf_counter() - t_start:6.1f}s] {msg}", flush=True)


# Ideogram4Transformer2DModel's defaults, which the released transformer/config.json uses.
CONFIG = dict(in_channels=128, num_layers=args.layers, attention_head_dim=256, num_attention_heads=18,
              intermediate_size=12288, adaln_dim=512, llm_features_dim=53248, rope_theta=5_000_000,
              mrope_section=(24, 20, 20), norm_eps=1e-5)
if DRY and not args.real_width:  # the fixtures' tiny DiT (make_ideogram4_fixtures.DIT_CONFIG)
    CONFIG.update(attention_head_dim=16, num_attention_heads=4, intermediate_size=96, adaln_dim=32, llm_features_dim=13 * 32,
                  mrope_section=(4, 2, 2))
FULL = args.layers if DRY and not args.real_width else FULL_LAYERS

torch.set_grad_enabled(False)
torch.manual_seed(0)
with dev:
    model = Ideogram4Transformer2DModel(**CONFIG)
g = torch.Generator(device=dev).manual_seed(23)
# Fan-in scaled so the activations stay near unit size through the real widths (53248 text
# features, 12288 MLP); norm gains near 1.
for name, t in sorted(model.state_dict(keep_vars=True).items()):
    std = t.shape[1] ** -0.5 if t.ndim == 2 else 0.02
    noise = torch.randn(t.shape, generator=g, device=dev, dtype=torch.float32) * std
    if re.search(r"norm[^.]*\.weight$", name) and t.ndim == 1:
        noise = 1.0 + noise
    t.data.copy_(noise)
# Cast as from_pretrained(torch_dtype=bf16) does: the RoPE frequencies stay float32 (rounded, the
# image positions at 65536 would move by whole radians).
inv_freq = model.rotary_emb.inv_freq.clone()
model = model.to(BF16).eval()
model.rotary_emb.inv_freq = inv_freq
DEVICE_NAME = "cpu (dry run)" if DRY else torch.cuda.get_device_name(0)
params = sum(p.numel() for p in model.parameters())
log(f"model: Ideogram-4 DiT, {args.layers} of {FULL_LAYERS} layers, hidden {CONFIG['attention_head_dim'] * CONFIG['num_attention_heads']}, "
    f"{params / 1e6:.1f} M parameters, bf16 on {DEVICE_NAME}")

keep_work = bool(args.work)
work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="vireo-bench-ideogram-"))
if work.exists():
    shutil.rmtree(work)
work.mkdir(parents=True)
folders = {"bf16": work / "bf16"}
model.save_pretrained(folders["bf16"] / "transformer", safe_serialization=True)
if ig is None and "fp8" not in skip:
    skip.add("fp8")
    log(f"FP8 skipped: the fixture script does not import here ({IG_ERROR})")
if "fp8" not in skip:
    folders["fp8"] = work / "fp8"
    (folders["fp8"] / "transformer").mkdir(parents=True)
    codecs.write_safetensors(folders["fp8"] / "transformer" / "diffusion_pytorch_model.safetensors", ig.fuse_fp8(model), None)
    shutil.copy(folders["bf16"] / "transformer" / "config.json", folders["fp8"] / "transformer" / "config.json")
for f in folders.values():
    os.symlink("transformer", f / "unconditional_transformer")
sizes = {k: sum(p.stat().st_size for p in (f / "transformer").iterdir()) for k, f in folders.items()}
log(f"wrote {', '.join(f'{k} ({v / 2**30:.2f} GiB)' for k, v in sizes.items())} to {work}")

# The inputs Vireo draws (ideogrambench.cpp), rounded to the compute dtype as its pipeline does.
def gen(k):
    return torch.Generator().manual_seed(args.seed + k)


latents = torch.randn((N_IMG, CONFIG["in_channels"]), generator=gen(0), dtype=torch.float32).to(BF16)
text = torch.randn((N_TEXT, CONFIG["llm_features_dim"]), generator=gen(1), dtype=torch.float32).to(BF16)
t_model = float(torch.rand((1,), generator=gen(2), dtype=torch.float32))


def packed(n_text: int, pad: int):
    """Ideogram4Pipeline's packed [pad][text][image] sequence for one sample (n_text = 0: the
    unconditional DiT's image-only sequence)."""
    m = pad + n_text
    pos, seg, ind = prepare_ids([n_text], GH, GW, m, dev)
    z = torch.cat([torch.zeros(m, CONFIG["in_channels"], dtype=BF16), latents]).unsqueeze(0).to(dev)
    feats = torch.zeros(1, m + N_IMG, CONFIG["llm_features_dim"], dtype=BF16)
    feats[0, pad:m] = text[:n_text]
    return dict(hidden_states=z, timestep=torch.tensor([t_model], dtype=BF16, device=dev), encoder_hidden_states=feats.to(dev),
                position_ids=pos, segment_ids=seg, indicator=ind, return_dict=False), m


def measure(inputs, m) -> dict:
    """Median of --repeat after a warm-up; peak allocated above the weights and inputs."""
    fn = lambda: model(**inputs)[0]  # noqa: E731
    if not DRY:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    base = 0 if DRY else torch.cuda.memory_allocated()
    out = fn()
    times = []
    for _ in range(args.repeat):
        out = None
        if DRY:
            t0 = time.perf_counter()
            out = fn()
            times.append(time.perf_counter() - t0)
            continue
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        out = fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / 1000.0)
    peak = None if DRY else torch.cuda.max_memory_allocated() - base
    times.sort()
    v = out[0, m:].float().cpu()
    return {"median_seconds": times[len(times) // 2], "seconds": times, "peak_bytes": peak, "tokens": int(inputs["hidden_states"].shape[1]),
            "finite": bool(torch.isfinite(v).all()), "output": v}


diff = {}
cases = [("cond", N_TEXT, 0), ("uncond", 0, 0)]
if "padded" not in skip and N_TEXT > 0:
    cases.insert(1, ("cond_padded", N_TEXT, max(PAD_TO - N_TEXT, 0)))
for name, n_text, pad in cases:
    inputs, m = packed(n_text, pad)
    diff[name] = measure(inputs, m)
    del inputs
    log(f"diffusers {name}: {diff[name]['median_seconds']:.4f} s over {diff[name]['tokens']} tokens")
if "cond_padded" in diff:
    pd = float((diff["cond_padded"]["output"].double() - diff["cond"]["output"].double()).norm() / diff["cond"]["output"].double().norm())
    log(f"diffusers: left pads change the conditional velocity by rel {pd:.2e} (bf16 rounding only)")
del model
if not DRY:
    torch.cuda.empty_cache()

vireo, errors = {}, {}
for kind, folder in folders.items():
    for comp, name in (("transformer", "cond"), ("unconditional_transformer", "uncond")):
        key = f"{kind}_{name}"
        out_file = work / f"{key}.safetensors"
        cmd = [args.bench, "ideogram-step", "--model", str(folder), "--component", comp, "--size", f"{W}x{H}",
               "--device", dev.type, "--dtype", "bf16", "--repeat", str(args.repeat), "--seed", str(args.seed),
               "--out", str(out_file), "--json"] + (["--text-tokens", str(N_TEXT)] if comp == "transformer" else [])
        log("running " + " ".join(cmd[1:]))
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            errors[key] = (p.stderr or p.stdout).strip()[-2000:]
            log(f"vireo {key} FAILED: {errors[key]}")
            continue
        r = json.loads(p.stdout.strip().splitlines()[-1])
        ref = diff[name]["output"].double()
        got = load_file(str(out_file))["velocity"].double()
        r["rel_err"] = float((got - ref).norm() / ref.norm().clamp_min(1e-30)) if got.shape == ref.shape else None
        r["max_abs_err"] = float((got - ref).abs().max()) if got.shape == ref.shape else None
        vireo[key] = r
        log(f"vireo {key}: {r['median_seconds']:.4f} s, rel err {r['rel_err']:.3e}")


def gib(b):
    return "n/a" if b is None or b < 0 else f"{b / 2**30:.3f}"


def full_denoise(t_cond, t_uncond):
    return STEPS * (t_cond + t_uncond) * FULL / args.layers


print(f"\n== bench gpu ideogram: Ideogram-4 DiT step, {W}x{H} ({N_IMG} image + {N_TEXT} text tokens), t {t_model:.4f}, "
      f"{args.layers} of {FULL_LAYERS} layers, median of {args.repeat}")
print(f"   device {DEVICE_NAME}, torch {torch.__version__}, diffusers {diffusers.__version__}"
      + ((" (DRY RUN: real widths on the CPU, figures mean nothing)" if args.real_width else
         " (DRY RUN: tiny model on the CPU, figures mean nothing)") if DRY else ""))
for kind in folders:
    r = vireo.get(f"{kind}_cond")
    if r:
        reps = ", ".join(f"{k} {v / 2**30:.3f} GiB" for k, v in sorted(r["bytes_by_representation"].items()))
        print(f"   vireo {kind}: {r['resident_bytes'] / 2**30:.3f} GiB resident ({reps}), loaded in {r['load_seconds']:.2f} s, "
              f"{'fused' if r['fused_qkv'] else 'split'} qkv")
print(f"   {'step':22s} {'tokens':>7s} {'s':>9s} {'x diff':>7s} {'peak GiB':>9s} {'x diff':>7s} {'rel err':>9s} {'max abs':>9s}")
rows = {}
for name, d in diff.items():
    print(f"   {'diffusers ' + name:22s} {d['tokens']:7d} {d['median_seconds']:9.4f} {'':>7s} {gib(d['peak_bytes']):>9s}"
          + ("" if d["finite"] else "  NOT FINITE"))
    rows[f"diffusers_{name}"] = {k: v for k, v in d.items() if k != "output"}
for kind in folders:
    for name in ("cond", "uncond"):
        key = f"{kind}_{name}"
        if key not in vireo:
            print(f"   {'vireo ' + kind + ' ' + name:22s} {'FAILED':>7s}")
            continue
        v, d = vireo[key], diff[name]
        tr = v["median_seconds"] / d["median_seconds"]
        pr = f"{v['peak_bytes'] / d['peak_bytes']:7.2f}" if d["peak_bytes"] and v["peak_bytes"] >= 0 else f"{'n/a':>7s}"
        re_ = f"{v['rel_err']:9.2e}" if v["rel_err"] is not None else f"{'n/a':>9s}"
        ma = f"{v['max_abs_err']:9.2e}" if v["max_abs_err"] is not None else f"{'n/a':>9s}"
        print(f"   {'vireo ' + kind + ' ' + name:22s} {v['image_tokens'] + v['text_tokens']:7d} {v['median_seconds']:9.4f} {tr:7.2f} "
              f"{gib(v['peak_bytes']):>9s} {pr} {re_} {ma}" + ("" if v["finite"] else "  NOT FINITE"))
        rows[key] = {"vireo": v, "time_ratio": tr}
print("   x diff: against diffusers' unpadded step of the same DiT in this run; peak: allocated above the weights and inputs;"
      " rel err: |vireo - diffusers bf16| / |diffusers bf16| on the same inputs (FP8 includes its weight rounding)")
extrapolated = {"diffusers": full_denoise(diff["cond"]["median_seconds"], diff["uncond"]["median_seconds"])}
if "cond_padded" in diff:
    extrapolated["diffusers_pipeline_padded"] = full_denoise(diff["cond_padded"]["median_seconds"], diff["uncond"]["median_seconds"])
for kind in folders:
    if f"{kind}_cond" in vireo and f"{kind}_uncond" in vireo:
        extrapolated[f"vireo_{kind}"] = full_denoise(vireo[f"{kind}_cond"]["median_seconds"], vireo[f"{kind}_uncond"]["median_seconds"])
print(f"   full denoise, {STEPS} steps x (cond + uncond) at {FULL} layers, extrapolated: "
      + ", ".join(f"{k} {v:.1f} s" for k, v in extrapolated.items()))
report = {"size": [W, H], "image_tokens": N_IMG, "text_tokens": N_TEXT, "timestep": t_model, "layers": args.layers,
          "repeat": args.repeat, "seed": args.seed, "device": DEVICE_NAME, "dry_run": DRY, "torch": torch.__version__,
          "diffusers": diffusers.__version__, "config": CONFIG, "file_bytes": sizes, "rows": rows,
          "extrapolated_denoise_seconds": extrapolated, "vireo_errors": errors, "skipped": sorted(skip),
          "fixture_import_error": IG_ERROR, "total_seconds": time.perf_counter() - t_start}
if args.report:
    Path(args.report).write_text(json.dumps(report, indent=2))
if not keep_work:
    shutil.rmtree(work, ignore_errors=True)
log("done")
ok = len(vireo) == 2 * len(folders) and all(v["finite"] for v in vireo.values()) and all(d["finite"] for d in diff.values())
sys.exit(0 if ok else 1)
