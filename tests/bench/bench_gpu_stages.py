"""The GPU benchmark of the LTX-2 stages around the denoiser, Vireo against diffusers in one run.

Random-weight LTX-2.3 video VAE (AutoencoderKLLTX2Video with the real 2.3 config of diffusers'
scripts/convert_ltx2_to_diffusers.py) and x2 latent upsampler (LTX2LatentUpsamplerModel, mid 1024,
4 + 4 blocks, no rational resampler), saved in bf16 as diffusers folders, then on the anchor size
768x512x121:
  * encode_still: vae.encode of one full-size still [1, 3, 1, H, W] (image-to-video's condition),
    argmax latent, normalized as the pipelines do;
  * encode_clip:  vae.encode of the clip [1, 3, F, H, W] with the tiling Vireo's pipeline uses
    (tiles of 16 latent cells overlapping 2 when a side has more than 16, chunks of 8 latents
    overlapping 2 when there are more than 8): diffusers' enable_tiling with 512/448 px and
    56/48 frames, framewise encoding on only when chunking;
  * upsample:     the two-stage path's step on the half-size stage-1 latent
    [1, 128, (F - 1) / 8 + 1, H / 64, W / 64]: denormalize, upsampler, normalize.
  * decode:       the final latent [1, 128, (F - 1) / 8 + 1, H / 32, W / 32] (bf16, as the
    pipelines hand it over) to the video [1, 3, F, H, W]: denormalize, vae.decode, with the tiling
    Vireo's pipeline uses (tiles of 16 latent cells overlapping 2 when a side has more than 16,
    all frames at once). LTX2Pipeline leaves diffusers' tiling off; this is vae.enable_tiling()
    with its defaults (512/448 px) and framewise decoding off, as the example of diffusers'
    LTX2LatentUpsamplePipeline calls it (LTX2Pipeline's own examples do not tile). Both denormalize in
    float32 (the pipeline does it in bf16: a few elementwise ops, so only the inputs the decoders
    see differ, not the timing). The outputs are compared over the whole video and over the part
    where the two tilings agree (at 768x512 diffusers also decodes a sliver of latent rows 14-15,
    which Vireo's one tile row already covers, so its last 64 pixel rows blend differently); the peak is
    checked against issue #13's goal: decoder weights plus the decode's peak under 12 GB (12e9 bytes).
diffusers is timed with CUDA events, Vireo (vireo-bench stages) with a synchronized clock;
both report the median of --repeat after a warm-up, and the allocator's peak above what was
allocated before the op. Both draw the same inputs (CPU float32 generators seeded seed + k), so
the outputs are compared too (the clip's only loosely: diffusers also encodes the slivers its
tiling starts at every stride below the edge, Vireo stops at the tile that reaches it).

Usage: bench_gpu_stages.py VIREO_BENCH [--size 768x512x121] [--repeat 3] [--seed 1234]
                                       [--work DIR] [--report FILE.json] [--dry-run-cpu]
--dry-run-cpu: tiny configs on the CPU at 576x64x73 (tiles and chunks still happen); checks this
script end to end, measures nothing meaningful.
"""
import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

import diffusers  # noqa: E402
from diffusers.models.autoencoders.autoencoder_kl_ltx2 import AutoencoderKLLTX2Video  # noqa: E402
from diffusers.pipelines.ltx2.latent_upsampler import LTX2LatentUpsamplerModel  # noqa: E402
from diffusers.utils import logging as diffusers_logging  # noqa: E402
from safetensors.torch import load_file  # noqa: E402

diffusers_logging.set_verbosity_error()
diffusers_logging.disable_progress_bar()

BF16 = torch.bfloat16
ap = argparse.ArgumentParser()
ap.add_argument("bench", help="path of vireo-bench")
ap.add_argument("--size", default="", help="WxHxF (default 768x512x121; 576x64x73 with --dry-run-cpu)")
ap.add_argument("--repeat", type=int, default=3)
ap.add_argument("--seed", type=int, default=1234)
ap.add_argument("--work", default="")
ap.add_argument("--report", default="")
ap.add_argument("--dry-run-cpu", action="store_true", help="tiny models on the CPU: checks this script, measures nothing")
args = ap.parse_args()
DRY = args.dry_run_cpu
assert DRY or torch.cuda.is_available(), "bench gpu stages needs a CUDA device (or --dry-run-cpu)"
dev = torch.device("cpu" if DRY else "cuda")
W, H, F = (int(v) for v in (args.size or ("576x64x73" if DRY else "768x512x121")).split("x"))
assert W % 64 == 0 and H % 64 == 0 and (F - 1) % 8 == 0, "--size needs W, H multiples of 64 and F = 8k + 1"
t_start = time.perf_counter()


