"""LTX-2.5's diffusion video decoder, Vireo's C++ port against diffusers 0.42.1, in one run.

Usage: bench_diffdec.py VIREO_BENCH [--size WxHxF] [--device cpu|cuda] [--dtype f32|bf16]
                        [--repeat N] [--seed S] [--width-scale X] [--stage5-kernel T H W]
                        [--stage-kernels-small | --no-stage-kernels-small] [--work DIR] [--report FILE.json]

VIREO_BENCH is the built `vireo-bench` (e.g. build/app/vireo-bench).

The model: a random-weight LTX2VideoDiffusionDecoderModel whose structure is the real one but
narrower: head_dim 64, latent_channels 128, patch_size 4, t_emb_dim 384, x0 prediction in one step,
upsample strides (1,2,2) (2,1,1) (2,2,2) (2,2,2), channel reductions (2,2,1,2), depths
(4,6,4,2,8), and the real stage widths (2048,1024,512,512,256) times --width-scale. Every width
has to be a multiple of head_dim 64, so the narrowest allowed is 1/4 -> (512,256,128,128,64)
(the default; 1/8 would make stage 5 32 wide). Kernels: the real (3,7,7) (3,7,7) (3,5,5) (3,5,5)
and --stage5-kernel (real: 11 11 11) with --no-stage-kernels-small; by default
(--stage-kernels-small) (3,3,3) for stages 1-4 and (5,5,5) for stage 5 (an explicit
--stage5-kernel still wins). Weights: the parity fixture's build()
(tests/fixtures/make_ltx2_diffdec_fixtures.py: every tensor random, Linear weights at std
1/sqrt(fan_in) so activations stay O(1)), seed 2501; saved with save_pretrained in --dtype as a
diffusers folder (<work>/decoder/model_index.json + diffusion_decoder/) that both sides load.

What is measured, on the same inputs (stagebench.cpp benchDiffusionDecode):
  latent  torch.randn([1, 128, (F-1)//8+1, H//32, W//32], generator=Generator().manual_seed(seed+3)),
          CPU float32, denormalized x * latents_std / scaling_factor + latents_mean in float32, then
          cast to --dtype and moved to --device;
  decode  model.decode(z, generator=Generator().manual_seed(seed+4)) (a fresh CPU generator each run;
          the single x0 step's noise), with diffusers' enable_tiling() defaults (768/704 px, 80/56
          frames) only when the video exceeds a tile (F > 80 or H or W > 768), as Vireo does.
  Vireo:  `VIREO_BENCH stages --diffusion-decoder <folder> ... --json`, one warm-up then --repeat runs.
  diffusers: the same folder loaded with from_pretrained, its default attention processor
          (LTX2VideoVaeNeighborhoodAttnProcessor, FlexAttention; without torch.compile it runs eager and
          unfused, materialising the [N, N] scores of every attention: memory grows with the square of
          the stage-5 tokens F * H/4 * W/4, whatever the kernel), one warm-up then --repeat runs.
  Both report the median as sorted(times)[n // 2] (with --repeat 2 the slower run). Peak memory: on
  the CPU the growth of the peak resident set (VmHWM, reset through /proc/self/clear_refs) over the
  warm-up run above the resident set before it, a lower bound, as vireo-bench measures it; on CUDA
  the caching allocator's peak above what was allocated before the runs.
  The outputs (vireo's --out diffusion_decode against diffusers' last output) are compared: max and
  mean |diff|. Timing is reported, never asserted; the exit status is 0 when both sides ran and gave
  finite outputs of the same shape.

Default size 128x96x17 (latent 3x3x4, stage-5 grid 17x24x32 = 13056 tokens; H != W, so a
transposed axis cannot pass), chosen by trying on this project's 2-core, 24 GB CPU machine (torch's
2 threads, the default model: small kernels, f32). One diffusers decode each:
    128x96x17    13056 tokens    ~37 s   peak RSS growth ~2.3 GB   (Vireo ~1.2 s)
    128x128x17   17408 tokens    ~64 s                   ~3.9 GB
    192x128x17   26112 tokens   ~177 s                   ~8.7 GB   (over the ~8 GB budget)
128x128x17 also stays under the memory budget, but a whole run of it (--repeat 2: three diffusers
decodes) took 5.5 minutes when the machine was shared, too close to the few minutes a default run
should take; 128x96x17 takes about 2 minutes at --repeat 2. The real kernels cannot run at any of
these: stage 1's 7x7 window needs a latent at least 7 cells = 224 px across, stage 5's 11 needs
F >= 11 frames, and the smallest such size, 224x224x17, has 53312 stage-5 tokens: an 11.4 GB float32
score matrix per attention for diffusers on the CPU (far beyond the budget) and many minutes a run,
hence the small kernels by default. With the real kernels use --no-stage-kernels-small and a size of
at least 224x224x17 (e.g. on CUDA, where diffusers' eager flex materialises the same scores in GPU
memory). CPU timings on a shared 2-core machine are noisy: rerun before reading much into a ratio.
"""
import argparse
import json
import math
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures"))
import make_ltx2_diffdec_fixtures as fx  # noqa: E402  (sets the quiet/offline env for diffusers)

