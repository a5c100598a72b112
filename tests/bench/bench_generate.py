"""`vireo-bench generate`: LTX-2.3 text-to-video-with-audio on CPU, phase by phase, in Vireo
next to diffusers' LTX2Pipeline running the same configuration from the same pipeline folder in
the same run, as per-phase ratios vireo_seconds / diffusers_seconds (< 1: Vireo is faster).

Usage: bench_generate.py VIREO_CLI [--small] [--repeat N] [--json] [--two-stage] [--version 2.3|2.5]
                          [--temporal-rounds 0|1] [--third-stage] [--guided] [--audio] [--reference] [--enhance]
                          [--enhance-image]

--third-stage (2.5): after each configuration, the 4K path (diffusers' "third spatial stage" recipe, no temporal
rounds) at 384x256 (tiny) or 768x512 (medium): the config's model with a spatial x2 upsampler in latent_upsampler/;
diffusers: stage 1 at a quarter, LTX2LatentUpsamplePipeline, the second pass at half, the upsampler again,
rebuild_epilogue_keyframes, the epilogue pass with epilogue_tiles (2 x 2), the decode; vireo: `vireo-cli generate
--stages two --set third_stage=1` (its reason must name the third spatial stage).

--enhance (2.5): after each configuration, the prompt enhancer (issue #29): the configuration's pipeline folder with a
prompt_enhancer/ (a Gemma 4 E2B-shaped Gemma4ForConditionalGeneration, text only: hidden 512, 12 layers of which the
last 4 share keys and values with double-width MLPs, per-layer embeddings of 64, window 128, soft cap 30, random) and a
processor/ (the enhancer fixture's tokenizer), its end-of-turn token unreachable so both sides write all 600 tokens.
Diffusers: Gemma4ForConditionalGeneration.from_pretrained, then LTX2DFRPipeline.enhance_prompt (greedy, no repeated
5-gram, 600 new tokens); Vireo: `vireo-cli generate --enhance-prompt`, its "enhance prompt" phase (it loads the
enhancer for each request and frees it after). Rows: load + generate, and seconds per token.

--enhance-image (2.5): the same, shown a start image (image-to-video, ltx-core's enhance_i2v): the enhancer also carries
gemma-4-E2B-it's vision tower as Gemma4VisionConfig defines it (hidden 768, 16 layers, 12 heads, 16-pixel patches pooled
3 x 3, at most 280 soft tokens; random), processor/ holds Gemma4Processor's files and Gemma 4's image tokens, and the
image is a frame of the configuration's size. Diffusers: LTX2DFRPipeline.enhance_prompt(image=...) with Gemma4Processor
(PIL backend); Vireo: `vireo-cli generate --enhance-prompt --image FRAME`, which must say the enhancer was shown it.

--audio (2.3): after each configuration, audio-to-video (issue #31) on the same model: a 44.1 kHz stereo chirp as
long as the clip, encoded (ltx-core 1.0.0's AudioProcessor + the audio VAE's encoder on the diffusers side; Vireo's
port) and held frozen through the 8 distilled steps (diffusers' LTX2Pipeline with the frozen rule: audio timestep and
sigma 0, no audio step, as make_ltx2_toolset_fixtures.py runs it). Rows: encode audio, denoise, the two together.

--guided (2.3): after each configuration, the dev recipe's denoise with Lightricks' guidance (CFG 3 / 7, STG 1 / 1
on block 1, modality 3 / 3, rescale 0.7; 8 dev steps, the folder's scheduler) against LTX2Pipeline with the same
arguments, and with CFG alone on both sides: the extra branches' cost as a ratio within each implementation.

Two configurations (--small runs only the first):
  tiny    the pipeline fixture's defaults (3-layer 64-wide DiT), 96x64, 9 frames
  medium  4-layer DiT with 8 x 128 video / 8 x 64 audio heads (connectors as wide), 512x320,
          25 frames at 24 fps, so that the denoising loop takes seconds
Both: distilled schedule (8 steps, DISTILLED_SIGMA_VALUES, non-shifting FlowMatchEulerDiscrete),
guidance off (CFG 1 / audio 1, rescale 0, STG and modality guidance off), max_sequence_length 1024
(the pipeline default, which `vireo-cli generate` always uses), float32, torch's default threads.

--version 2.5 (default 2.3): the same two configurations as LTX-2.5 pipelines (the DiT with
use_keyframes_abs_pos_embedding=True, ff_bias=False, use_prompt_adaln_single=False; the fixture's tiny
Gemma 4 unified text encoder, as wide and as deep as 2.3's tiny Gemma 3), timed against diffusers'
LTX2DFRPipeline: one DFR pass at full size (the 8 distilled sigmas, generate_slots=True, non-shifting
FlowMatchEulerDiscrete with shift 1.0) on the padded canvas (9 and 25 frames -> a 25-frame canvas,
segment 24, one keyframe slot), which `vireo-cli generate` runs by itself for a 2.5 model without an
upsampler (checked: its stages reason must say "LTX-2.5 DFR pass"). --two-stage with 2.5 times the Fast recipe (LTX
Desktop's default, ltx-pipelines' DistilledPipeline): diffusers' two LTX2Pipeline calls with its stage-1 ancestral
sampler and first-frame mark applied (make_ltx2_pipeline_fixtures.ancestral_stage / first_frame_marked), against
`vireo-cli generate --stages two --set fast=1` (its reason must name the Fast recipe).

--temporal-rounds 1 (2.5 only): after each configuration, a "temporal round 1" section: the same model in
a second folder with a temporal x2 latent upsampler (temporal_latent_upsampler/, LTX2LatentUpsamplerModel
with temporal_upsample=True, mid 256, 2 + 2 blocks, seeded), at the frames of the configuration's DFR canvas
(25: no pad), F frames -> (F-1)*2+1 frames at twice the fps. Diffusers: the DFR pass (output_type="latent")
then LTX2DFRTemporalRefinePipeline round 1 (LTXEulerAncestralRFScheduler(eta=0.5)) on its latents,
keyframes, positions and audio, output_type="np", one generator through both; vireo: `vireo-cli generate
--set temporal_rounds=1` (checked: its stages reason must name the temporal round, and its JSON's
frames/fps the doubled ones). Rows: encode prompt, the pass's denoise, temporal upsample, temporal tiles,
round (the two), decode video, decode audio, vocoder; total compute and wall.

Diffusers: every component is loaded with its own from_pretrained (timed, one warm-up load then
best of N), then one warm-up __call__ and best of N, each phase timed with perf_counter wrappers
on the real modules and methods. Vireo: N runs of `vireo-cli generate --json`, best of N per phase.
"""
from __future__ import annotations

import argparse
import contextlib
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
import benchcli  # noqa: E402
import make_ltx2_pipeline_fixtures as fx  # noqa: E402  (import-safe; sets the quiet/offline env via mm)

mm = fx.mm

from diffusers import (AutoencoderKLLTX2Audio, AutoencoderKLLTX2Video, FlowMatchEulerDiscreteScheduler,  # noqa: E402
                       LTX2Pipeline, LTX2VideoTransformer3DModel)
from diffusers.pipelines.ltx2.connectors import LTX2TextConnectors  # noqa: E402
from diffusers.pipelines.ltx2.utils import DISTILLED_SIGMA_VALUES  # noqa: E402
from diffusers.pipelines.ltx2.vocoder import LTX2VocoderWithBWE  # noqa: E402

VERSION = "2.3"
SEED = 23
FPS = 24.0
MAX_SEQUENCE_LENGTH = 1024  # LTX2Pipeline's default; vireo-cli generate has no option for it
PROMPT = fx.PROMPT

# Rows of the table, in pipeline order. (vireo phase name, diffusers key, what the diffusers side times)
PHASES = [
    ("load text encoder", "load text encoder", "tokenizer + Gemma 3 + connectors from_pretrained"),
    ("encode prompt", "encode prompt", "pipe.encode_prompt (tokenizer + Gemma) + connectors forward"),
    ("load transformer", "load transformer", "transformer from_pretrained"),
    ("denoise", "denoise", "first transformer call to the end of the last scheduler step"),
    ("decode video", "decode video", "vae.decode + video_processor.postprocess_video"),
    ("decode audio", "decode audio", "audio_vae.decode"),
    ("vocoder", "vocoder", "vocoder forward"),
    ("mux", None, "not done by the pipeline (diffusers' encode_video needs PyAV)"),
]
LOAD_PHASES = ("load text encoder", "load transformer")
# LTX-2.5 (LTX2DFRPipeline): the same rows, measured on that pipeline's own methods.
PHASES_DFR = [
    ("load text encoder", "load text encoder", "tokenizer + Gemma 4 + connectors from_pretrained"),
    ("encode prompt", "encode prompt", "pipe.encode_prompt (tokenizer + Gemma 4) + connectors forward"),
    ("load transformer", "load transformer", "transformer from_pretrained"),
    ("denoise", "denoise", "pipe.denoise (the 8 steps over canvas + slot tokens; prepare_latents and "
                           "prepare_audio_latents are outside it, as Vireo's start state is outside its denoise)"),
    ("decode video", "decode video", "vae.decode + video_processor.postprocess_video (canvas trimmed to the request)"),
    ("decode audio", "decode audio", "audio_vae.decode"),
    ("vocoder", "vocoder", "vocoder forward"),
    ("mux", None, "not done by the pipeline (diffusers' encode_video needs PyAV)"),
]


def phases() -> list:
    return PHASES_DFR if VERSION == "2.5" else PHASES
COMPUTE_PHASES = ("encode prompt", "denoise", "decode video", "decode audio", "vocoder")


# =========================================================================== configurations