def log(msg: str) -> None:
    print(f"[{time.perf_counter() - t_start:6.1f}s] {msg}", flush=True)


# convert_ltx2_to_diffusers.py, get_ltx2_video_vae_config("2.3").
VAE_CONFIG = dict(
    in_channels=3, out_channels=3, latent_channels=128, block_out_channels=(256, 512, 1024, 1024),
    down_block_types=("LTX2VideoDownBlock3D",) * 4, decoder_block_out_channels=(256, 512, 512, 1024),
    layers_per_block=(4, 6, 4, 2, 2), decoder_layers_per_block=(4, 6, 4, 2, 2), spatio_temporal_scaling=(True,) * 4,
    decoder_spatio_temporal_scaling=(True,) * 4, decoder_inject_noise=(False,) * 5,
    downsample_type=("spatial", "temporal", "spatiotemporal", "spatiotemporal"),
    upsample_type=("spatiotemporal", "spatiotemporal", "temporal", "spatial"), upsample_residual=(False,) * 4,
    upsample_factor=(2, 2, 1, 2), timestep_conditioning=False, patch_size=4, patch_size_t=1, resnet_norm_eps=1e-6,
    encoder_causal=True, decoder_causal=False, encoder_spatial_padding_mode="zeros", decoder_spatial_padding_mode="zeros",
    spatial_compression_ratio=32, temporal_compression_ratio=8,
)
# The same file's 2.3 spatial x2 upsampler.
UPSAMPLER_CONFIG = dict(in_channels=128, mid_channels=1024, num_blocks_per_stage=4, dims=3, spatial_upsample=True,
                        temporal_upsample=False, rational_spatial_scale=2.0, use_rational_resampler=False)
if DRY:
    # The pipeline fixture's tiny 2.3 shapes (same block structure, 32x / 8x compression).
    VAE_CONFIG.update(latent_channels=8, block_out_channels=(8, 8, 16, 16), decoder_block_out_channels=(8, 16, 16, 32),
                      layers_per_block=(1, 1, 1, 1, 1), decoder_layers_per_block=(1, 1, 1, 1, 1))
    UPSAMPLER_CONFIG.update(in_channels=8, mid_channels=32, num_blocks_per_stage=1)
C = VAE_CONFIG["latent_channels"]
LF = (F - 1) // 8 + 1
CELLS_H, CELLS_W = H // 32, W // 32
TILED = CELLS_H > 16 or CELLS_W > 16
CHUNKED = LF > 8

torch.set_grad_enabled(False)
torch.manual_seed(0)
with dev:
    vae = AutoencoderKLLTX2Video(**VAE_CONFIG)
    up = LTX2LatentUpsamplerModel(**UPSAMPLER_CONFIG)
g = torch.Generator().manual_seed(5)
vae.latents_mean.copy_(torch.randn(C, generator=g) * 0.1)
vae.latents_std.copy_(0.5 + torch.rand(C, generator=g))
vae = vae.to(BF16).eval()
up = up.to(BF16).eval()
DEVICE_NAME = "cpu (dry run)" if DRY else torch.cuda.get_device_name(0)
enc_params = sum(p.numel() for n, p in vae.named_parameters() if n.startswith("encoder."))
up_params = sum(p.numel() for p in up.parameters())
log(f"models: LTX-2.3 video VAE encoder {enc_params / 1e6:.1f} M parameters (VAE {sum(p.numel() for p in vae.parameters()) / 1e6:.1f} M), "
    f"upsampler {up_params / 1e6:.1f} M, bf16 on {DEVICE_NAME}")

keep_work = bool(args.work)
work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="vireo-bench-stages-"))
work.mkdir(parents=True, exist_ok=True)
vae.save_pretrained(work / "vae", safe_serialization=True)
up.save_pretrained(work / "latent_upsampler", safe_serialization=True)
log(f"wrote the bf16 diffusers folders to {work}")