import diffusers  # noqa: E402
from diffusers.models.autoencoders.ltx2_diffusion_decoder import LTX2VideoDiffusionDecoderModel  # noqa: E402
from diffusers.utils import logging as diffusers_logging  # noqa: E402
from safetensors.torch import load_file  # noqa: E402

diffusers_logging.set_verbosity_error()
diffusers_logging.disable_progress_bar()

REAL_WIDTHS = (2048, 1024, 512, 512, 256)
REAL_KERNELS = ((3, 7, 7), (3, 7, 7), (3, 5, 5), (3, 5, 5))
REAL_STAGE5_KERNEL = (11, 11, 11)
SMALL_KERNELS = ((3, 3, 3),) * 4
SMALL_STAGE5_KERNEL = (5, 5, 5)
HEAD_DIM = 64
MODEL_SEED = 2501
DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16}

ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
ap.add_argument("bench", help="path of vireo-bench")
ap.add_argument("--size", default="128x96x17", help="WxHxF: W, H multiples of 32, F = 8k + 1 (default 128x96x17)")
ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
ap.add_argument("--dtype", default="", choices=("", "f32", "bf16"), help="default f32 on cpu, bf16 on cuda")
ap.add_argument("--repeat", type=int, default=3, help="timed runs after one warm-up (default 3)")
ap.add_argument("--seed", type=int, default=1234)
ap.add_argument("--width-scale", type=float, default=0.25,
                help="stage widths = (2048,1024,512,512,256) x this; each must be a multiple of 64 (default 1/4)")
ap.add_argument("--stage-kernels-small", action=argparse.BooleanOptionalAction, default=True,
                help="(3,3,3) kernels for stages 1-4 and (5,5,5) for stage 5 (default); "
                     "--no-stage-kernels-small: the real (3,7,7) (3,7,7) (3,5,5) (3,5,5) and 11 11 11")
ap.add_argument("--stage5-kernel", type=int, nargs=3, default=None, metavar=("T", "H", "W"),
                help="stage-5 kernel (default 11 11 11, or 5 5 5 with the small kernels)")
ap.add_argument("--work", default="", help="work folder, kept (default: a temporary one, removed)")
ap.add_argument("--report", default="", help="write everything as JSON here")
args = ap.parse_args()
t_start = time.perf_counter()


def log(msg: str) -> None:
    print(f"[{time.perf_counter() - t_start:6.1f}s] {msg}", flush=True)


def fail(msg: str) -> None:
    print(f"bench_diffdec: {msg}", file=sys.stderr)
    sys.exit(2)


if args.device == "cuda" and not torch.cuda.is_available():
    fail("--device cuda, but torch sees no CUDA device")
if args.repeat < 1:
    fail("--repeat must be at least 1")
dev = torch.device(args.device)
dtype_name = args.dtype or ("bf16" if dev.type == "cuda" else "f32")
dtype = DTYPES[dtype_name]
try:
    W, H, F = (int(v) for v in args.size.split("x"))
except ValueError:
    fail(f"--size is WxHxF, e.g. 128x128x17, not {args.size!r}")
if W % 32 or H % 32 or (F - 1) % 8 or min(W, H, F) < 1:
    fail(f"--size {args.size}: W and H must be multiples of 32 and F = 8k + 1")

widths = tuple(w * args.width_scale for w in REAL_WIDTHS)
if any(w != int(w) or int(w) % HEAD_DIM or w <= 0 for w in widths):
    fail(f"--width-scale {args.width_scale} gives stage widths {widths}: each must be a positive multiple of "
         f"head_dim {HEAD_DIM} (the narrowest allowed scale is 0.25: (512, 256, 128, 128, 64))")
widths = tuple(int(w) for w in widths)
kernels = SMALL_KERNELS if args.stage_kernels_small else REAL_KERNELS
stage5_kernel = tuple(args.stage5_kernel) if args.stage5_kernel else (
    SMALL_STAGE5_KERNEL if args.stage_kernels_small else REAL_STAGE5_KERNEL)
