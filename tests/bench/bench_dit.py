"""`vireo-bench dit`: one LTX-2.3 transformer forward on CPU in Vireo next to diffusers
running the same config and the same weights in the same run, as the ratio
vireo_time / diffusers_time (goal: <= 0.9), plus the resident weight bytes of that model
loaded from a bf16 diffusers folder, a Lightricks scaled-FP8 file and a Q4_K GGUF.
Usage: bench_dit.py VIREO_CLI [--layers 4] [--tokens 2048] [--repeat 3] [--json]"""
import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "fixtures"))
import benchcli  # noqa: E402
import make_model_fixtures as mm  # noqa: E402  (also quiets diffusers and keeps the Hub offline)

import diffusers  # noqa: E402
import gguf  # noqa: E402
from gguf import GGMLQuantizationType as Q  # noqa: E402
from safetensors.torch import load_file  # noqa: E402

from diffusers.models.transformers.transformer_ltx2 import LTX2VideoTransformer3DModel  # noqa: E402

codecs = mm.codecs
BF16 = torch.bfloat16
F, H = 2, 32  # latent frames and height; the width follows from --tokens
AUDIO_TOKENS, TEXT_TOKENS, FPS, T = 50, 128, 24.0, 700.0
MAX_DIFF = 1e-3  # both sides compute in float32 from the same weights; anything near this is a bug

ap = argparse.ArgumentParser()
ap.add_argument("cli")
ap.add_argument("--layers", type=int, default=4)
ap.add_argument("--tokens", type=int, default=2048)
ap.add_argument("--repeat", type=int, default=3)
ap.add_argument("--json", action="store_true")
args = ap.parse_args()
if args.tokens % (F * H):
    sys.exit(f"bench dit: --tokens must be a multiple of {F * H} (laid out as {F} frames x {H} rows x W)")
W = args.tokens // (F * H)

# A mid-sized LTX-2.3: real 128-wide video heads, 2.3's gates and cross-attention modulation,
# so every code path of the full model runs, at a size a CPU forward takes seconds on.
CONFIG = dict(
    in_channels=128, out_channels=128, patch_size=1, patch_size_t=1,
    num_attention_heads=8, attention_head_dim=128, cross_attention_dim=1024,
    audio_in_channels=128, audio_out_channels=128,
    audio_num_attention_heads=8, audio_attention_head_dim=64, audio_cross_attention_dim=512,
    num_layers=args.layers, caption_channels=3840,
    gated_attn=True, cross_attn_mod=True, audio_gated_attn=True, audio_cross_attn_mod=True,
    use_prompt_embeddings=False, perturbed_attn=True, rope_type="split", rope_double_precision=True,
)


def cli(*argv: str) -> dict:
    """Run the CLI; its last stdout line is the JSON report."""
    return benchcli.run_json("bench dit", [args.cli, *argv, "--json"])


def make_inputs(path: Path) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(1234)
    inputs = dict(
        hidden_states=torch.randn(1, args.tokens, 128, generator=g),
        audio_hidden_states=torch.randn(1, AUDIO_TOKENS, 128, generator=g),
        encoder_hidden_states=torch.randn(1, TEXT_TOKENS, 1024, generator=g),
        audio_encoder_hidden_states=torch.randn(1, TEXT_TOKENS, 512, generator=g),
        timestep=torch.tensor([T]), sigma=torch.tensor([T]),
        encoder_attention_mask=torch.ones(1, TEXT_TOKENS), audio_encoder_attention_mask=torch.ones(1, TEXT_TOKENS),
    )
    extra = {"sizes": torch.tensor([F, H, W, AUDIO_TOKENS], dtype=torch.int64), "fps": torch.tensor([FPS])}
    codecs.write_safetensors(path, {**inputs, **extra})
    return inputs


def core_state(model) -> dict[str, torch.Tensor]:
    """The transformer in ltx-core names, as Lightricks single files and GGUFs hold it."""
    return {mm.DIT + mm.dit_key_to_core(k): v.detach() for k, v in model.state_dict().items()}


