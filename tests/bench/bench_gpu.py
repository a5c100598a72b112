"""`vireo-bench gpu`: the GPU benchmark, in one run on a CUDA machine.

The LTX-2.3 (or, with --version 2.5, LTX-2.5) transformer at its real width (32x128 video heads, 32x64 audio heads, 4096/2048
text context) with random weights and --layers of its 48 layers, on the anchor workload
768x512x121 (6144 video tokens, 126 audio tokens, 1024 text tokens), one forward:
  * diffusers eager bf16 (and, with --compile, under torch.compile) on the device;
  * Vireo (vireo-cli dit-forward) on the same weights and inputs: bf16 from a diffusers
    folder, Lightricks scaled FP8 with input scales calibrated on this workload, and a Q4_K
    GGUF (random blocks: timing only), for each attention kernel asked for;
then the CUDA dequantization ops against the device copy (vireo-bench gpu-dequant) and an
unfused LoRA's cost (vireo-bench lora); then Lightricks' dev two-stage recipe beside the
distilled one: one guided step of stage 1 at half size (768x512 -> 384x256: the four branches
negative, positive, STG on block 1 and modality-isolated) as diffusers' LTX2Pipeline runs them
(a batch-2 forward, then one batch-1 forward per branch) and as Vireo does (one 4-row forward),
and the rank-384 distilled LoRA's cost on the full-size forward of stage 2.
Each figure is a median over --repeat forwards timed with CUDA events (diffusers) or a
synchronized clock (Vireo), after warm-up; ratios are against diffusers' eager time in the
same run. The 8-step distilled denoise at 48 layers is extrapolated as t * 48/layers * 8; the recipes at
48 layers as distilled 8 half-size + 3 full-size forwards, dev 30 guided half-size steps + 3 full-size
forwards with the LoRA (half-size forwards timed for the distilled one as the guided step's single row).

LTX-2.5 differs in its blocks (no video FFN bias) and its input (the keyframe embedding, on the
first latent frame's tokens here, as a DFR pass marks them).

--grid FxHxW runs the same at another latent grid: `--version 2.5 --grid 16x47x73` is one tile of LTX-2.5's 4K third
stage (3840x2176x121: 68 x 120 cells split 2 x 2, overlapping), 4 of which make one of its 3 steps.

Usage: bench_gpu.py VIREO_CLI [--bench VIREO_BENCH] [--version 2.3|2.5] [--layers 4] [--repeat 10] [--grid FxHxW]
                              [--attention default,flash,flash3] [--compile] [--work DIR] [--report FILE.json]
VIREO_BENCH is vireo-bench, by default the one beside VIREO_CLI (both are built in app/).
Needs torch with CUDA, diffusers 0.42.1 and gguf (carry them as wheels to the GPU machine).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "fixtures"))
import make_model_fixtures as mm  # noqa: E402  (key mapping to ltx-core names, GGUF type mix; quiets diffusers)

import diffusers  # noqa: E402
import gguf  # noqa: E402
from diffusers.models.transformers.transformer_ltx2 import LTX2VideoTransformer3DModel  # noqa: E402
from gguf import GGMLQuantizationType as Q  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402

BF16 = torch.bfloat16
F, H, W = 16, 16, 24  # 121 frames at 768x512 -> 16 x 16 x 24 latent cells
AUDIO_TOKENS, TEXT_TOKENS, FPS, T = 126, 1024, 24.0, 700.0

ap = argparse.ArgumentParser()
ap.add_argument("cli", help="path of vireo-cli")
ap.add_argument("--bench", default="", help="path of vireo-bench (default: beside vireo-cli)")
ap.add_argument("--version", choices=("2.3", "2.5"), default="2.3")
ap.add_argument("--layers", type=int, default=4)
ap.add_argument("--repeat", type=int, default=10)
ap.add_argument("--attention", default="default,flash,flash3")
ap.add_argument("--compile", action="store_true")
ap.add_argument("--skip", default="", help="comma list of: fp8, q4k, dequant, lora, recipes")
ap.add_argument("--work", default="")
ap.add_argument("--report", default="")
ap.add_argument("--dry-run-cpu", action="store_true", help="a tiny model on the CPU: checks this script, measures nothing")
ap.add_argument("--grid", default="", help="the latent cells FxHxW of the forward instead of 768x512x121's 16x16x24 "
                "(LTX-2.5's 4K third stage at 121 frames runs tiles of 16x47x73)")
args = ap.parse_args()
if args.grid:
    try:
        F, H, W = (int(x) for x in args.grid.lower().split("x"))
    except ValueError:
        ap.error(f"--grid {args.grid!r}: give latent cells as FxHxW, e.g. 16x47x73")
    if not (0 < F <= 64 and 0 < H <= 256 and 0 < W <= 256):
        ap.error(f"--grid {args.grid}: F up to 64, H and W up to 256 latent cells")
BENCH = args.bench or str(Path(args.cli).with_name("vireo-bench"))
skip = set(filter(None, args.skip.split(",")))
DRY = args.dry_run_cpu
assert DRY or torch.cuda.is_available(), "bench gpu needs a CUDA device"
dev = torch.device("cpu" if DRY else "cuda")
t_start = time.perf_counter()


def log(msg: str) -> None:
    print(f"[{time.perf_counter() - t_start:6.1f}s] {msg}", flush=True)


CONFIG = dict(
    in_channels=128, out_channels=128, patch_size=1, patch_size_t=1,
    num_attention_heads=32, attention_head_dim=128, cross_attention_dim=4096,
    audio_in_channels=128, audio_out_channels=128,
    audio_num_attention_heads=32, audio_attention_head_dim=64, audio_cross_attention_dim=2048,
    num_layers=args.layers, caption_channels=3840,
    gated_attn=True, cross_attn_mod=True, audio_gated_attn=True, audio_cross_attn_mod=True,
    use_prompt_embeddings=False, perturbed_attn=True, rope_type="split", rope_double_precision=True,
)
if args.version == "2.5":  # transformer_ltx2.py's LTX-2.5 options
    CONFIG.update(ff_bias=False, use_keyframes_abs_pos_embedding=True)
if DRY:
    F, H, W, AUDIO_TOKENS, TEXT_TOKENS = 2, 4, 8, 10, 16
    CONFIG.update(num_attention_heads=4, attention_head_dim=64, cross_attention_dim=256, audio_num_attention_heads=4,
                  audio_attention_head_dim=64, audio_cross_attention_dim=256)


def cuda_median(fn, repeat: int, warmup: int = 3) -> float:
    for _ in range(warmup):
        fn()
    if DRY:
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        return sorted(times)[len(times) // 2]
    times = []
    for _ in range(repeat):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / 1000.0)
    times.sort()
    return times[len(times) // 2]


def rel(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.double().cpu(), b.double().cpu()
    return float((a - b).norm() / b.norm().clamp_min(1e-30))


torch.set_grad_enabled(False)
torch.manual_seed(0)
with dev:
    model = LTX2VideoTransformer3DModel(**CONFIG)
model = model.to(BF16).eval()
g = torch.Generator(device=dev).manual_seed(23)
for name, t in sorted(model.state_dict(keep_vars=True).items()):
    if not t.is_floating_point():
        continue
    noise = torch.randn(t.shape, generator=g, device=dev, dtype=torch.float32) * 0.02
    if name.endswith(("norm_q.weight", "norm_k.weight")):
        noise = 1.0 + noise
    t.data.copy_(noise.to(t.dtype))
params = sum(p.numel() for p in model.parameters())
DEVICE_NAME = "cpu (dry run)" if DRY else torch.cuda.get_device_name(0)
log(f"model: LTX-{args.version} width, {args.layers} layers, {params / 1e9:.2f} B parameters, bf16 on {DEVICE_NAME}")

gi = torch.Generator(device=dev).manual_seed(1234)
inputs = dict(
    hidden_states=torch.randn(1, F * H * W, 128, generator=gi, device=dev).to(BF16),
    audio_hidden_states=torch.randn(1, AUDIO_TOKENS, 128, generator=gi, device=dev).to(BF16),
    encoder_hidden_states=torch.randn(1, TEXT_TOKENS, CONFIG["cross_attention_dim"], generator=gi, device=dev).to(BF16),
    audio_encoder_hidden_states=torch.randn(1, TEXT_TOKENS, CONFIG["audio_cross_attention_dim"], generator=gi,
                                            device=dev).to(BF16),
    timestep=torch.tensor([T], device=dev), sigma=torch.tensor([T], device=dev),
    encoder_attention_mask=torch.ones(1, TEXT_TOKENS, device=dev),
    audio_encoder_attention_mask=torch.ones(1, TEXT_TOKENS, device=dev),
)
if args.version == "2.5":
    keyframes = torch.zeros(1, F * H * W, 1, device=dev)
    keyframes[:, : H * W] = 1.0  # the causal first frame
    inputs["video_keyframes_mask"] = keyframes


def forward(m=model):
    return m(**inputs, num_frames=F, height=H, width=W, fps=FPS, audio_num_frames=AUDIO_TOKENS, return_dict=False)


# Calibrate FP8 input scales on this workload (what a calibrated Lightricks file carries).
amax: dict[str, float] = {}
hooks = []
for n, m in model.named_modules():
    if isinstance(m, torch.nn.Linear) and n.startswith("transformer_blocks."):
        hooks.append(m.register_forward_pre_hook(
            lambda mod, inp, n=n: amax.__setitem__(n, max(amax.get(n, 0.0), float(inp[0].float().abs().max())))))
video_ref, audio_ref = (o.float().cpu() for o in forward())
for h in hooks:
    h.remove()

if not DRY:
    torch.cuda.reset_peak_memory_stats()
base_mem = 0 if DRY else torch.cuda.memory_allocated()
eager_s = cuda_median(forward, args.repeat)
eager_peak = 0 if DRY else torch.cuda.max_memory_allocated() - base_mem
log(f"diffusers eager: {eager_s * 1e3:.2f} ms, activation peak {eager_peak / 2**30:.2f} GiB")
compiled_s = None
work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="vireo-bench-gpu-"))
work.mkdir(parents=True, exist_ok=True)
pipe = work / "pipe"
model.save_pretrained(pipe / "transformer", safe_serialization=True)
mm.write_json(pipe / "model_index.json", {"_class_name": "LTX2Pipeline", "_diffusers_version": diffusers.__version__,
                                          "transformer": ["diffusers", "LTX2VideoTransformer3DModel"]})
io = {k: v.cpu().contiguous() for k, v in inputs.items()}
io["sizes"] = torch.tensor([F, H, W, AUDIO_TOKENS], dtype=torch.int64)
io["fps"] = torch.tensor([FPS])
save_file(io, str(work / "inputs.safetensors"))
core = {mm.DIT + mm.dit_key_to_core(k): v.detach() for k, v in model.state_dict().items()}
log(f"wrote the bf16 diffusers folder and the inputs to {work}")

files = {"bf16": pipe}
if "fp8" not in skip:
    targets = {mm.DIT + mm.dit_key_to_core(n + ".weight"): n for n in amax}
    sd = {}
    for name, v in core.items():
        if name in targets:
            w = v.float()
            scale = (w.abs().max().clamp(min=1e-12) / 448.0).reshape(())
            base = name[: -len(".weight")]
            sd[name] = (w / scale).clamp(-448, 448).to(torch.float8_e4m3fn).cpu()
            sd[base + ".weight_scale"] = scale.cpu()
            sd[base + ".input_scale"] = torch.tensor(max(amax[targets[name]], 1e-6) / 448.0).reshape(())
        else:
            sd[name] = v.to(BF16).cpu().contiguous()
    save_file(sd, str(work / "fp8.safetensors"))
    files["fp8"] = work / "fp8.safetensors"
    log(f"wrote Lightricks-style scaled FP8 ({len(targets)} block linears, calibrated input scales)")
if "q4k" not in skip:
    writer = gguf.GGUFWriter(str(work / "q4k.gguf"), "ltxv")
    writer.add_quantization_version(gguf.GGML_QUANT_VERSION)
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_Q4_K_M)
    gq = torch.Generator(device=dev).manual_seed(99)
    for key, v in sorted(core.items()):
        name = key[len(mm.DIT):]
        qt = mm.gguf_tensor_type(name, tuple(v.shape))
        if qt in (Q.Q4_K, Q.Q6_K):
            bpb, scales = (144, (0, 2)) if qt == Q.Q4_K else (210, (208,))
            rows, cols = v.shape[0], v.shape[-1]
            blocks = torch.randint(0, 256, (rows * cols // 256, bpb), generator=gq, device=dev, dtype=torch.uint8)
            for off in scales:  # small finite fp16 scales, as real data has
                s = (torch.rand(blocks.shape[0], generator=gq, device=dev) * 9e-5 + 1e-5).to(torch.float16)
                blocks[:, off:off + 2] = s.view(torch.uint8).view(-1, 2)
            writer.add_tensor(name, blocks.cpu().numpy().reshape(rows, -1), raw_dtype=qt)
        elif qt == Q.F32:
            writer.add_tensor(name, v.float().cpu().numpy())
        else:
            writer.add_tensor(name, gguf.quants.quantize(v.float().cpu().numpy(), qt), raw_dtype=qt)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    files["q4k"] = work / "q4k.gguf"
    log("wrote a Q4_K_M-mix GGUF (random quant blocks: timing only)")
del core
model.cpu() if args.compile else None
if not DRY:
    torch.cuda.empty_cache()


def kernel_category(name: str) -> str:
    n = name.lower()
    if any(k in n for k in ("flash", "fmha", "attention", "sdpa", "cudnn_generated")):
        return "attention"
    if any(k in n for k in ("gemm", "xmma", "cutlass", "nvjet", "sm90", "cublas", "matmul")):
        return "gemm"
    if "vireo" in n or any(k in n for k in ("rmsnormmodulate", "rmsnormrope", "quantizefp8", "dequantize")):
        return "vireo fused"
    if "memcpy" in n or "memset" in n:
        return "copy/set"
    return "other elementwise"


def vireo(path: Path, attention: str, fast_accum: bool = False, profile: bool = False, graphs: bool = False,
          fused: bool = True, fp8_attention: bool = True) -> dict:
    out = work / "out.safetensors"
    cmd = [args.cli, "dit-forward", "--model", str(path), "--inputs", str(work / "inputs.safetensors"), "--out", str(out),
           "--device", dev.type, "--dtype", "bf16", "--repeat", str(args.repeat + 1), "--attention", attention, "--json"]
    if fast_accum:
        cmd.append("--fp8-fast-accum")
    if profile:
        cmd.append("--profile")
    if graphs:
        cmd.append("--graphs")
    env = dict(os.environ)
    if not fused:
        env["VIREO_FUSED_KERNELS"] = "0"  # the torch compositions the fused kernels replace
    if not fp8_attention:
        env["VIREO_FP8_ATTENTION"] = "0"  # an FP8 checkpoint's attention in bf16, as before FP8 attention
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        return {"error": (p.stderr or p.stdout).strip()[-2000:]}
    r = json.loads(p.stdout.strip().splitlines()[-1])
    o = load_file(str(out))
    r["rel_video"] = rel(o["sample"], video_ref)
    r["rel_audio"] = rel(o["audio_sample"], audio_ref)
    if r.get("kernels"):
        cats: dict[str, float] = {}
        for k in r["kernels"]:
            cats[kernel_category(k["name"])] = cats.get(kernel_category(k["name"]), 0.0) + k["ms"]
        r["kernel_categories_ms"] = cats
        print(f"   kernels of one forward ({path.name}, {attention}{', fast accum' if fast_accum else ''}): "
              + ", ".join(f"{c} {v:.2f} ms" for c, v in sorted(cats.items(), key=lambda kv: -kv[1])))
        for k in r["kernels"][:18]:
            print(f"     {k['ms']:7.3f} ms {k['calls']:4d}x  {k['name'][:110]}")
        print("   ATen ops dispatched (calls, host ms): " + ", ".join(
            f"{o['name'][6:]} {o['calls']} {o['host_ms']:.1f}" for o in r.get("ops", [])[:24]))
    return r


results = {}
kernels = [k for k in args.attention.split(",") if k]
for kind, path in files.items():
    for att in kernels if kind == "bf16" else kernels[:1]:
        key = f"{kind}/{att}"
        first = kind == "bf16" and att == kernels[0]
        results[key] = vireo(path, att, profile=first, graphs=first)
        r = results[key]
        if "error" in r:
            log(f"vireo {key}: FAILED {r['error'][:600]}")
            continue
        if "cuda_graphs" in r:
            g = r["cuda_graphs"]
            log(f"vireo {key} CUDA graphs ({g['summary']}): median {g['median_seconds'] * 1e3:.2f} ms, eager / graphed "
                f"{g['eager_over_graphed']:.3f}, outputs differ by at most {g['max_abs_difference']:.3g}")
        log(f"vireo {key}: median {r['median_seconds'] * 1e3:.2f} ms ({r['median_seconds'] / eager_s:.3f}x diffusers eager), "
            f"peak {r['peak_bytes'] / 2**30:.2f} GiB, resident {r['resident_bytes'] / 2**30:.2f} GiB, "
            f"rel err video {r['rel_video']:.2e} audio {r['rel_audio']:.2e}; paths {r.get('matmul_paths')}")
if "bf16" in files and "error" not in results.get(f"bf16/{kernels[0]}", {"error": 1}):
    # What the fused kernels gain: the same forward with their torch compositions, same run.
    fused_r = results[f"bf16/{kernels[0]}"]
    r = results["bf16/unfused"] = vireo(files["bf16"], kernels[0], fused=False)
    if "error" in r:
        log(f"vireo bf16/unfused: FAILED {r['error'][:600]}")
    else:
        assert r.get("fused_kernels") is False, "VIREO_FUSED_KERNELS=0 did not reach vireo-cli"
        r["fused_over_unfused"] = fused_r["median_seconds"] / r["median_seconds"]
        log(f"vireo bf16 without the fused kernels: median {r['median_seconds'] * 1e3:.2f} ms; fused / unfused "
            f"{r['fused_over_unfused']:.3f}, rel err video {r['rel_video']:.2e} (fused {fused_r['rel_video']:.2e})")
if "fp8" in files:
    # The fastest bf16 attention kernel, with FP8 fast accumulation.
    ok = {k: v for k, v in results.items() if k.startswith("bf16/") and k != "bf16/unfused" and "error" not in v}
    best_att = min(ok, key=lambda k: ok[k]["median_seconds"]).split("/")[1] if ok else "default"
    for att, fast in ((best_att, False), (best_att, True)):
        key = f"fp8/{att}" + ("+fastaccum" if fast else "")
        if key in results:
            continue
        results[key] = vireo(files["fp8"], att, fast, profile=fast)
        r = results[key]
        if "error" in r:
            log(f"vireo {key}: FAILED {r['error'][:600]}")
        else:
            log(f"vireo {key}: median {r['median_seconds'] * 1e3:.2f} ms, rel err video {r['rel_video']:.2e}")
    # What FP8 attention gains over bf16 attention on the same FP8 checkpoint, same run.
    with_fp8 = results.get(f"fp8/{best_att}+fastaccum", {})
    r = results[f"fp8/{best_att}+fastaccum+bf16attn"] = vireo(files["fp8"], best_att, True, fp8_attention=False)
    if "error" in r:
        log(f"vireo fp8 with bf16 attention: FAILED {r['error'][:600]}")
    elif "error" not in with_fp8:
        fp8_paths = [k for k in with_fp8.get("matmul_paths", {}) if k.startswith("self-attention")]
        log(f"vireo fp8 attention {with_fp8['median_seconds'] * 1e3:.2f} ms vs bf16 attention {r['median_seconds'] * 1e3:.2f} ms: "
            f"ratio {with_fp8['median_seconds'] / r['median_seconds']:.3f}; rel err video {with_fp8['rel_video']:.2e} vs "
            f"{r['rel_video']:.2e}; path {fp8_paths}")

dequant = None
if "dequant" not in skip and not DRY:
    p = subprocess.run([BENCH, "gpu-dequant", "--json"], capture_output=True, text=True)
    if p.returncode == 0:
        dequant = json.loads(p.stdout.strip().splitlines()[-1])
        subprocess.run([BENCH, "gpu-dequant"])
    else:
        log(f"gpu-dequant FAILED: {p.stderr.strip()[-800:]}")

lora = {}
if "lora" not in skip and not DRY:
    # An unfused rank-32 LoRA on every linear of the bf16 and FP8 models, and the swap time.
    for kind in ("bf16", "fp8"):
        if kind not in files:
            continue
        p = subprocess.run([BENCH, "lora", "--model", str(files[kind]), "--device", "cuda", "--dtype", "bf16",
                            "--tokens", str(F * H * W), "--json"], capture_output=True, text=True)
        if p.returncode == 0:
            lora[kind] = json.loads(p.stdout.strip().splitlines()[-1])
            r = lora[kind]
            log(f"lora {kind}: forward {r['forward_seconds'] * 1e3:.2f} ms, with rank-32 LoRA {r['forward_lora_seconds'] * 1e3:.2f} ms "
                f"(ratio {r['ratio']:.3f}, goal < 1.10); swap {r['swap_file_bytes'] / 1e6:.0f} MB in {r['swap_seconds']:.3f} s")
        else:
            log(f"lora {kind} FAILED: {p.stderr.strip()[-800:]}")

recipes = {}
if "recipes" not in skip and "error" not in results.get(f"bf16/{kernels[0]}", {"error": 1}):
    # One guided step of the dev recipe's stage 1 (half size), and a plain half-size forward
    # (a distilled stage-1 step), on the same weights.
    hh, hw = max(1, H // 2), max(1, W // 2)
    gh = torch.Generator(device=dev).manual_seed(4321)

    def rnd(*shape):
        return torch.randn(*shape, generator=gh, device=dev).to(BF16)

    half = dict(inputs, hidden_states=rnd(1, F * hh * hw, 128), audio_hidden_states=rnd(1, AUDIO_TOKENS, 128))
    if "video_keyframes_mask" in half:
        half["video_keyframes_mask"] = torch.zeros(1, F * hh * hw, 1, device=dev)
        half["video_keyframes_mask"][:, : hh * hw] = 1.0
    negative = dict(encoder_hidden_states=rnd(1, TEXT_TOKENS, CONFIG["cross_attention_dim"]),
                    audio_encoder_hidden_states=rnd(1, TEXT_TOKENS, CONFIG["audio_cross_attention_dim"]))
    stg_block = min(1, args.layers - 1)

    def rows(n: int, with_negative: bool) -> dict:
        out = {}
        for k, v in half.items():
            if k in negative and with_negative:
                out[k] = torch.cat([negative[k]] + [v] * (n - 1))
            elif torch.is_tensor(v) and v.dim() > 0 and v.shape[0] == 1:
                out[k] = v.expand(n, *v.shape[1:]).contiguous()
            else:
                out[k] = v
        return out

    def half_forward(kw: dict, **extra):
        return model(**kw, num_frames=F, height=hh, width=hw, fps=FPS, audio_num_frames=AUDIO_TOKENS, return_dict=False, **extra)

    cfg_in, one_in = rows(2, True), rows(1, False)

    def diffusers_guided_step():
        half_forward(cfg_in)
        half_forward(one_in, spatio_temporal_guidance_blocks=[stg_block])
        half_forward(one_in, isolate_modalities=True)

    model.to(dev)
    recipes["diffusers_guided_step_seconds"] = cuda_median(diffusers_guided_step, args.repeat)
    recipes["diffusers_half_forward_seconds"] = cuda_median(lambda: half_forward(one_in), args.repeat)
    batched = rows(4, True)
    batched["perturbation_mask"] = torch.tensor([1.0, 1.0, 0.0, 1.0], device=dev)
    batched["isolation_mask"] = torch.tensor([1.0, 1.0, 1.0, 0.0], device=dev)
    for name, kw, meta in (("guided", batched, {"stg_blocks": str(stg_block)}), ("half", one_in, {})):
        io = {k: v.cpu().contiguous() for k, v in kw.items() if torch.is_tensor(v)}
        io["sizes"] = torch.tensor([F, hh, hw, AUDIO_TOKENS], dtype=torch.int64)
        io["fps"] = torch.tensor([FPS])
        save_file(io, str(work / f"inputs_{name}.safetensors"), metadata=meta)
        cmd = [args.cli, "dit-forward", "--model", str(files["bf16"]), "--inputs", str(work / f"inputs_{name}.safetensors"),
               "--out", str(work / f"out_{name}.safetensors"), "--device", dev.type, "--dtype", "bf16",
               "--repeat", str(args.repeat + 1), "--attention", kernels[0], "--json"]
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            log(f"vireo {name} half-size forward FAILED: {(p.stderr or p.stdout).strip()[-600:]}")
            recipes = {}
            break
        recipes[f"vireo_{name}_seconds"] = json.loads(p.stdout.strip().splitlines()[-1])["median_seconds"]
    if recipes:
        # The distilled LoRA is rank 384 (ltx-2.3-22b-distilled-lora-384): its unfused cost on
        # the full-size forward of stage 2.
        lora_ratio = 1.0
        if not DRY:
            p = subprocess.run([BENCH, "lora", "--model", str(files["bf16"]), "--device", "cuda", "--dtype", "bf16", "--rank", "384",
                                "--tokens", str(F * H * W), "--json"], capture_output=True, text=True)
            if p.returncode == 0:
                lora_ratio = json.loads(p.stdout.strip().splitlines()[-1])["ratio"]
            else:
                log(f"lora rank 384 FAILED: {p.stderr.strip()[-600:]}")
        recipes["lora384_ratio"] = lora_ratio
        full_v, full_d = results[f"bf16/{kernels[0]}"]["median_seconds"], eager_s
        per_layer = 48 / args.layers
        recipes["distilled_two_stage_48l_seconds"] = {
            "diffusers": per_layer * (8 * recipes["diffusers_half_forward_seconds"] + 3 * full_d),
            "vireo": per_layer * (8 * recipes["vireo_half_seconds"] + 3 * full_v)}
        recipes["dev_two_stage_48l_seconds"] = {
            "diffusers": per_layer * (30 * recipes["diffusers_guided_step_seconds"] + 3 * full_d * lora_ratio),
            "vireo": per_layer * (30 * recipes["vireo_guided_seconds"] + 3 * full_v * lora_ratio)}
        log(f"guided half-size step: diffusers {recipes['diffusers_guided_step_seconds'] * 1e3:.2f} ms (3 forwards), vireo "
            f"{recipes['vireo_guided_seconds'] * 1e3:.2f} ms (one 4-row forward): "
            f"{recipes['vireo_guided_seconds'] / recipes['diffusers_guided_step_seconds']:.3f}x; rank-384 LoRA x{lora_ratio:.3f}")
    if args.compile:
        model.cpu()
        if not DRY:
            torch.cuda.empty_cache()

if args.compile:
    t0 = time.perf_counter()
    model = model.to(dev)
    compiled = torch.compile(model)
    forward(compiled)
    log(f"torch.compile warm-up {time.perf_counter() - t0:.1f} s")
    compiled_s = cuda_median(lambda: forward(compiled), args.repeat)
    log(f"diffusers compiled: {compiled_s * 1e3:.2f} ms ({compiled_s / eager_s:.3f}x eager)")
    del compiled
    torch._dynamo.reset()


scale = 48 / args.layers * 8
workload = "768x512x121" if (F, H, W) == (16, 16, 24) else f"latent grid {F}x{H}x{W}"
print(f"\n== bench gpu: LTX-{args.version} transformer, {args.layers} of 48 layers, {workload} ({F * H * W} video / "
      f"{AUDIO_TOKENS} audio / {TEXT_TOKENS} text tokens)")
if (F, H, W) == (16, 47, 73):
    print("   (a tile of LTX-2.5's 4K third stage at 3840x2176x121: its step is 4 such forwards, the stage 3 steps)")
print(f"   device {DEVICE_NAME}, torch {torch.__version__}, diffusers {diffusers.__version__}")
print(f"   {'variant':28s} {'ms/fwd':>8s} {'x eager':>8s} {'8-step 48L s':>12s} {'peak GiB':>9s} {'resident':>9s} {'rel err':>9s}")
print(f"   {'diffusers eager bf16':28s} {eager_s * 1e3:8.2f} {1.0:8.3f} {eager_s * scale:12.2f} {eager_peak / 2**30:9.2f}")
if compiled_s:
    print(f"   {'diffusers torch.compile':28s} {compiled_s * 1e3:8.2f} {compiled_s / eager_s:8.3f} {compiled_s * scale:12.2f}")
for key, r in results.items():
    if "error" in r:
        print(f"   {'vireo ' + key:28s} FAILED")
        continue
    m = r["median_seconds"]
    print(f"   {'vireo ' + key:28s} {m * 1e3:8.2f} {m / eager_s:8.3f} {m * scale:12.2f} {r['peak_bytes'] / 2**30:9.2f} "
          f"{r['resident_bytes'] / 2**30:9.2f} {r['rel_video']:9.2e}")
if recipes:
    print(f"   recipes at 48 layers, s ({'diffusers':>9s} {'vireo':>9s}): distilled two-stage "
          f"{recipes['distilled_two_stage_48l_seconds']['diffusers']:9.2f} {recipes['distilled_two_stage_48l_seconds']['vireo']:9.2f}"
          f" | dev two-stage (30 guided steps, LoRA x{recipes['lora384_ratio']:.3f}) "
          f"{recipes['dev_two_stage_48l_seconds']['diffusers']:9.2f} {recipes['dev_two_stage_48l_seconds']['vireo']:9.2f}")
report = {"layers": args.layers, "recipes": recipes, "device": DEVICE_NAME, "torch": torch.__version__,
          "diffusers": diffusers.__version__, "eager_seconds": eager_s, "eager_peak_bytes": eager_peak,
          "compiled_seconds": compiled_s, "vireo": results, "gpu_dequant": dequant, "lora": lora, "extrapolation_factor": scale,
          "total_seconds": time.perf_counter() - t_start}
if args.report:
    Path(args.report).write_text(json.dumps(report, indent=2))
log("done")