STRIDES = ((1, 2, 2), (2, 1, 1), (2, 2, 2), (2, 2, 2))
CONFIG = dict(
    latent_channels=128, out_channels=3, patch_size=4, decoder_head_dim=HEAD_DIM,
    decoder_stage_channels=widths, decoder_stage_depths=(4, 6, 4, 2, 8),
    decoder_stage_kernels=kernels, decoder_upsample_strides=STRIDES,
    decoder_upsample_channel_reductions=(2, 2, 1, 2), decoder_stage5_kernel=stage5_kernel,
    decoder_t_emb_dim=384, decoder_timestep_scale_multiplier=1000.0,
    decoder_model_output_type="x0", decoder_num_inference_steps=1,
    spatial_compression_ratio=32, temporal_compression_ratio=8, scaling_factor=1.0,
)


def stage_grids() -> list[tuple[int, int, int]]:
    """The (T, H, W) token grid of each of the five stages for the untiled decode (the decoder's own
    arithmetic: trailing ghost latent frames, pixel-shuffle upsamples dropping the duplicate leading
    frame of a temporal stride, the ghosts cropped after stage 4)."""
    ghost = (kernels[0][0] // 2) * 2
    t, h, w = (F - 1) // 8 + 1 + ghost, H // 32, W // 32
    grids = []
    for st, sh, sw in STRIDES:
        grids.append((t, h, w))
        t, h, w = t * st - (1 if st == 2 else 0), h * sh, w * sw
    grids.append((t - ghost * 8, h, w))
    return grids


GRIDS = stage_grids()
for i, (grid, kernel) in enumerate(zip(GRIDS, (*kernels, stage5_kernel))):
    if any(n < k for n, k in zip(grid, kernel)):
        fail(f"--size {args.size}: stage {i + 1}'s grid {grid} is smaller than its kernel {kernel} "
             "(diffusers refuses it); the real kernels need at least 224x224x17, the small ones 96x96x9")
TILED = F > 80 or H > 768 or W > 768  # the C++ rule (enable_tiling()'s defaults, in pixels)
STAGE5_TOKENS = math.prod(GRIDS[-1])
STAGE5_HEADS = widths[-1] // HEAD_DIM
torch.set_grad_enabled(False)


# ----------------------------------------------------------------------------- memory helpers

def proc_status_bytes(field: str) -> int:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return -1


def reset_peak_rss() -> bool:
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def gib(b) -> str:
    return "n/a" if b is None or b < 0 else f"{b / 2**30:.3f}"


# ----------------------------------------------------------------------------- the model

keep_work = bool(args.work)
work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="vireo-bench-diffdec-"))
work.mkdir(parents=True, exist_ok=True)
folder = work / "decoder"
model = fx.build(CONFIG, MODEL_SEED).to(dtype)
n_params = sum(p.numel() for p in model.parameters())
model.save_pretrained(folder / "diffusion_decoder", safe_serialization=True)
(folder / "model_index.json").write_text(json.dumps({
    "_class_name": "LTX2VideoDiffusionDecodePipeline", "_diffusers_version": diffusers.__version__,
    "diffusion_decoder": ["diffusers", "LTX2VideoDiffusionDecoderModel"]}, indent=2) + "\n")
del model
log(f"model: widths {widths} (x{args.width_scale:g}), depths {CONFIG['decoder_stage_depths']}, kernels "
    f"{kernels} + stage 5 {stage5_kernel}, {n_params / 1e6:.1f} M parameters, {dtype_name}, saved to {folder}")
log(f"size {W}x{H}x{F}: stage grids {GRIDS}; stage 5: {STAGE5_TOKENS} tokens x {STAGE5_HEADS} head(s), "
    f"a dense score matrix is {STAGE5_HEADS * STAGE5_TOKENS ** 2 * 4 / 1e9:.2f} GB in float32; "
    f"{'tiled (768/704 px, 80/56 frames)' if TILED else 'whole (no tiling)'}")

# ----------------------------------------------------------------------------- vireo

vireo_out = work / "vireo.safetensors"
cmd = [args.bench, "stages", "--diffusion-decoder", str(folder), "--size", f"{W}x{H}x{F}", "--device", args.device,
       "--dtype", dtype_name, "--repeat", str(args.repeat), "--seed", str(args.seed), "--out", str(vireo_out), "--json"]
log("running " + " ".join(cmd))
t0 = time.perf_counter()
p = subprocess.run(cmd, capture_output=True, text=True)
vireo_wall = time.perf_counter() - t0
vireo, vireo_row, vireo_error, vireo_output = None, None, None, None
if p.returncode != 0:
    vireo_error = (p.stderr or p.stdout).strip()[-2000:]
    log(f"vireo-bench FAILED (exit {p.returncode}): {vireo_error}")