def medium_parts(seed: int) -> dict[str, torch.nn.Module]:
    """LTX-2.3 with a real-shaped transformer (8 x 128 video heads, 8 x 64 audio heads, 4 layers)
    and connectors of the matching widths; the VAEs, vocoder and Gemma stay the fixture's tiny ones
    (connector input = Gemma hidden 48 x (2 layers + 1)). LTX-2.5: the same on 2.3's configs, the DiT
    with the 2.5 options (fx.V25_OPTIONS)."""
    base = fx.BASE[VERSION]
    dim, audio_dim = 8 * 128, 8 * 64
    dit = dict(mm.dit_config(base, dim=dim, audio_dim=audio_dim, layers=4),
               num_attention_heads=8, attention_head_dim=128, audio_num_attention_heads=8, audio_attention_head_dim=64)
    if VERSION == "2.5":
        dit.update(fx.V25_OPTIONS)
    con = dict(mm.connector_config(base, dim=dim, audio_dim=audio_dim),
               video_connector_num_attention_heads=8, video_connector_attention_head_dim=128,
               audio_connector_num_attention_heads=8, audio_connector_attention_head_dim=64)
    torch.manual_seed(seed)
    parts = {
        "transformer": LTX2VideoTransformer3DModel(**dit),
        "connectors": LTX2TextConnectors(**con),
        "audio_vae": AutoencoderKLLTX2Audio(**mm.AUDIO_VAE_CONFIG),
        "vocoder": LTX2VocoderWithBWE(**mm.VOCODER23_CONFIG),
    }
    for i, name in enumerate(sorted(fx.COMPONENTS)):
        if name in parts:
            # 1024-wide Linears: a smaller std than mm's 0.05 keeps the activations finite through the stack.
            std = 0.02 if name in ("transformer", "connectors") else 0.05
            mm.randomize_(parts[name].eval(), seed * 100 + i, std=std)
    parts["vae"] = fx.video_vae(VERSION, seed)
    parts = {k: v.float().eval() for k, v in parts.items()}
    t, avae, con_m = parts["transformer"], parts["audio_vae"], parts["connectors"]
    assert parts["vae"].config.latent_channels == t.config.in_channels == t.config.out_channels
    assert avae.config.latent_channels * (avae.config.mel_bins // avae.mel_compression_ratio) == t.config.audio_in_channels
    assert con_m.config.caption_channels == t.config.caption_channels
    assert con_m.config.video_hidden_dim == t.config.cross_attention_dim
    assert con_m.config.audio_hidden_dim == t.config.audio_cross_attention_dim
    if VERSION == "2.5":
        assert t.config.use_keyframes_abs_pos_embedding and not t.config.ff_bias and not t.config.use_prompt_adaln_single
        assert t.state_dict()["keyframes_abs_pos_embedding"].abs().max() > 0
    return parts


CONFIGS = {
    "tiny": dict(build=lambda: fx.build(VERSION, SEED), width=fx.WIDTH, height=fx.HEIGHT, frames=fx.NUM_FRAMES,
                 describe="fixture defaults: 3-layer DiT, video 2x32 / audio 2x16 heads"),
    "medium": dict(build=lambda: medium_parts(SEED), width=512, height=320, frames=25,
                   describe="4-layer DiT, video 8x128 / audio 8x64 heads (1024 / 512 wide), connectors as wide"),
}


def write_pipeline(folder: Path, parts, tok_src: Path) -> dict:
    # 2.5: the fixture's tiny Gemma 4 unified (hidden 48, 2 layers: the same connector input as tiny_gemma3).
    gemma = (fx.tiny_gemma4 if VERSION == "2.5" else mm.tiny_gemma3)(SEED * 10 + 1).float().eval()
    fx.write_diffusers(folder, VERSION, parts, gemma, tok_src)
    params = {name: sum(p.numel() for p in m.parameters()) for name, m in parts.items()}
    params["text_encoder"] = sum(p.numel() for p in gemma.parameters())
    return params


# =========================================================================== diffusers side

def load_pipeline(folder: Path) -> tuple[LTX2Pipeline, dict[str, float]]:
    """Every component through its own from_pretrained (what LTX2Pipeline.from_pretrained does), timed.
    LTX-2.5: Gemma 4 unified, and an LTX2DFRPipeline of the same components."""
    import transformers
    from transformers import AutoTokenizer

    text_encoder_class = getattr(transformers, fx.text_encoder_class(VERSION))

    seconds, comps = {}, {}

    def timed(name, fn):
        t0 = time.perf_counter()
        comps[name] = fn()
        seconds[name] = time.perf_counter() - t0

    timed("tokenizer", lambda: AutoTokenizer.from_pretrained(folder / "tokenizer"))
    timed("text_encoder", lambda: text_encoder_class.from_pretrained(folder / "text_encoder", dtype=torch.float32).eval())
    timed("connectors", lambda: LTX2TextConnectors.from_pretrained(folder / "connectors").eval())
    timed("transformer", lambda: LTX2VideoTransformer3DModel.from_pretrained(folder / "transformer").eval())
    timed("vae", lambda: AutoencoderKLLTX2Video.from_pretrained(folder / "vae").eval())
    timed("audio_vae", lambda: AutoencoderKLLTX2Audio.from_pretrained(folder / "audio_vae").eval())
    timed("vocoder", lambda: LTX2VocoderWithBWE.from_pretrained(folder / "vocoder").eval())
    # The folder's scheduler/ holds the dev config; the distilled checkpoints ship this one (sigmas verbatim;
    # LTX2DFRPipeline needs it: it sets the sigmas without mu, so no dynamic shifting, and shift is 1.0).
    scheduler = FlowMatchEulerDiscreteScheduler(**fx.DISTILLED_SCHEDULER)
    if VERSION == "2.5":
        from diffusers import LTX2DFRPipeline

        assert not scheduler.config.use_dynamic_shifting and scheduler.config.shift == 1.0
        pipe = LTX2DFRPipeline(scheduler=scheduler, **comps)
    else:
        pipe = LTX2Pipeline(scheduler=scheduler, **comps)
    pipe.set_progress_bar_config(disable=True)
    for name in ("text_encoder", "connectors", "transformer", "vae", "audio_vae", "vocoder"):
        assert all(p.dtype == torch.float32 for p in getattr(pipe, name).parameters()), name
    return pipe, seconds


def load_phases(s: dict[str, float]) -> dict[str, float]:
    return {"load text encoder": s["tokenizer"] + s["text_encoder"] + s["connectors"],
            "load transformer": s["transformer"],
            "load vae": s["vae"], "load audio vae": s["audio_vae"], "load vocoder": s["vocoder"]}


class PhaseTimer:
    """perf_counter wrappers on the pipeline's real modules/methods; nothing of __call__ is re-implemented."""

    def __init__(self, pipe: LTX2Pipeline):
        self.pipe = pipe

    @contextlib.contextmanager
    def active(self, acc: dict):
        pipe, handles, patched = self.pipe, [], []
        clock = time.perf_counter
        state = {"dit_first": None, "last_step_end": None, "dit_start": None, "con_start": None, "voc_start": None}
        acc.update({"encode_prompt": 0.0, "connectors": 0.0, "transformer": 0.0, "transformer_calls": 0,
                    "vae_decode": 0.0, "postprocess": 0.0, "audio_vae_decode": 0.0, "vocoder": 0.0})

        def pre(key):
            def hook(_m, _args):
                state[key] = clock()
                if key == "dit_start" and state["dit_first"] is None:
                    state["dit_first"] = state[key]
            return hook

        def post(key, name):
            def hook(_m, _args, _out):
                acc[name] += clock() - state[key]
                if name == "transformer":
                    acc["transformer_calls"] += 1
            return hook

        for module, key, name in ((pipe.connectors, "con_start", "connectors"), (pipe.transformer, "dit_start", "transformer"),
                                  (pipe.vocoder, "voc_start", "vocoder")):
            handles.append(module.register_forward_pre_hook(pre(key)))
            handles.append(module.register_forward_hook(post(key, name)))

        def wrap(obj, attr, name):
            orig = getattr(obj, attr)

            def timed(*a, **k):
                t0 = clock()
                try:
                    return orig(*a, **k)
                finally:
                    acc[name] += clock() - t0
            setattr(obj, attr, timed)
            patched.append((obj, attr))

        wrap(pipe, "encode_prompt", "encode_prompt")
        wrap(pipe.vae, "decode", "vae_decode")
        wrap(pipe.video_processor, "postprocess_video", "postprocess")
        wrap(pipe.audio_vae, "decode", "audio_vae_decode")

        # Class level: __call__ deep-copies the scheduler for audio, and an instance attribute would travel along.
        orig_step = FlowMatchEulerDiscreteScheduler.step

        def step(sched, *a, **k):
            out = orig_step(sched, *a, **k)
            state["last_step_end"] = clock()
            return out

        FlowMatchEulerDiscreteScheduler.step = step
        try:
            yield
        finally:
            FlowMatchEulerDiscreteScheduler.step = orig_step
            for h in handles:
                h.remove()
            for obj, attr in patched:
                delattr(obj, attr)
        acc["denoise"] = state["last_step_end"] - state["dit_first"]


def diffusers_run(pipe: LTX2Pipeline, cfg: dict) -> dict:
    acc: dict = {}
    timer = PhaseTimer(pipe)
    t0 = time.perf_counter()
    with timer.active(acc):
        frames, audio = pipe(
            prompt=PROMPT, negative_prompt=None, height=cfg["height"], width=cfg["width"], num_frames=cfg["frames"],
            frame_rate=FPS, num_inference_steps=len(DISTILLED_SIGMA_VALUES), sigmas=list(DISTILLED_SIGMA_VALUES),
            guidance_scale=1.0, audio_guidance_scale=1.0, stg_scale=0.0, audio_stg_scale=0.0,
            modality_scale=1.0, audio_modality_scale=1.0, guidance_rescale=0.0, audio_guidance_rescale=0.0,
            spatio_temporal_guidance_blocks=None, noise_scale=0.0, generator=torch.Generator().manual_seed(SEED),
            use_cross_timestep=True, output_type="np", return_dict=False, max_sequence_length=MAX_SEQUENCE_LENGTH,
        )
    wall = time.perf_counter() - t0
    assert not pipe.do_classifier_free_guidance and not pipe.do_spatio_temporal_guidance
    assert not pipe.do_modality_isolation_guidance
    assert acc["transformer_calls"] == len(DISTILLED_SIGMA_VALUES), acc["transformer_calls"]
    assert frames.shape[1:4] == (cfg["frames"], cfg["height"], cfg["width"]), frames.shape
    return {
        "encode prompt": acc["encode_prompt"] + acc["connectors"],
        "denoise": acc["denoise"],
        "decode video": acc["vae_decode"] + acc["postprocess"],
        "decode audio": acc["audio_vae_decode"],
        "vocoder": acc["vocoder"],
        "_detail": {"transformer_calls_sum": acc["transformer"], "connectors": acc["connectors"],
                    "encode_prompt": acc["encode_prompt"], "vae_decode": acc["vae_decode"],
                    "postprocess_video": acc["postprocess"], "call_wall": wall,
                    "finite": bool(torch.isfinite(torch.as_tensor(frames)).all()) and bool(torch.isfinite(audio).all())},
    }


class DfrPhaseTimer:
    """LTX2DFRPipeline's phases: perf_counter wrappers on its own methods (encode_prompt, prepare_latents,
    prepare_audio_latents, denoise, the decoders) and forward hooks on its modules (connectors, transformer,
    vocoder); nothing of __call__ is re-implemented."""

    def __init__(self, pipe):
        self.pipe = pipe

    @contextlib.contextmanager
    def active(self, acc: dict):
        pipe, handles, patched = self.pipe, [], []
        clock = time.perf_counter
        state = {}
        acc.update({"encode_prompt": 0.0, "connectors": 0.0, "prepare_latents": 0.0, "prepare_audio_latents": 0.0,
                    "denoise": 0.0, "transformer": 0.0, "transformer_calls": 0, "vae_decode": 0.0, "postprocess": 0.0,
                    "audio_vae_decode": 0.0, "vocoder": 0.0})

        def pre(name):
            def hook(_m, _args):
                state[name] = clock()
            return hook

        def post(name):
            def hook(_m, _args, _out):
                acc[name] += clock() - state[name]
                if name == "transformer":
                    acc["transformer_calls"] += 1
            return hook

        for module, name in ((pipe.connectors, "connectors"), (pipe.transformer, "transformer"), (pipe.vocoder, "vocoder")):
            handles.append(module.register_forward_pre_hook(pre(name)))
            handles.append(module.register_forward_hook(post(name)))

        def wrap(obj, attr, name):
            orig = getattr(obj, attr)

            def timed(*a, **k):
                t0 = clock()
                try:
                    return orig(*a, **k)
                finally:
                    acc[name] += clock() - t0
            setattr(obj, attr, timed)
            patched.append((obj, attr))

        for attr in ("encode_prompt", "prepare_latents", "prepare_audio_latents", "denoise"):
            wrap(pipe, attr, attr)
        wrap(pipe.vae, "decode", "vae_decode")
        wrap(pipe.video_processor, "postprocess_video", "postprocess")
        wrap(pipe.audio_vae, "decode", "audio_vae_decode")
        try:
            yield
        finally:
            for h in handles:
                h.remove()
            for obj, attr in patched:
                delattr(obj, attr)


def dfr_canvas(cfg: dict) -> dict:
    """The padded canvas the DFR pass runs on (diffusers' resolve_canvas, VAE time compression 8)."""
    from diffusers.pipelines.ltx2.dfr_layout import resolve_canvas

    padded, segment, positions = resolve_canvas(cfg["frames"], 8)
    lat = ((padded - 1) // 8 + 1, cfg["height"] // 32, cfg["width"] // 32)
    return {"canvas_frames": padded, "segment": segment, "slot_positions": positions, "canvas_latent_fhw": list(lat),
            "tokens": (lat[0] + len(positions)) * lat[1] * lat[2]}


def diffusers_dfr_run(pipe, cfg: dict) -> dict:
    """One LTX2DFRPipeline pass at full size: text-to-video with generated keyframe slots, distilled, no guidance."""
    acc: dict = {}
    timer = DfrPhaseTimer(pipe)
    t0 = time.perf_counter()
    with timer.active(acc):
        frames, audio, keyframes, positions = pipe(
            prompt=PROMPT, height=cfg["height"], width=cfg["width"], num_frames=cfg["frames"], frame_rate=FPS,
            sigmas=list(DISTILLED_SIGMA_VALUES), noise_scale=None, generate_slots=True, keyframe_positions=None,
            freeze_audio=False, use_cross_timestep=True, generator=torch.Generator().manual_seed(SEED),
            output_type="np", return_dict=False, max_sequence_length=MAX_SEQUENCE_LENGTH,
        )
    wall = time.perf_counter() - t0
    assert keyframes is None and positions is None  # decoded output is terminal
    assert acc["transformer_calls"] == len(DISTILLED_SIGMA_VALUES), acc["transformer_calls"]
    assert frames.shape[1:4] == (cfg["frames"], cfg["height"], cfg["width"]), frames.shape
    return {
        "encode prompt": acc["encode_prompt"] + acc["connectors"],
        "denoise": acc["denoise"],
        "decode video": acc["vae_decode"] + acc["postprocess"],
        "decode audio": acc["audio_vae_decode"],
        "vocoder": acc["vocoder"],
        "_detail": {"transformer_calls_sum": acc["transformer"], "connectors": acc["connectors"],
                    "encode_prompt": acc["encode_prompt"], "prepare_latents": acc["prepare_latents"],
                    "prepare_audio_latents": acc["prepare_audio_latents"], "vae_decode": acc["vae_decode"],
                    "postprocess_video": acc["postprocess"], "call_wall": wall,
                    "finite": bool(torch.isfinite(torch.as_tensor(frames)).all()) and bool(torch.isfinite(audio).all())},
    }


def bench_diffusers(folder: Path, cfg: dict, repeat: int) -> dict:
    pipe, _ = load_pipeline(folder)  # warm-up load (file cache, lazy imports)
    del pipe
    loads = [load_phases(load_pipeline(folder)[1]) for _ in range(repeat - 1)]
    pipe, s = load_pipeline(folder)
    loads.append(load_phases(s))
    run = diffusers_dfr_run if VERSION == "2.5" else diffusers_run
    run(pipe, cfg)  # warm-up: first-call allocations, oneDNN primitives
    runs = [run(pipe, cfg) for _ in range(repeat)]
    best = {k: min(l[k] for l in loads) for k in loads[0]}
    best.update({k: min(r[k] for r in runs) for k in COMPUTE_PHASES})
    return {"best": best, "loads": loads, "runs": runs,
            "run_totals": [sum(r[k] for k in COMPUTE_PHASES) for r in runs],
            "call_walls": [r["_detail"]["call_wall"] for r in runs]}


# =========================================================================== vireo side

def vireo_run(cli: str, folder: Path, cfg: dict, out: Path, repeat: int = 1, extra: list[str] = (),
              env: dict | None = None, skip: tuple[str, ...] = ()) -> dict:
    """skip: phases this run does not have (audio-to-video decodes no sound)."""
    cmd = [cli, "generate", "--model", str(folder), "--prompt", PROMPT, "--frames", str(cfg["frames"]),
           "--width", str(cfg["width"]), "--height", str(cfg["height"]), "--fps", f"{FPS:g}", "--seed", str(SEED),
           "--out", str(out), "--json", "--repeat", str(repeat), *extra]
    report = benchcli.run_json("bench generate", cmd, env)
    missing = [name for name, _, _ in phases() if name not in report.get("phases", {}) and name not in skip]
    if missing:
        sys.exit(f"bench generate: `{' '.join(cmd)}` reported no time for {missing}:\n{json.dumps(report)}")
    if VERSION == "2.5" and (report.get("stages") == "two" or "LTX-2.5 DFR pass" not in report.get("stages_reason", "")):
        sys.exit(f"bench generate: vireo did not run LTX-2.5's DFR pass (stages {report.get('stages')!r}, "
                 f"reason {report.get('stages_reason')!r})")
    return report


def bench_vireo(cli: str, folder: Path, cfg: dict, repeat: int, tmp: Path) -> dict:
    # One process, like the diffusers side: a warm-up run, then `repeat` timed runs. Loads
    # happen in the first run only (later runs reuse the loaded components, except the text
    # encoder, which the pipeline frees after each encode), so they are taken from it.
    report = vireo_run(cli, folder, cfg, tmp / f"{folder.name}-vireo.mp4", repeat + 1)
    per_run = report["runs"]
    runs = [dict(report, phases=p) for p in per_run[1:]]
    # mux happens once, after the last run.
    best = {name: min(p.get(name, report["phases"][name]) for p in per_run[1:]) for name, _, _ in phases()}
    # The engine loads every resident component before the first generate() (one figure,
    # load_seconds), so the pipeline's own load phases are empty: shown as one row instead.
    for name in LOAD_PHASES:
        best[name] = None
    # Wall clock of each warm generate() call (the first one loads the components).
    out = {"best": best, "runs": runs, "seconds": report["run_seconds"][1:], "load_seconds": report["load_seconds"],
            "component_bytes": runs[-1].get("component_bytes", {}),
            "run_totals": [sum(r["phases"][k] for k in COMPUTE_PHASES) for r in runs],
            "run_totals_all": [sum(r["phases"][k] for k in COMPUTE_PHASES) + report["load_seconds"] for r in runs]}
    if VERSION == "2.5":
        out.update(stages=report.get("stages"), stages_reason=report.get("stages_reason"))
    return out


# =========================================================================== driver

def bench_config(name: str, cli: str, repeat: int, tmp: Path, tok_src: Path) -> dict:
    cfg = CONFIGS[name]
    t0 = time.perf_counter()
    folder = tmp / name
    params = write_pipeline(folder, cfg["build"](), tok_src)
    build_s = time.perf_counter() - t0

    t0 = time.perf_counter()
    d = bench_diffusers(folder, cfg, repeat)
    diffusers_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    v = bench_vireo(cli, folder, cfg, repeat, tmp)
    vireo_s = time.perf_counter() - t0

    lat = ((cfg["frames"] - 1) // 8 + 1, cfg["height"] // 32, cfg["width"] // 32)
    tokens = lat[0] * lat[1] * lat[2]
    if VERSION == "2.5":  # the DFR pass runs on the padded canvas, plus one latent frame per keyframe slot
        canvas = dfr_canvas(cfg)
        lat, tokens = tuple(canvas["canvas_latent_fhw"]), canvas["tokens"]
    db, vb = d["best"], v["best"]
    rows = []
    for vname, dkey, note in phases():
        ds = db.get(dkey) if dkey else None
        vs = vb[vname]
        if vname in ("decode video", "decode audio", "vocoder"):
            load_key = {"decode video": "load vae", "decode audio": "load audio vae", "vocoder": "load vocoder"}[vname]
            note += f" (diffusers' {load_key}: {db[load_key]:.3f} s, in the load row)"
        if vname in LOAD_PHASES:
            note += "; vireo: see the load row"
        rows.append({"phase": vname, "diffusers": ds, "vireo": vs, "ratio": vs / ds if ds and vs is not None else None,
                     "diffusers_measures": note})
    d_load = sum(db[k] for k in ("load text encoder", "load transformer", "load vae", "load audio vae", "load vocoder"))
    rows.append({"phase": "load (all)", "diffusers": d_load, "vireo": v["load_seconds"], "ratio": v["load_seconds"] / d_load,
                 "diffusers_measures": "every component's from_pretrained; vireo: the engine's load of the model "
                                       "(every component it keeps resident, before the first run)"})
    d_compute, v_compute = min(d["run_totals"]), min(v["run_totals"])
    type_name = "LTX2DFRPipeline" if VERSION == "2.5" else "LTX2Pipeline"
    d_all = d_compute + d_load
    v_all = min(v["run_totals_all"])
    totals = {
        "compute": {"what": "encode prompt + denoise + decode video + decode audio + vocoder (best run)",
                    "diffusers": d_compute, "vireo": v_compute, "ratio": v_compute / d_compute},
        "with_loads": {"what": "all phases but mux; diffusers: best run + best load of every component",
                       "diffusers": d_all, "vireo": v_all, "ratio": v_all / d_all},
        "wall": {"what": f"best warm call, wall clock: diffusers {type_name}.__call__, vireo Ltx2Pipeline::generate "
                         "(both without the MP4)",
                 "diffusers": min(d["call_walls"]), "vireo": min(v["seconds"]),
                 "ratio": min(v["seconds"]) / min(d["call_walls"])},
    }
    result = {
        "config": name, "describe": cfg["describe"], "width": cfg["width"], "height": cfg["height"],
        "frames": cfg["frames"], "fps": FPS, "latent_fhw": list(lat), "video_tokens": tokens,
        "steps": len(DISTILLED_SIGMA_VALUES), "max_sequence_length": MAX_SEQUENCE_LENGTH, "parameters": params,
        "rows": rows, "totals": totals,
        "diffusers": {"best": db, "runs": [{k: r[k] for k in COMPUTE_PHASES} | r["_detail"] for r in d["runs"]],
                      "loads": d["loads"]},
        "vireo": {"best": vb, "runs": [r["phases"] for r in v["runs"]], "seconds": v["seconds"]},
        "component_bytes": v["component_bytes"],
        "bench_seconds": {"build_and_write": build_s, "diffusers": diffusers_s, "vireo": vireo_s},
    }
    if VERSION == "2.5":
        result.update(pipeline="LTX2DFRPipeline", dfr=canvas,
                      vireo_stages={"stages": v["stages"], "stages_reason": v["stages_reason"]})
    return result


# =========================================================================== guided dev denoise

# The dev models' guidance as Lightricks' defaults set it (CFG 3 / 7, STG 1 / 1, modality 3 / 3, rescale 0.7), on
# the configuration's model with the folder's scheduler, 8 dev steps; STG on block 1. Each side also runs with CFG
# alone, so the extra branches' cost is a ratio within one implementation.
GUIDED_STEPS = 8
GUIDED_BLOCK = 1
GUIDED = dict(guidance_scale=3.0, audio_guidance_scale=7.0, stg_scale=1.0, audio_stg_scale=1.0, modality_scale=3.0,
              audio_modality_scale=3.0, guidance_rescale=0.7, audio_guidance_rescale=0.7)
CFG_ONLY = dict(GUIDED, stg_scale=0.0, audio_stg_scale=0.0, modality_scale=1.0, audio_modality_scale=1.0)
NEGATIVE = "worst quality, blurry"


def diffusers_guided_run(pipe: LTX2Pipeline, cfg: dict, kw: dict) -> float:
    acc: dict = {}
    with PhaseTimer(pipe).active(acc):
        pipe(prompt=PROMPT, negative_prompt=NEGATIVE, height=cfg["height"], width=cfg["width"], num_frames=cfg["frames"],
             frame_rate=FPS, num_inference_steps=GUIDED_STEPS, sigmas=None, **kw,
             spatio_temporal_guidance_blocks=[GUIDED_BLOCK] if kw["stg_scale"] > 0 else None, noise_scale=0.0,
             generator=torch.Generator().manual_seed(SEED), use_cross_timestep=True, output_type="np", return_dict=False,
             max_sequence_length=MAX_SEQUENCE_LENGTH)
    branches = 1 + int(kw["stg_scale"] > 0) + int(kw["modality_scale"] > 1)
    assert pipe.do_classifier_free_guidance and acc["transformer_calls"] == GUIDED_STEPS * branches, acc["transformer_calls"]
    return acc["denoise"]


def vireo_guided_denoise(cli: str, folder: Path, cfg: dict, kw: dict, repeat: int, out: Path,
                         batched: bool = True) -> tuple[float, str]:
    extra = ["--schedule", "dev", "--steps", str(GUIDED_STEPS), "--negative", NEGATIVE,
             "--guidance", f"{kw['guidance_scale']:g}", "--audio-guidance", f"{kw['audio_guidance_scale']:g}",
             "--rescale", f"{kw['guidance_rescale']:g}"]
    for knob in ("stg_scale", "audio_stg_scale", "modality_scale", "audio_modality_scale"):
        extra += ["--set", f"{knob}={kw[knob]:g}"]
    extra += ["--set", f"stg_block={GUIDED_BLOCK}"]
    report = vireo_run(cli, folder, cfg, out, repeat + 1, extra, None if batched else {"VIREO_BATCH_GUIDANCE": "0"})
    return min(p["denoise"] for p in report["runs"][1:]), report.get("stages_reason", "")


def bench_guided(name: str, cli: str, repeat: int, tmp: Path, tok_src: Path) -> dict:
    cfg = CONFIGS[name]
    folder = tmp / f"guided-{name}"
    write_pipeline(folder, cfg["build"](), tok_src)
    pipe, _ = load_pipeline(folder)
    rows = {}
    for label, kw in (("CFG only", CFG_ONLY), ("CFG + STG + modality", GUIDED)):
        diffusers_guided_run(pipe, cfg, kw)  # warm-up
        d = min(diffusers_guided_run(pipe, cfg, kw) for _ in range(repeat))
        out = tmp / f"guided-{name}-{'all' if kw['stg_scale'] > 0 else 'cfg'}.mp4"
        v, reason = vireo_guided_denoise(cli, folder, cfg, kw, repeat, out)
        if kw["stg_scale"] > 0 and f"STG 1 / 1 on block {GUIDED_BLOCK}, modality 3 / 3" not in reason:
            sys.exit(f"bench generate: vireo did not run the guidance asked for (stages reason {reason!r})")
        rows[label] = {"diffusers": d, "vireo": v, "ratio": v / d}
    # The same branches as forwards of their own (VIREO_BATCH_GUIDANCE=0), as diffusers runs them.
    v, _ = vireo_guided_denoise(cli, folder, cfg, GUIDED, repeat, tmp / f"guided-{name}-separate.mp4", batched=False)
    d = rows["CFG + STG + modality"]["diffusers"]
    rows["... branches separate"] = {"diffusers": d, "vireo": v, "ratio": v / d}
    cost = {side: rows["CFG + STG + modality"][side] / rows["CFG only"][side] for side in ("diffusers", "vireo")}
    cost["vireo_batched_over_separate"] = rows["CFG + STG + modality"]["vireo"] / v
    return {"config": f"guided_{name}", "width": cfg["width"], "height": cfg["height"], "frames": cfg["frames"],
            "steps": GUIDED_STEPS, "stg_block": GUIDED_BLOCK, "guidance": GUIDED, "denoise": rows,
            "branch_cost": {**cost, "what": "denoise with CFG + STG + modality / denoise with CFG only, same side"}}


def print_guided(r: dict, repeat: int) -> None:
    print(f"\n== guided dev denoise, {r['config']}: {r['width']}x{r['height']}x{r['frames']}, {r['steps']} dev steps, "
          f"CFG 3 / 7, STG 1 / 1 on block {r['stg_block']}, modality 3 / 3, rescale 0.7 (best of {repeat})")
    print(f"   {'denoise':<24}{'diffusers s':>12}{'vireo s':>12}{'ratio':>8}")
    for label, row in r["denoise"].items():
        print(f"   {label:<24}{fmt(row['diffusers'], 12)}{fmt(row['vireo'], 12)}{fmt(row['ratio'], 8)}")
    c = r["branch_cost"]
    print(f"   extra branches' cost (guided / CFG only): diffusers {c['diffusers']:.2f}x, vireo {c['vireo']:.2f}x (batched); "
          f"vireo batched / separate {c['vireo_batched_over_separate']:.2f}x")


# =========================================================================== audio-to-video

def bench_wave(cfg: dict) -> tuple[torch.Tensor, Path]:
    """The sound: a chirp as long as the clip, stereo at 44.1 kHz, as a float tensor and as a 16-bit WAV."""
    import math
    import struct
    rate, n = 44100, round(cfg["frames"] / FPS * 44100)
    t = torch.arange(n, dtype=torch.float64) / rate
    wave = torch.stack([0.4 * torch.sin(2 * math.pi * 300 * t * (1 + t)), 0.3 * torch.sin(2 * math.pi * 900 * t)]).float()
    pcm = (wave.T.reshape(-1) * 32767).round().to(torch.int16).numpy().tobytes()
    path = Path(tempfile.gettempdir()) / f"bench-a2v-{cfg['frames']}.wav"
    path.write_bytes(b"RIFF" + struct.pack("<I", 36 + len(pcm)) + b"WAVEfmt " + struct.pack("<IHHIIHH", 16, 1, 2, rate, rate * 4, 4, 16)
                     + b"data" + struct.pack("<I", len(pcm)) + pcm)
    # What Vireo reads from the WAV: the 16-bit samples / 32768.
    return torch.from_numpy(__import__("numpy").frombuffer(pcm, dtype="<i2").astype("float32") / 32768).reshape(-1, 2).T.contiguous(), path


def diffusers_a2v_run(pipe: LTX2Pipeline, cfg: dict, wave: torch.Tensor) -> dict:
    from ltx_core.model.audio_vae.ops import AudioProcessor
    from ltx_core.types import Audio
    avae = pipe.audio_vae
    t0 = time.perf_counter()
    processor = AudioProcessor(target_sample_rate=avae.config.sample_rate, mel_bins=avae.config.mel_bins,
                               mel_hop_length=avae.config.mel_hop_length, n_fft=1024)
    mel = processor.waveform_to_mel(Audio(waveform=wave[None], sampling_rate=44100))
    frames = round(cfg["frames"] / FPS * avae.config.sample_rate / avae.config.mel_hop_length / avae.temporal_compression_ratio)
    raw = avae.encode(mel).latent_dist.mode()[:, :, :frames]
    encode = time.perf_counter() - t0

    def pre_hook(_m, args, kwargs):
        kwargs["audio_timestep"] = torch.zeros_like(kwargs["timestep"])
        kwargs["audio_sigma"] = torch.zeros_like(kwargs["sigma"])
        return args, kwargs

    orig_step = FlowMatchEulerDiscreteScheduler.step
    video_sched = pipe.scheduler

    def step(sched, model_output, timestep, sample, *a, **k):
        if sched is video_sched:
            return orig_step(sched, model_output, timestep, sample, *a, **k)
        return (sample,)

    acc: dict = {}
    handle = pipe.transformer.register_forward_pre_hook(pre_hook, with_kwargs=True)
    FlowMatchEulerDiscreteScheduler.step = step
    try:
        with PhaseTimer(pipe).active(acc):
            pipe(prompt=PROMPT, height=cfg["height"], width=cfg["width"], num_frames=cfg["frames"], frame_rate=FPS,
                 num_inference_steps=len(DISTILLED_SIGMA_VALUES), sigmas=list(DISTILLED_SIGMA_VALUES), guidance_scale=1.0,
                 audio_guidance_scale=1.0, audio_latents=raw, noise_scale=0.0, generator=torch.Generator().manual_seed(SEED),
                 use_cross_timestep=True, output_type="latent", return_dict=False, max_sequence_length=MAX_SEQUENCE_LENGTH)
    finally:
        handle.remove()
        FlowMatchEulerDiscreteScheduler.step = orig_step
    return {"encode audio": encode, "denoise": acc["denoise"]}


def bench_audio(name: str, cli: str, repeat: int, tmp: Path, tok_src: Path) -> dict:
    cfg = CONFIGS[name]
    folder = tmp / f"a2v-{name}"
    write_pipeline(folder, cfg["build"](), tok_src)
    pipe, _ = load_pipeline(folder)
    wave, wav = bench_wave(cfg)
    diffusers_a2v_run(pipe, cfg, wave)  # warm-up
    d_runs = [diffusers_a2v_run(pipe, cfg, wave) for _ in range(repeat)]
    report = vireo_run(cli, folder, cfg, tmp / f"a2v-{name}.mp4", repeat + 1, ["--audio", str(wav)],
                       skip=("decode audio", "vocoder"))
    if "the video follows" not in report.get("stages_reason", ""):
        sys.exit(f"bench generate: vireo did not follow the sound (stages reason {report.get('stages_reason')!r})")
    v_runs = [{"encode audio": p.get("encode audio", 0.0), "denoise": p["denoise"]} for p in report["runs"][1:]]
    rows = {}
    for key in ("encode audio", "denoise"):
        d, v = min(r[key] for r in d_runs), min(r[key] for r in v_runs)
        rows[key] = {"diffusers": d, "vireo": v, "ratio": v / d if d > 0 else None}
    d = min(r["encode audio"] + r["denoise"] for r in d_runs)
    v = min(r["encode audio"] + r["denoise"] for r in v_runs)
    rows["together"] = {"diffusers": d, "vireo": v, "ratio": v / d}
    return {"config": f"a2v_{name}", "width": cfg["width"], "height": cfg["height"], "frames": cfg["frames"], "rows": rows}


def print_audio(r: dict, repeat: int) -> None:
    print(f"\n== audio-to-video, {r['config']}: {r['width']}x{r['height']}x{r['frames']}, 8 distilled steps, the sound frozen "
          f"(best of {repeat})")
    print(f"   {'phase':<24}{'diffusers s':>12}{'vireo s':>12}{'ratio':>8}")
    for label, row in r["rows"].items():
        print(f"   {label:<24}{fmt(row['diffusers'], 12)}{fmt(row['vireo'], 12)}{fmt(row['ratio'], 8)}")


# =========================================================================== IC-LoRA references

def reference_clip(cfg: dict, tmp: Path) -> tuple[torch.Tensor, Path]:
    """A reference clip at the output's size (ffmpeg's test pattern, H.264) and its frames as ffmpeg decodes them
    ([F, 3, H, W] in 0..1): what Vireo reads from the file is what diffusers is handed."""
    import numpy as np
    w, h, f = cfg["width"], cfg["height"], cfg["frames"]
    path = tmp / f"reference-{w}x{h}x{f}.mp4"
    subprocess.run(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", f"testsrc2=size={w}x{h}:rate={FPS:g}", "-frames:v", str(f),
                    "-pix_fmt", "yuv420p", str(path)], check=True)
    raw = subprocess.run(["ffmpeg", "-v", "error", "-i", str(path), "-f", "rawvideo", "-pix_fmt", "rgb24", "-"],
                         capture_output=True, check=True).stdout
    frames = torch.from_numpy(np.frombuffer(raw, dtype=np.uint8).reshape(f, h, w, 3).copy())
    return frames.permute(0, 3, 1, 2).float() / 255.0, path


def ic_lora_file(pipe: LTX2Pipeline, path: Path) -> Path:
    """A rank-4 in-context LoRA on one module (reference_downscale_factor 1): Vireo needs one to take a reference;
    diffusers runs the references without it (the LoRA's cost is one small matmul per forward)."""
    from safetensors.torch import save_file
    dim = pipe.transformer.config.num_attention_heads * pipe.transformer.config.attention_head_dim
    g = torch.Generator().manual_seed(SEED)
    save_file({"diffusion_model.transformer_blocks.0.attn1.to_q.lora_A.weight": torch.randn(4, dim, generator=g) * 0.01,
               "diffusion_model.transformer_blocks.0.attn1.to_q.lora_B.weight": torch.randn(dim, 4, generator=g) * 0.01},
              str(path), metadata={"reference_downscale_factor": "1"})
    return path


def diffusers_ic_run(pipe, cfg: dict, frames: torch.Tensor) -> dict:
    from diffusers.pipelines.ltx2.pipeline_ltx2_ic_lora import LTX2ReferenceCondition
    acc: dict = {"encode references": 0.0}
    orig_encode = pipe.vae.encode

    def encode(*a, **k):
        t0 = time.perf_counter()
        try:
            return orig_encode(*a, **k)
        finally:
            acc["encode references"] += time.perf_counter() - t0

    pipe.vae.encode = encode
    try:
        with PhaseTimer(pipe).active(acc):
            pipe(prompt=PROMPT, reference_conditions=[LTX2ReferenceCondition(frames=frames, strength=1.0)], height=cfg["height"],
                 width=cfg["width"], num_frames=cfg["frames"], frame_rate=FPS, num_inference_steps=len(DISTILLED_SIGMA_VALUES),
                 sigmas=list(DISTILLED_SIGMA_VALUES), guidance_scale=1.0, audio_guidance_scale=1.0, stg_scale=0.0,
                 audio_stg_scale=0.0, modality_scale=1.0, audio_modality_scale=1.0, guidance_rescale=0.0,
                 audio_guidance_rescale=0.0, spatio_temporal_guidance_blocks=None, generator=torch.Generator().manual_seed(SEED),
                 use_cross_timestep=True, output_type="latent", return_dict=False, max_sequence_length=MAX_SEQUENCE_LENGTH)
    finally:
        del pipe.vae.encode
    return {"encode references": acc["encode references"], "denoise": acc["denoise"]}


def bench_reference(name: str, cli: str, repeat: int, tmp: Path, tok_src: Path) -> dict:
    import inspect
    from diffusers import LTX2InContextPipeline
    cfg = CONFIGS[name]
    folder = tmp / f"ic-{name}"
    write_pipeline(folder, cfg["build"](), tok_src)
    pipe, _ = load_pipeline(folder)
    takes = inspect.signature(LTX2InContextPipeline.__init__).parameters
    ic = LTX2InContextPipeline(**{k: v for k, v in pipe.components.items() if k in takes})
    ic.set_progress_bar_config(disable=True)
    frames, clip = reference_clip(cfg, tmp)
    lora = ic_lora_file(pipe, tmp / f"ic-{name}-ic-lora.safetensors")
    diffusers_ic_run(ic, cfg, frames)  # warm-up
    d_runs = [diffusers_ic_run(ic, cfg, frames) for _ in range(repeat)]
    report = vireo_run(cli, folder, cfg, tmp / f"ic-{name}.mp4", repeat + 1, ["--lora", str(lora), "--reference", str(clip)])
    if "follows 1 reference clip" not in report.get("stages_reason", ""):
        sys.exit(f"bench generate: vireo did not follow the reference (stages reason {report.get('stages_reason')!r})")
    v_runs = [{"encode references": p.get("encode references", 0.0), "denoise": p["denoise"]} for p in report["runs"][1:]]
    rows = {}
    for key in ("encode references", "denoise"):
        d, v = min(r[key] for r in d_runs), min(r[key] for r in v_runs)
        rows[key] = {"diffusers": d, "vireo": v, "ratio": v / d if d > 0 else None}
    d = min(r["encode references"] + r["denoise"] for r in d_runs)
    v = min(r["encode references"] + r["denoise"] for r in v_runs)
    rows["together"] = {"diffusers": d, "vireo": v, "ratio": v / d}
    return {"config": f"ic_{name}", "width": cfg["width"], "height": cfg["height"], "frames": cfg["frames"], "rows": rows}


def print_reference(r: dict, repeat: int) -> None:
    print(f"\n== IC-LoRA reference, {r['config']}: {r['width']}x{r['height']}x{r['frames']}, one reference clip at the clip's "
          f"size (its tokens double the sequence), 8 distilled steps (best of {repeat}; vireo applies a rank-4 LoRA to one "
          f"module, diffusers none)")
    print(f"   {'phase':<24}{'diffusers s':>12}{'vireo s':>12}{'ratio':>8}")
    for label, row in r["rows"].items():
        print(f"   {label:<24}{fmt(row['diffusers'], 12)}{fmt(row['vireo'], 12)}{fmt(row['ratio'], 8)}")


# =========================================================================== prompt enhancer

ENHANCER = dict(hidden_size=512, intermediate_size=1536, num_hidden_layers=12, num_attention_heads=8, num_key_value_heads=2,
                head_dim=64, global_head_dim=128, sliding_window=128, num_kv_shared_layers=4, use_double_wide_mlp=True,
                hidden_size_per_layer_input=64, final_logit_softcapping=30.0)
ENHANCER_TOKENS = 600
# Of about the length of Vireo's own (which vireo-cli uses): the prefill is a few percent of the work.
ENHANCER_SYSTEM = ("You write prompts for a video model. Rewrite the user's idea as one paragraph: subjects, motion, camera, "
                   "light, surroundings and sound, in the present tense, 80 to 160 words, no lists and no preamble. ") * 2


def write_enhancer(folder: Path, vision: bool = False) -> int:
    """prompt_enhancer/ and processor/ into a pipeline folder, with E2B's vision tower when asked; the
    end-of-turn id (the only EOS, never reached)."""
    import make_gemma4_enhancer_fixtures as ef
    from transformers import Gemma4Config, Gemma4ForConditionalGeneration, Gemma4TextConfig, Gemma4VisionConfig

    if vision:
        tok, vocab = ef.build_media_tokenizer(folder / "processor")
        ef.write_gemma4_processor(folder / "processor", tok)  # Gemma4ImageProcessor's defaults: 280, 16, 3
    else:
        tok, vocab = ef.build_tokenizer(folder / "processor")
    turn_end = tok.convert_tokens_to_ids("<turn|>")
    layers = ENHANCER["num_hidden_layers"]
    types = ["full_attention" if (i + 1) % 4 == 0 else "sliding_attention" for i in range(layers)]
    tc = Gemma4TextConfig(vocab_size=vocab, vocab_size_per_layer_input=vocab, layer_types=types, rms_norm_eps=1e-6,
                          max_position_embeddings=4096, pad_token_id=0, bos_token_id=2, eos_token_id=[turn_end],
                          tie_word_embeddings=True, **ENHANCER)
    media = {}
    if vision:
        media = dict(image_token_id=tok.convert_tokens_to_ids("<|image|>"), boi_token_id=tok.convert_tokens_to_ids("<|image>"),
                     eoi_token_id=tok.convert_tokens_to_ids("<image|>"))
    config = Gemma4Config(text_config=tc, vision_config=Gemma4VisionConfig() if vision else None, audio_config=None, pad_token_id=0,
                          bos_token_id=2, eos_token_id=[turn_end], tie_word_embeddings=True, **media)
    torch.manual_seed(SEED)
    model = Gemma4ForConditionalGeneration(config).float().eval()
    mm.randomize_(model, SEED, std=0.05)
    # The end of turn is the only EOS; a zero row gives it logit 0 where others reach above: never chosen.
    model.model.language_model.embed_tokens.weight[turn_end].zero_()
    model.generation_config.eos_token_id = [turn_end]
    model.generation_config.pad_token_id = 0
    model.save_pretrained(str(folder / "prompt_enhancer"), safe_serialization=True)
    return turn_end


def diffusers_enhance(folder: Path, image: Path | None = None) -> dict:
    import types as pytypes

    import PIL.Image
    from diffusers import LTX2DFRPipeline
    from transformers import AutoTokenizer, Gemma4ForConditionalGeneration
    from transformers.models.gemma4.image_processing_pil_gemma4 import Gemma4ImageProcessorPil

    t0 = time.perf_counter()
    model = Gemma4ForConditionalGeneration.from_pretrained(str(folder / "prompt_enhancer"), torch_dtype=torch.float32).eval()
    tok = AutoTokenizer.from_pretrained(str(folder / "processor"))
    if image is not None:
        import make_gemma4_enhancer_fixtures as ef
        from transformers.models.gemma4.feature_extraction_gemma4 import Gemma4AudioFeatureExtractor
        processor = ef.gemma4_image_processor_class()(feature_extractor=Gemma4AudioFeatureExtractor(),
                                                      image_processor=Gemma4ImageProcessorPil(), tokenizer=tok)
    t1 = time.perf_counter()

    class TextProcessor:
        def __init__(self, t):
            self.tokenizer = t

        def __call__(self, text, images=None, return_tensors="pt"):
            return self.tokenizer(text, return_tensors=return_tensors)

    counted = {}
    real = model.generate

    def spy(**kwargs):
        out = real(**kwargs)
        counted["tokens"] = out.shape[1] - kwargs["input_ids"].shape[1]
        return out

    model.generate = spy
    host = pytypes.SimpleNamespace(prompt_enhancer=model, text_encoder=None,
                                   processor=processor if image is not None else TextProcessor(tok),
                                   _execution_device=torch.device("cpu"))
    LTX2DFRPipeline.enhance_prompt(host, PROMPT, ENHANCER_SYSTEM, max_new_tokens=ENHANCER_TOKENS,
                                   image=PIL.Image.open(image).convert("RGB") if image is not None else None)
    t2 = time.perf_counter()
    return {"load": t1 - t0, "generate": t2 - t1, "tokens": counted["tokens"]}


def bench_enhance(name: str, cli: str, repeat: int, tmp: Path, tok_src: Path, image: bool = False) -> dict:
    import re

    import PIL.Image
    cfg = CONFIGS[name]
    folder = tmp / f"enhance{'-image' if image else ''}-{name}"
    write_pipeline(folder, cfg["build"](), tok_src)
    write_enhancer(folder, vision=image)
    frame = None
    extra = ["--enhance-prompt"]
    if image:
        import make_gemma4_enhancer_fixtures as ef
        frame = tmp / f"frame-{name}.png"
        PIL.Image.fromarray(ef.test_image(cfg["height"], cfg["width"], 7)).save(frame)
        extra += ["--image", str(frame)]
    diffusers_enhance(folder, frame)  # warm-up (page cache, allocator)
    d_runs = [diffusers_enhance(folder, frame) for _ in range(repeat)]
    report = vireo_run(cli, folder, cfg, tmp / f"{folder.name}.mp4", repeat + 1, extra)
    reason = report.get("stages_reason", "")
    said = re.search(r"the prompt enhancer rewrote the prompt \((\d+) tokens", reason)
    if not said:
        sys.exit(f"bench generate: vireo did not enhance the prompt (stages reason {reason!r})")
    if image and "shown the first condition's first frame" not in reason:
        sys.exit(f"bench generate: vireo's enhancer was not shown the image (stages reason {reason!r})")
    v_tokens = int(said.group(1))
    v = min(p["enhance prompt"] for p in report["runs"][1:])
    d = min(r["load"] + r["generate"] for r in d_runs)
    d_tokens = d_runs[0]["tokens"]
    rows = {"load + generate": {"diffusers": d, "vireo": v, "ratio": v / d},
            "per token": {"diffusers": d / d_tokens, "vireo": v / v_tokens, "ratio": (v / v_tokens) / (d / d_tokens)}}
    return {"config": f"enhance{'_image' if image else ''}_{name}", "tokens": {"diffusers": d_tokens, "vireo": v_tokens},
            "diffusers_load": min(r["load"] for r in d_runs), "rows": rows}


def print_enhance(r: dict, repeat: int) -> None:
    tower = ", shown the start frame through E2B's vision tower (768 wide, 16 layers, <= 280 soft tokens)" if "image" in r["config"] else ""
    print(f"\n== prompt enhancer, {r['config']}: a Gemma 4 E2B-shaped model (hidden 512, 12 layers, 4 sharing keys and values, "
          f"per-layer embeddings){tower}, {r['tokens']['vireo']} tokens written by vireo, {r['tokens']['diffusers']} by diffusers "
          f"(best of {repeat}; both load the enhancer each time: diffusers' load alone {r['diffusers_load']:.3f} s)")
    print(f"   {'phase':<24}{'diffusers s':>12}{'vireo s':>12}{'ratio':>8}")
    for label, row in r["rows"].items():
        print(f"   {label:<24}{fmt(row['diffusers'], 12)}{fmt(row['vireo'], 12)}{fmt(row['ratio'], 8)}")


# =========================================================================== two stages

# The medium model at 512x320 (stage 1 at 256x160), with a latent upsampler narrower than the real
# one (mid 256, 2 + 2 blocks; the real one is 1024 wide, 4 + 4) so the file stays small.
TWO_STAGE = dict(width=512, height=320, frames=25)


def two_stage_upsampler(seed: int, channels: int):
    from diffusers.pipelines.ltx2.latent_upsampler import LTX2LatentUpsamplerModel

    torch.manual_seed(seed)
    up = LTX2LatentUpsamplerModel(in_channels=channels, mid_channels=256,
                                  num_blocks_per_stage=2, dims=3, spatial_upsample=True, use_rational_resampler=False)
    return mm.randomize_(up.float().eval(), seed * 100 + 77, std=0.02)


def diffusers_two_stage(pipe: LTX2Pipeline, upsampler, cfg: dict) -> dict:
    from diffusers.pipelines.ltx2 import LTX2LatentUpsamplePipeline
    from diffusers.pipelines.ltx2.utils import STAGE_2_DISTILLED_SIGMA_VALUES

    common = dict(prompt=PROMPT, negative_prompt=None, num_frames=cfg["frames"], frame_rate=FPS, guidance_scale=1.0,
                  audio_guidance_scale=1.0, stg_scale=0.0, audio_stg_scale=0.0, modality_scale=1.0, audio_modality_scale=1.0,
                  guidance_rescale=0.0, audio_guidance_rescale=0.0, spatio_temporal_guidance_blocks=None,
                  use_cross_timestep=True, return_dict=False, max_sequence_length=MAX_SEQUENCE_LENGTH,
                  generator=torch.Generator().manual_seed(SEED))
    ups = LTX2LatentUpsamplePipeline(vae=pipe.vae, latent_upsampler=upsampler)
    ups.set_progress_bar_config(disable=True)
    with contextlib.ExitStack() as fast:
        ancestral = None
        if VERSION == "2.5":
            # The Fast recipe: ltx-pipelines' DistilledPipeline rules on these calls, as run_fast_two_stage applies them.
            fast.enter_context(fx.first_frame_marked(pipe.transformer))
            ancestral = fast.enter_context(fx.ancestral_stage(pipe, SEED))
        t0 = time.perf_counter()
        video, audio = pipe(height=cfg["height"] // 2, width=cfg["width"] // 2,
                            num_inference_steps=len(DISTILLED_SIGMA_VALUES), sigmas=list(DISTILLED_SIGMA_VALUES),
                            output_type="latent", **common)
        t1 = time.perf_counter()
        if ancestral is not None:
            ancestral.on = False  # stage 2 steps with Euler
        up = ups(latents=video, output_type="latent", return_dict=False)[0]
        t2 = time.perf_counter()
        frames, _ = pipe(latents=up, audio_latents=audio, height=cfg["height"], width=cfg["width"],
                         num_inference_steps=len(STAGE_2_DISTILLED_SIGMA_VALUES),
                         sigmas=list(STAGE_2_DISTILLED_SIGMA_VALUES), noise_scale=STAGE_2_DISTILLED_SIGMA_VALUES[0],
                         output_type="np", **common)
        t3 = time.perf_counter()
    if ancestral is not None:
        assert len(ancestral.draws) == 2 * (len(DISTILLED_SIGMA_VALUES) - 1), len(ancestral.draws)
    assert frames.shape[1:4] == (cfg["frames"], cfg["height"], cfg["width"]), frames.shape
    return {"stage 1": t1 - t0, "upsample": t2 - t1, "stage 2": t3 - t2, "total": t3 - t0}


def bench_two_stage(cli: str, repeat: int, tmp: Path, tok_src: Path) -> dict:
    cfg = TWO_STAGE
    folder = tmp / "two_stage"
    parts = medium_parts(SEED)
    params = write_pipeline(folder, parts, tok_src)
    upsampler = two_stage_upsampler(SEED, parts["vae"].config.latent_channels)
    upsampler.save_pretrained(folder / "latent_upsampler", safe_serialization=True)
    params["latent_upsampler"] = sum(p.numel() for p in upsampler.parameters())

    pipe, _ = load_pipeline(folder)
    if VERSION == "2.5":  # load_pipeline's LTX2DFRPipeline, its components in the plain pipeline the Fast recipe calls
        pipe = LTX2Pipeline(scheduler=pipe.scheduler, **{k: getattr(pipe, k) for k in (
            "vae", "audio_vae", "text_encoder", "tokenizer", "connectors", "transformer", "vocoder")})
        pipe.set_progress_bar_config(disable=True)
    diffusers_two_stage(pipe, upsampler, cfg)  # warm-up
    d_runs = [diffusers_two_stage(pipe, upsampler, cfg) for _ in range(repeat)]
    del pipe

    cmd = [cli, "generate", "--model", str(folder), "--prompt", PROMPT, "--frames", str(cfg["frames"]),
           "--width", str(cfg["width"]), "--height", str(cfg["height"]), "--fps", f"{FPS:g}", "--seed", str(SEED),
           "--stages", "two", "--out", str(tmp / "two-stage-vireo.mp4"), "--json", "--repeat", str(repeat + 1)]
    if VERSION == "2.5":
        cmd += ["--set", "fast=1"]
    report = benchcli.run_json("bench generate --two-stage", cmd)
    if report.get("stages") != "two":
        sys.exit(f"bench generate --two-stage: vireo did not run two stages: {json.dumps(report)[:400]}")
    if VERSION == "2.5" and "the Fast recipe" not in report.get("stages_reason", ""):
        sys.exit(f"bench generate --two-stage: vireo did not run the Fast recipe: {report.get('stages_reason', '')!r}")
    v_runs = []
    for p in report["runs"][1:]:
        stage1 = p.get("encode prompt", 0.0) + p.get("denoise", 0.0)
        up = p.get("upsample latents", 0.0)
        stage2 = sum(p.get(k, 0.0) for k in ("refine", "decode video", "decode audio", "vocoder"))
        v_runs.append({"stage 1": stage1, "upsample": up, "stage 2": stage2, "total": stage1 + up + stage2})
    rows = []
    notes = {"stage 1": "encode prompt + 8 distilled steps at half size (diffusers: the first __call__, output_type='latent')",
             "upsample": "latent upsampler on the VAE's scale (diffusers: LTX2LatentUpsamplePipeline, output_type='latent')",
             "stage 2": "3 refining steps at full size + decode video, audio, vocoder (diffusers: the second __call__, "
                        "which encodes the prompt again)",
             "total": "the three together"}
    for k in ("stage 1", "upsample", "stage 2", "total"):
        ds, vs = min(r[k] for r in d_runs), min(r[k] for r in v_runs)
        rows.append({"phase": k, "diffusers": ds, "vireo": vs, "ratio": vs / ds if ds else None, "measures": notes[k]})
    return {"config": "two_stage", "width": cfg["width"], "height": cfg["height"], "frames": cfg["frames"],
            "parameters": params, "rows": rows, "diffusers_runs": d_runs, "vireo_runs": v_runs,
            "vireo_phases": report["runs"][1:]}


def print_two_stage(r: dict, repeat: int) -> None:
    fast = " (LTX-2.5's Fast recipe: ancestral stage 1)" if VERSION == "2.5" else ""
    print(f"\n== two stages{fast}: {r['width']}x{r['height']}, {r['frames']} frames (stage 1 at {r['width'] // 2}x{r['height'] // 2}), "
          f"8 + 3 distilled steps, no guidance; upsampler {r['parameters']['latent_upsampler'] / 1e6:.1f} M parameters")
    print(f"   {'part':12s}{'diffusers s':>12s}{'vireo s':>11s}{'ratio':>9s}   measures")
    for row in r["rows"]:
        ratio = f"{row['ratio']:8.2f}x" if row["ratio"] is not None else f"{'-':>9s}"
        print(f"   {row['phase']:12s}{fmt(row['diffusers'], 12)}{fmt(row['vireo'], 11)}{ratio}   {row['measures']}")
    print(f"   best of {repeat} (diffusers after a warm-up run; vireo: one process, after a warm-up run)")


# =========================================================================== LTX-2.5 temporal round

TEMPORAL_UPSAMPLER = "temporal_latent_upsampler"  # the folder name vireo-cli finds in a diffusers folder


def temporal_upsampler(seed: int, channels: int):
    """A temporal x2 latent upsampler (F -> 2F - 1) as narrow as two_stage_upsampler (mid 256, 2 + 2 blocks)."""
    from diffusers.pipelines.ltx2.latent_upsampler import LTX2LatentUpsamplerModel

    torch.manual_seed(seed)
    up = LTX2LatentUpsamplerModel(in_channels=channels, mid_channels=256, num_blocks_per_stage=2, dims=3,
                                  spatial_upsample=False, temporal_upsample=True)
    return mm.randomize_(up.float().eval(), seed * 100 + 78, std=0.02)


class TemporalPhaseTimer:
    """LTX2DFRTemporalRefinePipeline's phases: perf_counter wrappers on its own methods (encode_prompt,
    upsample_latents, prepare_latents, denoise, the decoders) and forward hooks on connectors, transformer and
    vocoder; nothing of __call__ is re-implemented."""

    def __init__(self, pipe):
        self.pipe = pipe

    @contextlib.contextmanager
    def active(self, acc: dict):
        pipe, handles, patched, state = self.pipe, [], [], {}
        clock = time.perf_counter
        acc.update({"encode_prompt": 0.0, "connectors": 0.0, "upsample_latents": 0.0, "prepare_latents": 0.0,
                    "denoise": 0.0, "denoise_calls": 0, "transformer": 0.0, "transformer_calls": 0, "vae_decode": 0.0,
                    "postprocess": 0.0, "audio_vae_decode": 0.0, "vocoder": 0.0})

        def pre(name):
            def hook(_m, _args):
                state[name] = clock()
            return hook

        def post(name):
            def hook(_m, _args, _out):
                acc[name] += clock() - state[name]
                if name == "transformer":
                    acc["transformer_calls"] += 1
            return hook

        for module, name in ((pipe.connectors, "connectors"), (pipe.transformer, "transformer"), (pipe.vocoder, "vocoder")):
            handles.append(module.register_forward_pre_hook(pre(name)))
            handles.append(module.register_forward_hook(post(name)))

        def wrap(obj, attr, name):
            orig = getattr(obj, attr)

            def timed(*a, **k):
                t0 = clock()
                try:
                    return orig(*a, **k)
                finally:
                    acc[name] += clock() - t0
                    if name == "denoise":
                        acc["denoise_calls"] += 1
            setattr(obj, attr, timed)
            patched.append((obj, attr))

        for attr in ("encode_prompt", "upsample_latents", "prepare_latents", "denoise"):
            wrap(pipe, attr, attr)
        wrap(pipe.vae, "decode", "vae_decode")
        wrap(pipe.video_processor, "postprocess_video", "postprocess")
        wrap(pipe.audio_vae, "decode", "audio_vae_decode")
        try:
            yield
        finally:
            for h in handles:
                h.remove()
            for obj, attr in patched:
                delattr(obj, attr)


TEMPORAL_PHASES = ("encode prompt", "denoise", "temporal upsample", "temporal tiles", "decode video", "decode audio",
                   "vocoder")


def diffusers_temporal_run(pipe, tpipe, cfg: dict) -> dict:
    """The DFR pass (output_type='latent') then LTX2DFRTemporalRefinePipeline round 1 on its latents, keyframes,
    positions and audio (output_type='np': the refined canvas and the audio decoded); one generator through both."""
    from diffusers.pipelines.ltx2.utils import TEMPORAL_ROUND_DISTILLED_SIGMA_VALUES

    generator = torch.Generator().manual_seed(SEED)
    acc1: dict = {}
    t0 = time.perf_counter()
    with DfrPhaseTimer(pipe).active(acc1):
        out = pipe(prompt=PROMPT, height=cfg["height"], width=cfg["width"], num_frames=cfg["frames"], frame_rate=FPS,
                   sigmas=list(DISTILLED_SIGMA_VALUES), noise_scale=None, generate_slots=True, keyframe_positions=None,
                   freeze_audio=False, use_cross_timestep=True, generator=generator, output_type="latent",
                   return_dict=True, max_sequence_length=MAX_SEQUENCE_LENGTH)
    t1 = time.perf_counter()
    canvas = dfr_canvas(cfg)
    assert acc1["transformer_calls"] == len(DISTILLED_SIGMA_VALUES), acc1["transformer_calls"]
    assert out.frames.shape[2] == canvas["canvas_latent_fhw"][0], out.frames.shape
    assert list(out.keyframe_positions) == list(canvas["slot_positions"]), out.keyframe_positions
    acc2: dict = {}
    with TemporalPhaseTimer(tpipe).active(acc2):
        frames, audio, keyframes, positions = tpipe(
            prompt=PROMPT, latents=out.frames, keyframes_latents=out.keyframes,
            keyframe_positions=list(out.keyframe_positions), audio_latents=out.audio, height=cfg["height"],
            width=cfg["width"], num_frames=canvas["canvas_frames"], frame_rate=FPS, round_index=1,
            use_cross_timestep=True, generator=generator, output_type="np", return_dict=False,
            max_sequence_length=MAX_SEQUENCE_LENGTH)
    t2 = time.perf_counter()
    out_frames = 2 * (canvas["canvas_frames"] - 1) + 1
    assert keyframes is None and positions is None
    assert frames.shape[1:4] == (out_frames, cfg["height"], cfg["width"]), frames.shape
    assert acc2["transformer_calls"] == len(TEMPORAL_ROUND_DISTILLED_SIGMA_VALUES) * acc2["denoise_calls"], acc2
    decode = acc2["vae_decode"] + acc2["postprocess"] + acc2["audio_vae_decode"] + acc2["vocoder"]
    round_s = (t2 - t1) - acc2["encode_prompt"] - acc2["connectors"] - decode  # upsample + tiles (+ stitching)
    return {
        "encode prompt": acc1["encode_prompt"] + acc1["connectors"] + acc2["encode_prompt"] + acc2["connectors"],
        "denoise": acc1["denoise"],
        "temporal upsample": acc2["upsample_latents"],
        "temporal tiles": round_s - acc2["upsample_latents"],
        "round": round_s,
        "decode video": acc2["vae_decode"] + acc2["postprocess"],
        "decode audio": acc2["audio_vae_decode"],
        "vocoder": acc2["vocoder"],
        "_detail": {"pass_call_wall": t1 - t0, "round_call_wall": t2 - t1, "call_wall": t2 - t0,
                    "pass_encode_prompt": acc1["encode_prompt"] + acc1["connectors"],
                    "round_encode_prompt": acc2["encode_prompt"] + acc2["connectors"],
                    "pass_prepare_latents": acc1["prepare_latents"] + acc1["prepare_audio_latents"],
                    "round_prepare_latents": acc2["prepare_latents"], "round_denoise": acc2["denoise"],
                    "tiles": acc2["denoise_calls"], "round_transformer_calls": acc2["transformer_calls"],
                    "round_transformer_sum": acc2["transformer"], "out_frames": out_frames, "out_fps": 2 * FPS,
                    "finite": bool(torch.isfinite(torch.as_tensor(frames)).all()) and bool(torch.isfinite(audio).all())},
    }


def bench_temporal(name: str, cli: str, repeat: int, tmp: Path, tok_src: Path) -> dict:
    """`--temporal-rounds 1`: the config's pipeline folder plus temporal_latent_upsampler/, at the request whose DFR
    canvas needs no pad (so both sides decode the same frames: diffusers' round decodes the whole canvas)."""
    from diffusers import LTX2DFRTemporalRefinePipeline, LTXEulerAncestralRFScheduler
    from diffusers.pipelines.ltx2.latent_upsampler import LTX2LatentUpsamplerModel

    base = CONFIGS[name]
    cfg = dict(base, frames=dfr_canvas(base)["canvas_frames"])
    canvas = dfr_canvas(cfg)
    assert canvas["canvas_frames"] == cfg["frames"], canvas
    folder = tmp / f"{name}_temporal"
    t0 = time.perf_counter()
    params = write_pipeline(folder, cfg["build"](), tok_src)
    channels = json.loads((folder / "vae" / "config.json").read_text())["latent_channels"]
    up = temporal_upsampler(SEED, channels)
    up.save_pretrained(folder / TEMPORAL_UPSAMPLER, safe_serialization=True)
    params["temporal_latent_upsampler"] = sum(p.numel() for p in up.parameters())
    build_s = time.perf_counter() - t0

    t0 = time.perf_counter()
    pipe, _ = load_pipeline(folder)
    upsampler = LTX2LatentUpsamplerModel.from_pretrained(folder / TEMPORAL_UPSAMPLER).float().eval()
    c = pipe.components
    tpipe = LTX2DFRTemporalRefinePipeline(
        scheduler=LTXEulerAncestralRFScheduler(eta=0.5), vae=c["vae"], audio_vae=c["audio_vae"],
        text_encoder=c["text_encoder"], tokenizer=c["tokenizer"], connectors=c["connectors"],
        transformer=c["transformer"], vocoder=c["vocoder"], temporal_latent_upsampler=upsampler)
    tpipe.set_progress_bar_config(disable=True)
    diffusers_temporal_run(pipe, tpipe, cfg)  # warm-up
    d_runs = [diffusers_temporal_run(pipe, tpipe, cfg) for _ in range(repeat)]
    del pipe, tpipe
    diffusers_s = time.perf_counter() - t0

    t0 = time.perf_counter()
    report = vireo_run(cli, folder, cfg, tmp / f"{folder.name}-vireo.mp4", repeat + 1, ["--set", "temporal_rounds=1"])
    vireo_s = time.perf_counter() - t0
    reason = report.get("stages_reason", "")
    out_frames = 2 * (cfg["frames"] - 1) + 1
    if "temporal round" not in reason:
        sys.exit(f"bench generate --temporal-rounds 1: vireo ran no temporal round (stages {report.get('stages')!r}, "
                 f"reason {reason!r})")
    if report.get("frames") != out_frames or report.get("fps") != 2 * FPS:
        sys.exit(f"bench generate --temporal-rounds 1: vireo wrote {report.get('frames')} frames at {report.get('fps')} "
                 f"fps, not {out_frames} at {2 * FPS:g}")
    v_runs = []
    for p in report["runs"][1:]:
        missing = [k for k in ("encode prompt", "denoise", "upsample latents", "temporal refine", "decode video")
                   if k not in p]
        if missing:
            sys.exit(f"bench generate --temporal-rounds 1: vireo reported no time for {missing}: {json.dumps(p)}")
        r = {"encode prompt": p["encode prompt"], "denoise": p["denoise"], "temporal upsample": p["upsample latents"],
             "temporal tiles": p["temporal refine"], "decode video": p["decode video"],
             "decode audio": p.get("decode audio", 0.0), "vocoder": p.get("vocoder", 0.0)}
        r["round"] = r["temporal upsample"] + r["temporal tiles"]
        v_runs.append(r)
    notes = {
        "encode prompt": "diffusers: both calls' encode_prompt + connectors (the round encodes the prompt again); "
                         "vireo: once",
        "denoise": "the DFR pass's 8 steps (LTX2DFRPipeline.denoise, output_type='latent')",
        "temporal upsample": "the temporal x2 latent upsampler on the canvas (upsample_latents)",
        "temporal tiles": "the round's keyframe-seam tiles, 4 DiT steps each (TEMPORAL_ROUND_DISTILLED_SIGMA_VALUES, "
                          "ancestral eta 0.5; prepare_latents + denoise + stitch)",
        "round": "temporal upsample + temporal tiles",
        "decode video": f"vae.decode + postprocess_video of the refined {out_frames}-frame canvas",
        "decode audio": "audio_vae.decode (the pass's audio, frozen through the round)",
        "vocoder": "vocoder forward",
    }
    rows = []
    for k in ("encode prompt", "denoise", "temporal upsample", "temporal tiles", "round", "decode video",
              "decode audio", "vocoder"):
        ds, vs = min(r[k] for r in d_runs), min(r[k] for r in v_runs)
        rows.append({"phase": k, "diffusers": ds, "vireo": vs, "ratio": vs / ds if ds else None, "measures": notes[k]})
    d_tot = min(sum(r[k] for k in TEMPORAL_PHASES) for r in d_runs)
    v_tot = min(sum(r[k] for k in TEMPORAL_PHASES) for r in v_runs)
    d_wall, v_wall = min(r["_detail"]["call_wall"] for r in d_runs), min(report["run_seconds"][1:])
    totals = {
        "compute": {"what": "encode prompt + denoise + temporal upsample + temporal tiles + decode video + decode audio "
                            "+ vocoder (best run)", "diffusers": d_tot, "vireo": v_tot, "ratio": v_tot / d_tot},
        "wall": {"what": "best warm run, wall clock: diffusers LTX2DFRPipeline + LTX2DFRTemporalRefinePipeline "
                         "__call__s, vireo Ltx2Pipeline::generate (both without the MP4)",
                 "diffusers": d_wall, "vireo": v_wall, "ratio": v_wall / d_wall},
    }
    return {"config": f"{name} temporal round 1", "section": "temporal round 1", "width": cfg["width"],
            "height": cfg["height"], "frames": cfg["frames"], "fps": FPS, "out_frames": out_frames, "out_fps": 2 * FPS,
            "dfr": canvas, "tiles": d_runs[0]["_detail"]["tiles"], "parameters": params, "rows": rows, "totals": totals,
            "diffusers_runs": [{k: r[k] for k in r if k != "_detail"} | r["_detail"] for r in d_runs],
            "vireo_runs": v_runs, "vireo_phases": report["runs"][1:], "vireo_frames": report.get("frames"),
            "vireo_fps": report.get("fps"), "load_seconds": {"vireo": report["load_seconds"]},
            "vireo_stages": {"stages": report.get("stages"), "stages_reason": reason},
            "bench_seconds": {"build_and_write": build_s, "diffusers": diffusers_s, "vireo": vireo_s}}


def print_rows(r: dict) -> None:
    """A section's phase rows and its totals (compute, wall)."""
    print(f"   {'phase':20s}{'diffusers s':>12s}{'vireo s':>11s}{'ratio':>9s}   measures")
    for row in r["rows"]:
        ratio = f"{row['ratio']:8.2f}x" if row["ratio"] is not None else f"{'-':>9s}"
        print(f"   {row['phase']:20s}{fmt(row['diffusers'], 12)}{fmt(row['vireo'], 11)}{ratio}   {row['measures']}")
    for key, label in (("compute", "total compute"), ("wall", "wall")):
        t = r["totals"][key]
        print(f"   {label:20s}{fmt(t['diffusers'], 12)}{fmt(t['vireo'], 11)}{t['ratio']:8.2f}x   {t.get('what', '')}")


def print_temporal(r: dict, repeat: int) -> None:
    print(f"\n== {r['config']}: {r['width']}x{r['height']}, {r['frames']} frames at {r['fps']:g} fps -> "
          f"{r['out_frames']} frames at {r['out_fps']:g} fps (DFR canvas {r['dfr']['canvas_frames']}, slots at "
          f"{r['dfr']['slot_positions']}; round 1: {r['tiles']} tile(s)); temporal upsampler "
          f"{r['parameters']['temporal_latent_upsampler'] / 1e6:.1f} M parameters")
    print(f"   diffusers: LTX2DFRPipeline (latent) + LTX2DFRTemporalRefinePipeline round 1 (np); vireo: "
          f"{r['vireo_stages']['stages_reason']}")
    print_rows(r)
    b = r["bench_seconds"]
    print(f"   best of {repeat} (diffusers after a warm-up run; vireo: one process, after a warm-up run); bench time: "
          f"build+write {b['build_and_write']:.1f} s, diffusers {b['diffusers']:.1f} s, vireo {b['vireo']:.1f} s")


# --third-stage (2.5): the 4K path at bench sizes. The request's size is the third stage's; stage 1 runs at a quarter.
THIRD_STAGE_SIZE = {"tiny": (384, 256), "medium": (768, 512)}
THIRD_STAGE_PHASES = ("encode prompt", "stage 1", "upsample", "second pass", "rebuild keyframes", "third stage",
                      "decode video", "decode audio", "vocoder")


def diffusers_third_stage(pipe, ups, cfg: dict) -> dict:
    """diffusers' "third spatial stage" recipe without temporal rounds: stage 1 at a quarter (latent), the upsampler on
    canvas and slots, the second pass at half (latent), the upsampler on its canvas, rebuild_epilogue_keyframes, the
    epilogue pass at the size in epilogue_tiles' 2 x 2 tiles (latent), then the decode as the pipeline's own (the
    canvas trimmed to the frames asked for, the VAE, postprocess; stage 1's audio through the audio VAE and vocoder)."""
    from diffusers.pipelines.ltx2.dfr_layout import epilogue_tiles, pixel_to_latent_index
    from diffusers.pipelines.ltx2.utils import STAGE_2_DISTILLED_SIGMA_VALUES, trim_canvas

    s2 = list(STAGE_2_DISTILLED_SIGMA_VALUES)
    w, h, n = cfg["width"], cfg["height"], cfg["frames"]
    g = torch.Generator().manual_seed(SEED)
    common = dict(prompt=PROMPT, frame_rate=FPS, use_cross_timestep=True, max_sequence_length=MAX_SEQUENCE_LENGTH,
                  return_dict=False, generator=g, output_type="latent")
    acc = [{}, {}, {}]
    t = [time.perf_counter()]
    with DfrPhaseTimer(pipe).active(acc[0]):
        c1, a1, k1, p1 = pipe(**common, height=h // 4, width=w // 4, num_frames=n, sigmas=list(DISTILLED_SIGMA_VALUES))
    t.append(time.perf_counter())
    up = ups(latents=c1, latents_normalized=False, height=h // 4, width=w // 4, output_type="latent", return_dict=False)[0]
    upk = ups(latents=k1, latents_normalized=False, height=h // 4, width=w // 4, output_type="latent",
              return_dict=False)[0]
    t.append(time.perf_counter())
    with DfrPhaseTimer(pipe).active(acc[1]):
        c2, _, k2, p2 = pipe(**common, height=h // 2, width=w // 2, num_frames=n, latents=up, audio_latents=a1,
                             keyframes_latents=upk, keyframe_positions=p1, noise_scale=s2[0], sigmas=s2)
    t.append(time.perf_counter())
    up3 = ups(latents=c2, latents_normalized=False, height=h // 2, width=w // 2, output_type="latent",
              return_dict=False)[0]
    t.append(time.perf_counter())
    kf = pipe.rebuild_epilogue_keyframes(k2, decode_timestep=0.0, decode_noise_scale=0.0, seed=0,
                                         device=torch.device("cpu"), dtype=torch.float32)
    t.append(time.perf_counter())
    canvas = (c2.shape[2] - 1) * 8 + 1
    tiles = epilogue_tiles(latent_shape=((canvas - 1) // 8 + 1, h // 32, w // 32), frame_tiles=1,
                           frame_seams=[pixel_to_latent_index(p, 8) for p in p2])
    with DfrPhaseTimer(pipe).active(acc[2]):
        c3 = pipe(**common, height=h, width=w, num_frames=canvas, latents=up3, audio_latents=a1, generate_slots=False,
                  guidance_keyframe_latents=kf, guidance_keyframe_positions=p2, noise_scale=s2[0], sigmas=s2,
                  freeze_audio=True, video_tiles=tiles)[0]
    t.append(time.perf_counter())
    video = pipe.vae.decode(trim_canvas(c3, n, 8).to(pipe.vae.dtype), None, return_dict=False)[0]
    frames = pipe.video_processor.postprocess_video(video, output_type="np")
    t.append(time.perf_counter())
    mel = pipe.audio_vae.decode(a1.to(pipe.audio_vae.dtype), return_dict=False)[0]
    t.append(time.perf_counter())
    pipe.vocoder(mel)
    t.append(time.perf_counter())
    assert frames.shape[1:4] == (n, h, w), frames.shape
    assert acc[2]["transformer_calls"] == len(s2) * len(tiles), acc[2]["transformer_calls"]
    lap = [b - a for a, b in zip(t, t[1:])]
    prompt = sum(a["encode_prompt"] + a["connectors"] for a in acc)
    start = lambda a: a["prepare_latents"] + a["prepare_audio_latents"]  # noqa: E731
    return {"encode prompt": prompt, "stage 1": acc[0]["denoise"] + start(acc[0]), "upsample": lap[1] + lap[3],
            "second pass": acc[1]["denoise"] + start(acc[1]), "rebuild keyframes": lap[4],
            "third stage": acc[2]["denoise"] + start(acc[2]), "decode video": lap[6], "decode audio": lap[7],
            "vocoder": lap[8], "_detail": {"tiles": len(tiles), "wall": t[-1] - t[0], "keyframes": int(kf.shape[2])}}


def bench_third_stage(name: str, cli: str, repeat: int, tmp: Path, tok_src: Path) -> dict:
    from diffusers.pipelines.ltx2 import LTX2LatentUpsamplePipeline

    width, height = THIRD_STAGE_SIZE[name]
    cfg = dict(CONFIGS[name], width=width, height=height)
    folder = tmp / f"{name}_third_stage"
    params = write_pipeline(folder, cfg["build"](), tok_src)
    channels = json.loads((folder / "vae" / "config.json").read_text())["latent_channels"]
    upsampler = two_stage_upsampler(SEED, channels)
    upsampler.save_pretrained(folder / "latent_upsampler", safe_serialization=True)
    params["latent_upsampler"] = sum(p.numel() for p in upsampler.parameters())
    pipe, _ = load_pipeline(folder)
    ups = LTX2LatentUpsamplePipeline(vae=pipe.vae, latent_upsampler=upsampler)
    ups.set_progress_bar_config(disable=True)
    diffusers_third_stage(pipe, ups, cfg)  # warm-up
    d_runs = [diffusers_third_stage(pipe, ups, cfg) for _ in range(repeat)]
    del pipe, ups

    cmd = [cli, "generate", "--model", str(folder), "--prompt", PROMPT, "--frames", str(cfg["frames"]),
           "--width", str(width), "--height", str(height), "--fps", f"{FPS:g}", "--seed", str(SEED), "--stages", "two",
           "--set", "third_stage=1", "--out", str(tmp / f"{folder.name}-vireo.mp4"), "--json", "--repeat",
           str(repeat + 1)]
    report = benchcli.run_json("bench generate --third-stage", cmd)
    reason = report.get("stages_reason", "")
    if "third spatial stage" not in reason:
        sys.exit(f"bench generate --third-stage: vireo ran no third stage (reason {reason!r})")
    v_runs = []
    for p in report["runs"][1:]:
        missing = [k for k in ("denoise", "refine", "upsample latents", "rebuild keyframes", "third stage",
                               "decode video") if k not in p]
        if missing:
            sys.exit(f"bench generate --third-stage: vireo reported no time for {missing}: {json.dumps(p)}")
        v_runs.append({"encode prompt": p.get("encode prompt", 0.0), "stage 1": p["denoise"],
                       "upsample": p["upsample latents"], "second pass": p["refine"],
                       "rebuild keyframes": p["rebuild keyframes"], "third stage": p["third stage"],
                       "decode video": p["decode video"], "decode audio": p.get("decode audio", 0.0),
                       "vocoder": p.get("vocoder", 0.0)})
    notes = {"encode prompt": "diffusers: each of its three calls encodes the prompt; vireo: once",
             "stage 1": f"8 distilled steps at {width // 4}x{height // 4} (start state included)",
             "upsample": "the spatial upsampler on stage 1's canvas and slots, then on the second pass's canvas",
             "second pass": f"3 steps at {width // 2}x{height // 2}",
             "rebuild keyframes": "each slot decoded alone, Lanczos x2 in 8-bit, encoded again",
             "third stage": f"3 steps at {width}x{height}, one DiT call per tile per step, blended",
             "decode video": f"the canvas trimmed to {cfg['frames']} frames, VAE decode + postprocess",
             "decode audio": "stage 1's audio through the audio VAE", "vocoder": "vocoder forward"}
    rows = []
    for k in THIRD_STAGE_PHASES:
        ds, vs = min(r[k] for r in d_runs), min(r[k] for r in v_runs)
        rows.append({"phase": k, "diffusers": ds, "vireo": vs, "ratio": vs / ds if ds else None, "measures": notes[k]})
    d_tot = min(sum(r[k] for k in THIRD_STAGE_PHASES) for r in d_runs)
    v_tot = min(sum(r[k] for k in THIRD_STAGE_PHASES) for r in v_runs)
    d_wall, v_wall = min(r["_detail"]["wall"] for r in d_runs), min(report["run_seconds"][1:])
    return {"config": f"{name} third stage", "section": "third stage", "width": width, "height": height,
            "frames": cfg["frames"], "fps": FPS, "tiles": d_runs[0]["_detail"]["tiles"],
            "keyframes": d_runs[0]["_detail"]["keyframes"], "parameters": params, "rows": rows,
            "totals": {"compute": {"what": "the phases above (best run)", "diffusers": d_tot, "vireo": v_tot,
                                   "ratio": v_tot / d_tot},
                       "wall": {"what": "best warm run, wall clock (diffusers: the three calls and the decode; vireo: "
                                        "Ltx2Pipeline::generate, without the MP4)",
                                "diffusers": d_wall, "vireo": v_wall, "ratio": v_wall / d_wall}},
            "diffusers_runs": [{k: r[k] for k in r if k != "_detail"} | r["_detail"] for r in d_runs],
            "vireo_runs": v_runs, "vireo_phases": report["runs"][1:], "vireo_stages_reason": reason}


def print_third_stage(r: dict, repeat: int) -> None:
    print(f"\n== {r['config']}: {r['width']}x{r['height']}, {r['frames']} frames (stage 1 at {r['width'] // 4}x"
          f"{r['height'] // 4}, the second pass at {r['width'] // 2}x{r['height'] // 2}; {r['keyframes']} keyframe(s) "
          f"rebuilt, {r['tiles']} tiles)")
    print(f"   vireo: {r['vireo_stages_reason']}")
    print_rows(r)
    print(f"   best of {repeat} (diffusers after a warm-up run; vireo: one process, after a warm-up run)")


def fmt(x, width=10, digits=3):
    return f"{x:{width}.{digits}f}" if x is not None else f"{'n/a':>{width}}"


def print_config(r: dict, repeat: int) -> None:
    p = r["parameters"]
    slots = f" + {len(r['dfr']['slot_positions'])} slot frame(s)" if "dfr" in r else ""
    print(f"\n== {r['config']}: {r['width']}x{r['height']}, {r['frames']} frames at {r['fps']:g} fps "
          f"(latent {'x'.join(map(str, r['latent_fhw']))}{slots} = {r['video_tokens']} video tokens), "
          f"{r['steps']} distilled steps, no guidance, {r['max_sequence_length']} text tokens")
    print(f"   {r['describe']}; parameters: transformer {p['transformer'] / 1e6:.1f} M, connectors "
          f"{p['connectors'] / 1e6:.1f} M, Gemma {p['text_encoder'] / 1e6:.2f} M, VAE {p['vae'] / 1e6:.2f} M, "
          f"audio VAE {p['audio_vae'] / 1e6:.2f} M, vocoder {p['vocoder'] / 1e6:.2f} M")
    if "dfr" in r:
        c = r["dfr"]
        print(f"   LTX2DFRPipeline, one DFR pass: canvas {c['canvas_frames']} frames (segment {c['segment']}, slots at "
              f"{c['slot_positions']}); vireo: {r['vireo_stages']['stages_reason']}")
    print(f"   {'phase':20s}{'diffusers s':>12s}{'vireo s':>11s}{'ratio':>9s}   diffusers measures")
    for row in r["rows"]:
        ratio = f"{row['ratio']:8.2f}x" if row["ratio"] is not None else f"{'-':>9s}"
        print(f"   {row['phase']:20s}{fmt(row['diffusers'], 12)}{fmt(row['vireo'], 11)}{ratio}   {row['diffusers_measures']}")
    for key, label in (("compute", "total compute"), ("with_loads", "total with loads")):
        t = r["totals"][key]
        print(f"   {label:20s}{fmt(t['diffusers'], 12)}{fmt(t['vireo'], 11)}{t['ratio']:8.2f}x   {t['what']}")
    w = r["totals"]["wall"]
    print(f"   {'wall':20s}{fmt(w['diffusers'], 12)}{fmt(w['vireo'], 11)}{w['ratio']:8.2f}x   {w['what']}")
    print(f"   best of {repeat} per phase (diffusers after a warm-up call and a warm-up load; vireo: one process, after a warm-up run)")
    cb = r["component_bytes"]
    if cb:
        parts = ", ".join(f"{k} {v / 1e6:.2f}" for k, v in sorted(cb.items()))
        print(f"   vireo resident component bytes (MB, at exit): {parts}; total {sum(cb.values()) / 1e6:.2f} MB")
    b = r["bench_seconds"]
    print(f"   bench time: build+write {b['build_and_write']:.1f} s, diffusers {b['diffusers']:.1f} s, vireo {b['vireo']:.1f} s")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cli", help="path of vireo-cli")
    ap.add_argument("--small", action="store_true", help="only the tiny configuration")
    ap.add_argument("--repeat", type=int, default=2, help="best of N (default 2)")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument("--two-stage", action="store_true", help="only the two-stage distilled path (medium model)")
    ap.add_argument("--audio", action="store_true",
                    help="2.3 only: audio-to-video per configuration (the sound encoded and held frozen) against diffusers' loop")
    ap.add_argument("--reference", action="store_true",
                    help="2.3 only: an IC-LoRA's reference clip per configuration against diffusers' LTX2InContextPipeline")
    ap.add_argument("--guided", action="store_true",
                    help="2.3 only: the dev guidance (CFG, STG, modality) denoise per configuration, and its cost over CFG alone")
    ap.add_argument("--version", choices=("2.3", "2.5"), default="2.3",
                    help="LTX version (default 2.3); 2.5: LTX-2.5 pipelines against diffusers' LTX2DFRPipeline")
    ap.add_argument("--enhance", action="store_true",
                    help="2.5 only: the prompt enhancer per configuration against diffusers' LTX2DFRPipeline.enhance_prompt")
    ap.add_argument("--enhance-image", action="store_true",
                    help="2.5 only: the prompt enhancer shown a start image (its vision tower) against enhance_prompt(image=...)")
    ap.add_argument("--temporal-rounds", type=int, choices=(0, 1), default=0,
                    help="2.5 only: 1 adds a 'temporal round 1' section per configuration (the DFR pass then one "
                         "temporal refine round, against LTX2DFRTemporalRefinePipeline)")
    ap.add_argument("--third-stage", action="store_true",
                    help="2.5 only: a 'third stage' section per configuration (the 4K path: two DFR passes, then the "
                         "tiled third stage at the size, against diffusers' recipe)")
    args = ap.parse_args()
    if args.repeat < 1:
        ap.error("--repeat must be >= 1")
    if args.audio and (args.version != "2.3" or args.two_stage):
        ap.error("--audio is LTX-2.3's, without --two-stage")
    if args.reference and (args.version != "2.3" or args.two_stage):
        ap.error("--reference is LTX-2.3's, without --two-stage")
    if args.guided and (args.version != "2.3" or args.two_stage):
        ap.error("--guided is LTX-2.3's, without --two-stage")
    if (args.enhance or args.enhance_image) and args.version != "2.5":
        ap.error("--enhance and --enhance-image are LTX-2.5's (--version 2.5)")
    if args.temporal_rounds and args.version != "2.5":
        ap.error("--temporal-rounds is LTX-2.5's only (--version 2.5)")
    if args.third_stage and args.version != "2.5":
        ap.error("--third-stage is LTX-2.5's only (--version 2.5)")
    global VERSION
    VERSION = args.version
    if not (os.path.isfile(args.cli) and os.access(args.cli, os.X_OK)):
        sys.exit(f"bench generate: {args.cli} is not an executable")
    start = time.perf_counter()
    load_before = os.getloadavg()[0]  # other work on the machine skews every number; reported, not corrected
    torch.set_grad_enabled(False)  # the pipeline runs under no_grad anyway; this covers the loads' checks
    names = ["tiny"] if args.small else ["tiny", "medium"]
    threads = torch.get_num_threads()  # torch's default: nothing here sets it
    if not args.json:
        dfr = (" (the Fast recipe: two LTX2Pipeline calls, ancestral stage 1)" if args.two_stage else
               " (one DFR pass: diffusers' LTX2DFRPipeline)") if VERSION == "2.5" else ""
        print(f"bench generate: LTX-{VERSION} text-to-video+audio{dfr} on CPU, float32; diffusers {mm.diffusers.__version__}, "
              f"torch {torch.__version__}; threads: torch default {threads} (diffusers), vireo-cli runs with "
              f"libtorch's default (nothing sets it; OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')})",
              flush=True)
    results = []
    with tempfile.TemporaryDirectory(prefix="vireo-bench-generate-") as tmp:
        tmp = Path(tmp)
        tok_src = tmp / "tokenizer_src"
        fx.tiny_tokenizer(tok_src)
        for name in ([] if args.two_stage else names):
            r = bench_config(name, args.cli, args.repeat, tmp, tok_src)
            results.append(r)
            if not args.json:
                print_config(r, args.repeat)
                sys.stdout.flush()
            if args.guided:
                r = bench_guided(name, args.cli, args.repeat, tmp, tok_src)
                results.append(r)
                if not args.json:
                    print_guided(r, args.repeat)
                    sys.stdout.flush()
            if args.audio:
                r = bench_audio(name, args.cli, args.repeat, tmp, tok_src)
                results.append(r)
                if not args.json:
                    print_audio(r, args.repeat)
                    sys.stdout.flush()
            if args.reference:
                r = bench_reference(name, args.cli, args.repeat, tmp, tok_src)
                results.append(r)
                if not args.json:
                    print_reference(r, args.repeat)
                    sys.stdout.flush()
            for image in [False] * args.enhance + [True] * args.enhance_image:
                r = bench_enhance(name, args.cli, args.repeat, tmp, tok_src, image)
                results.append(r)
                if not args.json:
                    print_enhance(r, args.repeat)
                    sys.stdout.flush()
            if args.temporal_rounds:
                r = bench_temporal(name, args.cli, args.repeat, tmp, tok_src)
                results.append(r)
                if not args.json:
                    print_temporal(r, args.repeat)
                    sys.stdout.flush()
            if args.third_stage:
                r = bench_third_stage(name, args.cli, args.repeat, tmp, tok_src)
                results.append(r)
                if not args.json:
                    print_third_stage(r, args.repeat)
                    sys.stdout.flush()
        if args.two_stage:
            r = bench_two_stage(args.cli, args.repeat, tmp, tok_src)
            results.append(r)
            if not args.json:
                print_two_stage(r, args.repeat)
    total = time.perf_counter() - start
    load_after = os.getloadavg()[0]
    cores = os.cpu_count() or 1
    notes = [
        "load phases: diffusers times each component's from_pretrained in this process (page cache warm); vireo "
        "loads in every fresh process, all resident components at once before the first run (the load row).",
        "mux: vireo encodes and writes the MP4; the diffusers pipeline returns arrays (no PyAV here), so n/a.",
        "vireo's encode prompt frees Gemma afterwards (releaseTextEncoder), so component_bytes has no text_encoder.",
        f"1-minute load average {load_before:.2f} before, {load_after:.2f} after, on {cores} CPUs (this bench alone "
        f"keeps it near {threads}; much more means other work ran alongside and the times are not comparable to other runs)",
    ]
    if VERSION == "2.5" and args.two_stage:
        notes.append("LTX-2.5 --two-stage: the Fast recipe on both sides (no DFR, no keyframe slots): stage 1's "
                     "ancestral draws come from each side's own generator seeded seed + 10000, the first latent frame "
                     "marked in every transformer call; vireo-cli ran the recipe asked for (stages_reason).")
    elif VERSION == "2.5":
        notes.append("LTX-2.5: both sides run one DFR pass on the padded canvas (keyframe slot tokens included); "
                     "diffusers' prepare_latents and prepare_audio_latents (start state) are in no row, like Vireo's "
                     "start state (the JSON's diffusers runs list them); vireo-cli chose the DFR pass itself (stages_reason).")
    if args.temporal_rounds:
        notes.append("temporal round 1 (the 'temporal round 1' sections): a second pipeline folder per configuration "
                     "with temporal_latent_upsampler/ (mid 256, 2 + 2 blocks, temporal x2), at the frames whose DFR canvas "
                     "has no pad (diffusers' round decodes the whole canvas); vireo-cli --set temporal_rounds=1 (its "
                     "stages_reason must name the temporal round; its JSON's frames/fps must be (F-1)*2+1 at 2x fps). "
                     "diffusers encodes the prompt twice (pass and round), vireo once; both sides' round = temporal "
                     "upsample + tiles; the pass's video is not decoded on either side.")
    if args.json:
        print(json.dumps({"bench": "generate", "version": VERSION, "temporal_rounds": args.temporal_rounds, "threads": {"torch_default": threads,
                          "vireo": "libtorch default (not reported by generate --json)"},
                          "repeat": args.repeat, "diffusers_version": mm.diffusers.__version__,
                          "torch_version": torch.__version__, "configs": results, "notes": notes,
                          "load_average": {"before": load_before, "after": load_after, "cpus": cores},
                          "total_seconds": total}, indent=2))
    else:
        print()
        for n in notes:
            print(f"note: {n}")
        print(f"total {total:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