def write_fp8(path: Path, model) -> None:
    """Lightricks scaled FP8: every block Linear weight F8_E4M3 + F32 [] weight_scale/input_scale, the rest bf16."""
    targets = {mm.DIT + mm.dit_key_to_core(n) for n in mm.linear_weight_names(model) if n.startswith("transformer_blocks.")}
    g = torch.Generator().manual_seed(4242)
    sd = {}
    for name, v in core_state(model).items():
        sd[name] = v.to(BF16).contiguous()
        if name in targets:
            base = name[: -len(".weight")]
            sd[name], sd[base + ".weight_scale"] = codecs.fp8_per_tensor(sd[name])  # from bf16, as the real converter
            # Calibrated in real files; the loader only has to carry it, so any positive scalar does.
            sd[base + ".input_scale"] = (0.01 + torch.rand((), generator=g)).reshape(())
    codecs.write_safetensors(path, sd)


def write_q4k(path: Path, model) -> dict[str, int]:
    """ComfyUI-GGUF "ltxv" with mm.gguf_tensor_type's Q4_K_M mix; returns how many tensors of each type."""
    writer = gguf.GGUFWriter(str(path), "ltxv")
    writer.add_quantization_version(gguf.GGML_QUANT_VERSION)
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_Q4_K_M)
    counts: dict[str, int] = {}
    for key, v in sorted(core_state(model).items()):
        name, arr = key[len(mm.DIT):], v.float().numpy()
        qt = mm.gguf_tensor_type(name, arr.shape)
        if qt == Q.F32:
            writer.add_tensor(name, arr)
        elif qt in (Q.Q4_K, Q.Q6_K):  # gguf-py cannot quantize K-quants; codecs packs them
            enc = codecs.quantize_q4_k if qt == Q.Q4_K else codecs.quantize_q6_k
            writer.add_tensor(name, enc(arr).reshape(*arr.shape[:-1], -1), raw_dtype=qt)
        else:
            writer.add_tensor(name, gguf.quants.quantize(arr, qt), raw_dtype=qt)
        counts[qt.name] = counts.get(qt.name, 0) + 1
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return dict(sorted(counts.items()))


start = time.perf_counter()
torch.set_grad_enabled(False)
torch.set_num_threads(os.cpu_count() or 1)
torch.manual_seed(0)  # module init draws from the global RNG; randomize_ then overwrites every tensor
model = mm.randomize_(LTX2VideoTransformer3DModel(**CONFIG).eval(), seed=23, std=0.02).float()
params = sum(p.numel() for p in model.parameters())

with tempfile.TemporaryDirectory(prefix="vireo-bench-dit-") as tmp:
    tmp = Path(tmp)
    pipe = tmp / "pipe"
    model.save_pretrained(pipe / "transformer", safe_serialization=True)
    mm.write_json(pipe / "model_index.json", {"_class_name": "LTX2Pipeline", "_diffusers_version": diffusers.__version__,
                                              "transformer": ["diffusers", "LTX2VideoTransformer3DModel"]})
    inputs = make_inputs(tmp / "inputs.safetensors")

    def forward():
        return model(**inputs, num_frames=F, height=H, width=W, fps=FPS, audio_num_frames=AUDIO_TOKENS, return_dict=False)

    forward()  # warm-up: first-call allocations and oneDNN primitive creation
    times = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        video, audio = forward()
        times.append(time.perf_counter() - t0)
    diffusers_s = min(times)

    # Vireo's best-of includes its warm-up run, so ask for one more repeat to match.
    vireo = cli("dit-forward", "--model", str(pipe), "--inputs", str(tmp / "inputs.safetensors"),
                "--out", str(tmp / "out.safetensors"), "--repeat", str(args.repeat + 1))
    out = load_file(tmp / "out.safetensors")
    diff = {"video": float((out["sample"].float() - video).abs().max()),
            "audio": float((out["audio_sample"].float() - audio).abs().max())}

    t0 = time.perf_counter()
    write_fp8(tmp / "fp8.safetensors", model)
    fp8_write_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    gguf_types = write_q4k(tmp / "q4k.gguf", model)
    q4k_write_s = time.perf_counter() - t0
    resident = {name: cli("dit-forward", "--model", str(path), "--load-only", "--dtype", "bf16")
                for name, path in (("bf16", pipe), ("fp8", tmp / "fp8.safetensors"), ("q4k", tmp / "q4k.gguf"))}
    files = {"fp8": (tmp / "fp8.safetensors").stat().st_size, "q4k": (tmp / "q4k.gguf").stat().st_size}