else:
    vireo = json.loads(p.stdout.strip().splitlines()[-1])
    vireo_row = (vireo.get("stages") or vireo.get("rows"))[0]
    vireo_output = load_file(str(vireo_out))["diffusion_decode"]
    log(f"vireo: median {vireo_row['median_seconds']:.3f} s of {vireo_row['seconds']}, layout {vireo_row['layout']}, "
        f"peak {gib(vireo_row['peak_bytes'])} GiB ({vireo['device']}; {vireo_wall:.1f} s with its load)")
    if (vireo_row["layout"] != "whole") != TILED:
        log(f"WARNING: vireo's layout {vireo_row['layout']!r} disagrees with this script's tiling rule ({TILED})")

# ----------------------------------------------------------------------------- diffusers

t0 = time.perf_counter()
model = LTX2VideoDiffusionDecoderModel.from_pretrained(folder / "diffusion_decoder", torch_dtype=dtype).to(dev).eval()
load_seconds = time.perf_counter() - t0
processor = type(model.decoder.diff_blocks[0].attn.processor).__name__
if TILED:
    model.enable_tiling()
latent = torch.randn((1, 128, (F - 1) // 8 + 1, H // 32, W // 32),
                     generator=torch.Generator().manual_seed(args.seed + 3), dtype=torch.float32)
mean = model.latents_mean.float().cpu().view(1, -1, 1, 1, 1)
std = model.latents_std.float().cpu().view(1, -1, 1, 1, 1)
z = (latent * std / model.config.scaling_factor + mean).to(dtype).to(dev)


def sync() -> None:
    if dev.type == "cuda":
        torch.cuda.synchronize()


def decode() -> torch.Tensor:
    return model.decode(z, generator=torch.Generator().manual_seed(args.seed + 4)).sample


log(f"diffusers {diffusers.__version__}: loaded in {load_seconds:.2f} s, attention {processor}, torch "
    f"{torch.__version__} ({torch.get_num_threads()} threads); warm-up + {args.repeat} runs")
sync()
peak_bytes, peak_total, memory_method = -1, -1, ""
maxrss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
if dev.type == "cuda":
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    memory_method = "CUDA caching allocator, peak above the allocation before the runs"
elif reset_peak_rss():
    base = proc_status_bytes("VmRSS")
    memory_method = "peak RSS growth over the warm-up run (VmHWM after clear_refs; lower bound)"
else:
    base = -1
times, out = [], None
for i in range(-1, args.repeat):
    out = None
    sync()
    t0 = time.perf_counter()
    out = decode()
    sync()
    s = time.perf_counter() - t0
    if i >= 0:
        times.append(s)
        continue
    log(f"diffusers warm-up: {s:.3f} s")
    if dev.type == "cpu":
        if base >= 0:
            peak_total = proc_status_bytes("VmHWM")
            peak_bytes = max(0, peak_total - base) if peak_total >= 0 else -1
        else:  # no clear_refs: the process high-water mark's growth (0 when an earlier peak was higher)
            peak_total = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
            peak_bytes = peak_total - maxrss_before
            memory_method = "growth of ru_maxrss over the warm-up run (lower bound)"
if dev.type == "cuda":
    peak_total = torch.cuda.max_memory_allocated()
    peak_bytes = peak_total - base
diff_median = sorted(times)[len(times) // 2]
diff_output = out.float().cpu()
log(f"diffusers: median {diff_median:.3f} s of {[round(t, 3) for t in times]}, peak {gib(peak_bytes)} GiB")

# ----------------------------------------------------------------------------- compare

cmp = {}
ratio = None
if vireo_output is not None:
    if tuple(vireo_output.shape) == tuple(diff_output.shape):
        d = (vireo_output.double() - diff_output.double()).abs()
        cmp = {"max_abs": float(d.max()), "mean_abs": float(d.mean()),
               "rel": float((vireo_output.double() - diff_output.double()).norm() / diff_output.double().norm().clamp_min(1e-30)),
               "diffusers_abs_max": float(diff_output.abs().max()), "diffusers_abs_mean": float(diff_output.abs().mean())}
    else:
        cmp = {"shape_mismatch": [list(vireo_output.shape), list(diff_output.shape)]}
    ratio = diff_median / vireo_row["median_seconds"] if vireo_row["median_seconds"] > 0 else None
finite = bool(torch.isfinite(diff_output).all()) and vireo_row is not None and bool(vireo_row["finite"])

device_name = torch.cuda.get_device_name(0) if dev.type == "cuda" else f"cpu ({torch.get_num_threads()} torch threads)"
print(f"\n== bench diffdec: LTX-2.5 diffusion video decoder, {W}x{H}x{F}, {dtype_name} on {device_name}, "
      f"median of {args.repeat} after a warm-up")
print(f"   model: widths {widths} (real x{args.width_scale:g}), depths {CONFIG['decoder_stage_depths']}, head_dim {HEAD_DIM}, "
      f"kernels {kernels} + stage 5 {stage5_kernel}{' (small)' if args.stage_kernels_small else ''}, "
      f"{n_params / 1e6:.1f} M parameters, random weights")
print(f"   latent {[1, 128, (F - 1) // 8 + 1, H // 32, W // 32]} -> video {[1, 3, F, H, W]}, stage-5 grid {GRIDS[-1]} "
      f"({STAGE5_TOKENS} tokens), {'tiled' if TILED else 'untiled'}; diffusers attention: {processor}")
print(f"   {'':10s} {'median s':>10s} {'runs s':>24s} {'peak GiB':>9s}  memory")
if vireo_row:
    print(f"   {'vireo':10s} {vireo_row['median_seconds']:10.3f} {str([round(s, 3) for s in vireo_row['seconds']]):>24s} "
          f"{gib(vireo_row['peak_bytes']):>9s}  {vireo['memory_method']}")
else:
    print(f"   {'vireo':10s} {'FAILED':>10s}")
print(f"   {'diffusers':10s} {diff_median:10.3f} {str([round(s, 3) for s in times]):>24s} {gib(peak_bytes):>9s}  {memory_method}")
if ratio is not None:
    print(f"   Vireo is {ratio:.1f}x faster (diffusers {diff_median:.3f} s / vireo {vireo_row['median_seconds']:.3f} s)")
if "max_abs" in cmp:
    print(f"   output difference: max |vireo - diffusers| {cmp['max_abs']:.3e}, mean {cmp['mean_abs']:.3e}, rel {cmp['rel']:.3e} "
          f"(diffusers |max| {cmp['diffusers_abs_max']:.3f}, mean |x| {cmp['diffusers_abs_mean']:.3f})")
elif cmp:
    print(f"   output shapes differ: vireo {cmp['shape_mismatch'][0]}, diffusers {cmp['shape_mismatch'][1]}")
if not finite:
    print("   NOT FINITE output" if vireo_row else "   vireo produced no output")
total = time.perf_counter() - t_start
print(f"   whole script: {total:.1f} s")

report = {
    "bench": "diffdec", "size": [W, H, F], "device": args.device, "device_name": device_name, "dtype": dtype_name,
    "repeat": args.repeat, "seed": args.seed, "model_seed": MODEL_SEED, "torch": torch.__version__,
    "torch_threads": torch.get_num_threads(), "diffusers_version": diffusers.__version__,
    "config": {k: (list(map(list, v)) if k in ("decoder_stage_kernels", "decoder_upsample_strides")
                   else list(v) if isinstance(v, tuple) else v) for k, v in CONFIG.items()},
    "width_scale": args.width_scale, "stage_kernels_small": args.stage_kernels_small, "parameters": n_params,
    "latent_shape": [1, 128, (F - 1) // 8 + 1, H // 32, W // 32], "video_shape": [1, 3, F, H, W],
    "stage_grids": [list(g) for g in GRIDS], "stage5_tokens": STAGE5_TOKENS, "tiled": TILED,
    "vireo": {"command": cmd, "wall_seconds": vireo_wall, "error": vireo_error, "json": vireo,
              "median_seconds": vireo_row["median_seconds"] if vireo_row else None,
              "seconds": vireo_row["seconds"] if vireo_row else None,
              "peak_bytes": vireo_row["peak_bytes"] if vireo_row else None,
              "peak_total_bytes": vireo_row["peak_total_bytes"] if vireo_row else None},
    "diffusers": {"attention_processor": processor, "load_seconds": load_seconds, "median_seconds": diff_median,
                  "seconds": times, "peak_bytes": peak_bytes, "peak_total_bytes": peak_total,
                  "memory_method": memory_method, "finite": bool(torch.isfinite(diff_output).all())},
    "speedup_diffusers_over_vireo": ratio, "output_difference": cmp, "finite": finite, "total_seconds": total,
}
if args.report:
    Path(args.report).write_text(json.dumps(report, indent=2) + "\n")
    log(f"report written to {args.report}")
if not keep_work:
    shutil.rmtree(work, ignore_errors=True)
sys.exit(0 if finite and "max_abs" in cmp else 1)