# The inputs Vireo draws (stagebench.cpp): CPU float32 generators seeded seed, seed + 1, seed + 2, seed + 3.
def uniform(shape, seed):
    return torch.rand(shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float32) * 2 - 1


still = uniform((1, 3, 1, H, W), args.seed).to(dev, BF16)
clip = uniform((1, 3, F, H, W), args.seed + 1).to(dev, BF16)
low = torch.randn((1, C, LF, CELLS_H // 2, CELLS_W // 2), generator=torch.Generator().manual_seed(args.seed + 2),
                  dtype=torch.float32).to(dev)
final = torch.randn((1, C, LF, CELLS_H, CELLS_W), generator=torch.Generator().manual_seed(args.seed + 3),
                    dtype=torch.float32).to(dev, BF16)
mean = vae.latents_mean.float().view(1, -1, 1, 1, 1).to(dev)
std = vae.latents_std.float().view(1, -1, 1, 1, 1).to(dev)
sf = float(vae.config.scaling_factor)


def encode(x):
    # LTX2ImageToVideoPipeline / LTX2ConditionPipeline: retrieve_latents(..., "argmax"), _normalize_latents.
    return (vae.encode(x).latent_dist.mode().float() - mean) * sf / std


def upsample(z):
    # LTX2LatentUpsamplePipeline._denormalize_latents, the model, LTX2Pipeline._normalize_latents.
    return (up((z * std / sf + mean).to(BF16)).float() - mean) * sf / std


def decode(z):
    # LTX2Pipeline: _denormalize_latents, vae.decode(latents, None) (no timestep conditioning in 2.3).
    return vae.decode((z.float() * std / sf + mean).to(BF16)).sample


def measure(fn, x) -> dict:
    """Median of --repeat after one warm-up; peak allocated above what was allocated before."""
    if not DRY:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    base = 0 if DRY else torch.cuda.memory_allocated()
    out = fn(x)
    times = []
    for _ in range(args.repeat):
        out = None
        if DRY:
            t0 = time.perf_counter()
            out = fn(x)
            times.append(time.perf_counter() - t0)
            continue
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        out = fn(x)
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / 1000.0)
    peak = None if DRY else torch.cuda.max_memory_allocated() - base
    times.sort()
    return {"median_seconds": times[len(times) // 2], "seconds": times, "peak_bytes": peak,
            "output_shape": list(out.shape), "finite": bool(torch.isfinite(out).all()), "output": out.float().cpu()}


diff = {}
vae.disable_tiling()
vae.use_framewise_decoding = False
diff["encode_still"] = measure(encode, still)
log(f"diffusers encode_still: {diff['encode_still']['median_seconds']:.4f} s")
if TILED:
    vae.enable_tiling(tile_sample_min_height=16 * 32, tile_sample_min_width=16 * 32,
                      tile_sample_stride_height=14 * 32, tile_sample_stride_width=14 * 32,
                      tile_sample_min_num_frames=7 * 8, tile_sample_stride_num_frames=6 * 8)
else:
    vae.tile_sample_min_num_frames, vae.tile_sample_stride_num_frames = 7 * 8, 6 * 8
# diffusers' encode reads the decoding flag for its temporal chunks.
vae.use_framewise_decoding = CHUNKED
diff["encode_clip"] = measure(encode, clip)
log(f"diffusers encode_clip: {diff['encode_clip']['median_seconds']:.4f} s "
    f"({'tiles 512/448 px' if TILED else 'whole frames'}, {'chunks 56/48 frames' if CHUNKED else 'all frames'})")
diff["upsample"] = measure(upsample, low)
log(f"diffusers upsample: {diff['upsample']['median_seconds']:.4f} s")
# enable_tiling()'s defaults spelled out: the encoder stage above changed the frame settings.
vae.enable_tiling(tile_sample_min_height=512, tile_sample_min_width=512, tile_sample_stride_height=448,
                  tile_sample_stride_width=448, tile_sample_min_num_frames=16, tile_sample_stride_num_frames=8)
vae.use_framewise_decoding = False
diff["decode"] = measure(decode, final)
dec_params = sum(p.numel() * p.element_size() for n, p in vae.named_parameters() if n.startswith("decoder."))
log(f"diffusers decode: {diff['decode']['median_seconds']:.4f} s (enable_tiling defaults, 512/448 px, all frames)")
del vae, up, still, clip, low, final, mean, std
if not DRY:
    torch.cuda.empty_cache()

out_file = work / "vireo_outputs.safetensors"
cmd = [args.bench, "stages", "--vae", str(work / "vae"), "--upsampler", str(work / "latent_upsampler"),
       "--size", f"{W}x{H}x{F}", "--device", dev.type, "--dtype", "bf16", "--repeat", str(args.repeat),
       "--seed", str(args.seed), "--out", str(out_file), "--json"]
log("running " + " ".join(cmd[1:]))
p = subprocess.run(cmd, capture_output=True, text=True)
vireo = None
error = None
if p.returncode != 0:
    error = (p.stderr or p.stdout).strip()[-2000:]
    log(f"vireo bench stages FAILED: {error}")
else:
    vireo = json.loads(p.stdout.strip().splitlines()[-1])
    outs = load_file(str(out_file))


def rel(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.double(), b.double()
    return float((a - b).norm() / b.norm().clamp_min(1e-30))


def gib(b):
    return "n/a" if b is None or b < 0 else f"{b / 2**30:.3f}"


def agreed_extent(cells: int) -> int:
    """Pixels from the start along one side where the decoders' tile layouts agree: up to the
    first tile diffusers starts that Vireo has no tile for (a sliver inside Vireo's last tile)."""
    tiled = CELLS_H > 16 or CELLS_W > 16  # diffusers' tiled_decode then tiles both sides
    theirs = list(range(0, cells, 14)) if tiled else [0]
    ours = [0] if cells <= 16 else [14 * k for k in range((cells - 16 + 13) // 14 + 1)]
    extra = [t for t in theirs if t not in ours]
    return 32 * (extra[0] if extra else cells)


GOAL_BYTES = 12 * 10**9  # issue #13: the VAE decode's peak under 12 GB at 768x512x121
AGREE_H, AGREE_W = agreed_extent(CELLS_H), agreed_extent(CELLS_W)


rows = {}
for name, d in diff.items():
    row = {"diffusers": {k: v for k, v in d.items() if k != "output"}}
    if vireo:
        v = next(s for s in vireo["stages"] if s["name"] == name)
        row["vireo"] = v
        row["time_ratio"] = v["median_seconds"] / d["median_seconds"]
        if d["peak_bytes"] and v["peak_bytes"] >= 0:
            row["peak_ratio"] = v["peak_bytes"] / d["peak_bytes"]
        row["rel_err"] = rel(outs[name], d["output"]) if name in outs and outs[name].shape == d["output"].shape else None
        if name == "decode" and row["rel_err"] is not None:
            a, b = outs[name].double(), d["output"].double()
            row["rel_err_whole"] = row["rel_err"]
            row["max_abs_err_whole"] = float((a - b).abs().max())
            a, b = a[..., :AGREE_H, :AGREE_W], b[..., :AGREE_H, :AGREE_W]
            row["rel_err"] = rel(a, b)
            row["max_abs_err"] = float((a - b).abs().max())
            row["agreed_region"] = [AGREE_H, AGREE_W]
    rows[name] = row

print(f"\n== bench gpu stages: LTX-2.3 video VAE encoder, x2 latent upsampler and VAE decode, {W}x{H}x{F}, bf16, median of {args.repeat}")
print(f"   device {DEVICE_NAME}, torch {torch.__version__}, diffusers {diffusers.__version__}"
      + (" (DRY RUN: tiny models on the CPU, figures mean nothing)" if DRY else ""))
if vireo:
    print(f"   vireo: encoder {vireo['encoder_resident_bytes'] / 2**30:.3f} GiB loaded in {vireo['encoder_load_seconds']:.2f} s, "
          f"upsampler {vireo['upsampler_resident_bytes'] / 2**30:.3f} GiB in {vireo['upsampler_load_seconds']:.2f} s, "
          f"decoder {vireo['decoder_resident_bytes'] / 2**30:.3f} GiB in {vireo['decoder_load_seconds']:.2f} s; "
          f"peak memory: {vireo['memory_method']}")
print(f"   {'stage':13s} {'vireo s':>9s} {'diffusers s':>11s} {'x':>6s} {'vireo GiB':>9s} {'diff GiB':>9s} {'x':>6s} "
      f"{'rel err':>9s}  layout (vireo)")
for name, r in rows.items():
    d = r["diffusers"]
    if "vireo" not in r:
        print(f"   {name:13s} {'FAILED':>9s} {d['median_seconds']:11.4f}")
        continue
    v = r["vireo"]
    pr = f"{r['peak_ratio']:6.2f}" if "peak_ratio" in r else f"{'n/a':>6s}"
    re_ = f"{r['rel_err']:9.2e}" if r["rel_err"] is not None else f"{'n/a':>9s}"
    ok = "" if v["finite"] and d["finite"] else "  NOT FINITE"
    print(f"   {name:13s} {v['median_seconds']:9.4f} {d['median_seconds']:11.4f} {r['time_ratio']:6.2f} "
          f"{gib(v['peak_bytes']):>9s} {gib(d['peak_bytes']):>9s} {pr} {re_}  {v['layout']}{ok}")
print("   x: vireo / diffusers in this run; GiB: peak allocated above the op's inputs and weights;"
      " rel err: |vireo - diffusers| / |diffusers| on the same inputs (the clip's tilings differ at the edges,"
      " decode's is where the tilings agree)")
dr = rows["decode"]
dd = dr["diffusers"]
goal = {"goal_bytes": GOAL_BYTES, "diffusers_decoder_weight_bytes": dec_params}
if dd["peak_bytes"] is not None:
    goal["diffusers_bytes"] = dec_params + dd["peak_bytes"]
if "vireo" in dr:
    dv = dr["vireo"]
    print(f"   decode time: vireo {dv['median_seconds']:.4f} s, diffusers {dd['median_seconds']:.4f} s, ratio vireo/diffusers "
          f"{dr['time_ratio']:.3f}")
    if dv["peak_bytes"] >= 0:
        goal["vireo_bytes"] = vireo["decoder_resident_bytes"] + dv["peak_bytes"]
    peak = (f"vireo {gib(dv['peak_bytes'])} GiB + {gib(vireo['decoder_resident_bytes'])} GiB of weights"
            + (f", diffusers {gib(dd['peak_bytes'])} GiB + {gib(dec_params)} GiB, ratio vireo/diffusers {dr['peak_ratio']:.3f}"
               if "peak_ratio" in dr else ", diffusers n/a"))
    if DRY:
        verdict = "not measured (dry run)"
    elif "vireo_bytes" in goal:
        goal["met"] = goal["vireo_bytes"] < GOAL_BYTES
        verdict = f"{'MET' if goal['met'] else 'NOT MET'} ({goal['vireo_bytes'] / 1e9:.2f} GB)"
    else:
        verdict = "unknown (no peak)"
    print(f"   decode peak: {peak}; goal weights + peak < 12 GB: {verdict}")
    if dr["rel_err"] is not None:
        print(f"   decode error: max abs {dr['max_abs_err']:.3e}, rel {dr['rel_err']:.3e} where the tilings agree "
              f"({AGREE_H} of {H} rows, {AGREE_W} of {W} columns); whole video max abs {dr['max_abs_err_whole']:.3e}, "
              f"rel {dr['rel_err_whole']:.3e}")
    else:
        print("   decode error: n/a (no vireo output of the right shape)")
else:
    print("   decode: vireo FAILED")
report = {"size": [W, H, F], "repeat": args.repeat, "seed": args.seed, "device": DEVICE_NAME, "dry_run": DRY,
          "torch": torch.__version__, "diffusers": diffusers.__version__, "vae_config": VAE_CONFIG,
          "upsampler_config": UPSAMPLER_CONFIG, "stages": rows, "decode_memory_goal": goal, "vireo": vireo, "vireo_error": error,
          "total_seconds": time.perf_counter() - t_start}
if args.report:
    Path(args.report).write_text(json.dumps(report, indent=2))
if not keep_work:
    shutil.rmtree(work, ignore_errors=True)
log("done")
sys.exit(0 if vireo and all(r["vireo"]["finite"] and r["diffusers"]["finite"] for r in rows.values()) else 1)