bf16_bytes = resident["bf16"]["resident_bytes"]
report = {
    "config": {"version": vireo["version"], "layers": args.layers, "dim": 1024, "audio_dim": 512, "heads": 8,
               "parameters": params, "tokens": {"video": args.tokens, "audio": AUDIO_TOKENS, "text": TEXT_TOKENS},
               "latent_fhw": [F, H, W]},
    "threads": {"diffusers": torch.get_num_threads(), "vireo": vireo["threads"]},
    "repeats": args.repeat,
    "seconds": {"diffusers": diffusers_s, "vireo": vireo["forward_seconds"], "diffusers_all": times,
                "vireo_load": vireo["load_seconds"]},
    "ratio": vireo["forward_seconds"] / diffusers_s,
    "goal": 0.9,
    "max_abs_diff": diff,
    "resident": {k: {"bytes": r["resident_bytes"], "vs_bf16": r["resident_bytes"] / bf16_bytes,
                     "by_representation": r["by_representation"], "load_seconds": r["load_seconds"]}
                 for k, r in resident.items()},
    "file_bytes": files,
    "gguf_types": gguf_types,
    "write_seconds": {"fp8": fp8_write_s, "q4k": q4k_write_s},
    "total_seconds": time.perf_counter() - start,
}

if args.json:
    print(json.dumps(report, indent=2))
else:
    c = report["config"]
    print(f"bench dit: LTX-{c['version']} transformer, {args.layers} layers, video 8x128 / audio 8x64 heads, "
          f"{params / 1e6:.1f} M parameters, float32 on CPU")
    print(f"  tokens: video {args.tokens} ({F}x{H}x{W}), audio {AUDIO_TOKENS}, text {TEXT_TOKENS}; "
          f"threads: diffusers {report['threads']['diffusers']}, vireo {vireo['threads']}")
    print(f"  diffusers {diffusers_s:8.3f} s  (best of {args.repeat} after a warm-up)")
    print(f"  vireo     {vireo['forward_seconds']:8.3f} s  (best of {args.repeat + 1})")
    verdict = "met" if report["ratio"] <= report["goal"] else "NOT met"
    print(f"  ratio     {report['ratio']:8.3f}x diffusers' time (goal <= 0.9x: {verdict})")
    print(f"  max |vireo - diffusers|: video {diff['video']:.3e}, audio {diff['audio']:.3e}")
    print("  resident weights (loaded with --dtype bf16):")
    for k, r in report["resident"].items():
        parts = ", ".join(f"{n} {b / 1e6:.1f}" for n, b in r["by_representation"].items())
        print(f"    {k:5s} {r['bytes'] / 1e6:9.1f} MB  {r['vs_bf16']:5.3f}x bf16  ({parts} MB)")
    print(f"  gguf tensor types: {gguf_types}; wrote fp8 in {fp8_write_s:.1f} s, q4k in {q4k_write_s:.1f} s; "
          f"total {report['total_seconds']:.1f} s")

bad = {k: v for k, v in diff.items() if not v <= MAX_DIFF}  # `not <=` also catches NaN
if bad:
    sys.exit(f"bench dit: vireo's output differs from diffusers' by more than {MAX_DIFF:g}: {bad}")
