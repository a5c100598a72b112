"""`vireo-bench generate --ideogram`: Ideogram-4 text-to-image on CPU, phase by phase, in Vireo
next to diffusers' Ideogram4Pipeline running the same weights and settings in the same run, as
ratios vireo_seconds / diffusers_seconds (< 1: Vireo is faster).

Usage: bench_generate_ideogram.py VIREO_CLI [--small] [--repeat N] [--json]

The pipeline is the parity fixture's (tests/fixtures/make_ideogram4_fixtures.py): two 2-layer
64-wide DiTs, a 36-layer 32-wide Qwen3-VL text tower, a 4-level FLUX.2 VAE, the Qwen2 byte-level
BPE tokenizer, float32. Configurations (--small runs only the first):
  tiny    64x48, 5 steps, guidance 3.5 at every step (both DiTs run each step)
  medium  256x256, 12 steps, guidance 3.5 (256 image tokens, so denoising takes a while)

Diffusers: one warm-up __call__, then best of N, the text tower, both transformers and the VAE
decode timed with hooks on the real modules and methods (encode_prompt, the DiTs' forwards,
vae.decode). Vireo: one `vireo-cli generate --json --repeat N+1`
(the first run loads and warms up), best of the warm runs' generate times; phase seconds from
the last run.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "fixtures"))
import benchcli  # noqa: E402
import make_ideogram4_fixtures as fx  # noqa: E402  (import-safe; sets the quiet/offline env via mm)

from diffusers import FlowMatchEulerDiscreteScheduler  # noqa: E402
from transformers import AutoTokenizer  # noqa: E402

PROMPT = "A photo of a cat holding a sign that says hello world"
SEED = 1234
GUIDANCE = 3.5
CONFIGS = {"tiny": dict(width=64, height=48, steps=5), "medium": dict(width=256, height=256, steps=12)}
PHASES = ["encode", "denoise", "decode"]


def build(folder: Path) -> fx.Ideogram4Pipeline:
    fx.write_tokenizer(folder / "tok")
    tok = AutoTokenizer.from_pretrained(str(folder / "tok"))
    pipe = fx.Ideogram4Pipeline(scheduler=FlowMatchEulerDiscreteScheduler(shift=1.0), vae=fx.tiny_vae(41),
                                text_encoder=fx.tiny_qwen3vl(len(tok), seed=42), tokenizer=tok,
                                transformer=fx.tiny_dit(43), unconditional_transformer=fx.tiny_dit(44))
    pipe.set_progress_bar_config(disable=True)
    pipe.save_pretrained(folder / "model", safe_serialization=True)
    shutil.rmtree(folder / "model" / "tokenizer")
    shutil.copytree(folder / "tok", folder / "model" / "tokenizer")
    return pipe


class Timers:
    """Seconds spent in each phase's modules during one call."""

    def __init__(self, pipe):
        self.acc = {p: 0.0 for p in PHASES}
        self.started = {}
        for module in (pipe.transformer, pipe.unconditional_transformer):
            module.register_forward_pre_hook(self.pre(id(module)))
            module.register_forward_hook(self.post(id(module), "denoise"))
        self.wrap(pipe, "encode_prompt", "encode")  # tokenizing, the tower and the taps, as vireo's encode
        self.wrap(pipe.vae, "decode", "decode")

    def wrap(self, obj, attr, phase):
        fn = getattr(obj, attr)

        def timed(*a, **k):
            t = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                self.acc[phase] += time.perf_counter() - t
        setattr(obj, attr, timed)

    def pre(self, key):
        def hook(_m, _args):
            self.started[key] = time.perf_counter()
        return hook

    def post(self, key, phase):
        def hook(_m, _args, _out):
            self.acc[phase] += time.perf_counter() - self.started.pop(key)
        return hook

    def reset(self):
        self.acc = {p: 0.0 for p in PHASES}


def bench_diffusers(pipe, cfg: dict, repeat: int, timers: Timers) -> dict:
    runs = []
    for r in range(repeat + 1):
        timers.reset()
        t = time.perf_counter()
        with torch.no_grad():
            pipe(PROMPT, height=cfg["height"], width=cfg["width"], num_inference_steps=cfg["steps"], guidance_scale=GUIDANCE,
                 guidance_schedule=None, generator=torch.Generator("cpu").manual_seed(SEED), output_type="pt")
        total = time.perf_counter() - t
        if r > 0:
            runs.append(dict(timers.acc, total=total))
    return {"best": {k: min(run[k] for run in runs) for k in PHASES + ["total"]}, "runs": runs}


def bench_vireo(cli: str, folder: Path, cfg: dict, repeat: int, out: Path) -> dict:
    cmd = [cli, "generate", "--model", str(folder), "--prompt", PROMPT, "--width", str(cfg["width"]), "--height", str(cfg["height"]),
           "--steps", str(cfg["steps"]), "--guidance", f"{GUIDANCE:g}", "--seed", str(SEED), "--no-gallery", "--out", str(out),
           "--json", "--repeat", str(repeat + 1)]
    report = benchcli.run_json("bench generate --ideogram", cmd)
    phases = report.get("phases", {})
    missing = [p for p in PHASES if p not in phases]
    if missing:
        sys.exit(f"bench generate --ideogram: `{' '.join(cmd)}` reported no time for {missing}:\n{json.dumps(report)}")
    return {"best": dict({p: phases[p] for p in PHASES}, total=min(report["run_seconds"][1:])), "seconds": report["run_seconds"][1:],
            "load_seconds": report.get("load_seconds"), "component_bytes": report.get("component_bytes", {})}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cli", help="path of vireo-cli")
    ap.add_argument("--small", action="store_true", help="only the tiny configuration")
    ap.add_argument("--repeat", type=int, default=2, help="best of N (default 2)")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args()
    if args.repeat < 1:
        ap.error("--repeat must be >= 1")
    if not (os.path.isfile(args.cli) and os.access(args.cli, os.X_OK)):
        sys.exit(f"bench generate --ideogram: {args.cli} is not an executable")
    start = time.perf_counter()
    load_before = os.getloadavg()[0]
    torch.set_grad_enabled(False)
    names = ["tiny"] if args.small else ["tiny", "medium"]
    results = []
    with tempfile.TemporaryDirectory(prefix="vireo-bench-ideogram-") as tmp:
        tmp = Path(tmp)
        pipe = build(tmp)
        timers = Timers(pipe)
        for name in names:
            cfg = CONFIGS[name]
            d = bench_diffusers(pipe, cfg, args.repeat, timers)
            v = bench_vireo(args.cli, tmp / "model", cfg, args.repeat, tmp / f"{name}.png")
            ratios = {k: (v["best"][k] / d["best"][k] if d["best"][k] > 0 else None) for k in PHASES + ["total"]}
            r = {"name": name, **cfg, "guidance": GUIDANCE, "diffusers": d, "vireo": v, "ratios": ratios}
            results.append(r)
            if not args.json:
                print(f"{name}: {cfg['width']}x{cfg['height']}, {cfg['steps']} steps, guidance {GUIDANCE:g}, best of {args.repeat}")
                print(f"  {'phase':<9} {'vireo s':>10} {'diffusers s':>12} {'ratio':>8}")
                for k in PHASES + ["total"]:
                    ratio = ratios[k]
                    print(f"  {k:<9} {v['best'][k]:>10.4f} {d['best'][k]:>12.4f} {ratio:>8.3f}" if ratio is not None
                          else f"  {k:<9} {v['best'][k]:>10.4f} {d['best'][k]:>12.4f} {'n/a':>8}")
                sys.stdout.flush()
    total = time.perf_counter() - start
    notes = ["encode and denoise: diffusers left-pads the prompt to max_sequence_length (2048 tokens) and runs the text "
             "tower and the conditional DiT over the pads (masked); vireo runs the prompt's own tokens only (the same "
             "latents: test_ideogram4 checks them against this pipeline).",
             "total: vireo's is the generate call (encode, denoise, decode, conversion to RGB); diffusers' the __call__ "
             "with output_type='pt'. Neither includes loading or writing the PNG.",
             f"1-minute load average {load_before:.2f} before, {os.getloadavg()[0]:.2f} after, on {os.cpu_count()} CPUs"]
    if args.json:
        print(json.dumps({"bench": "generate-ideogram4", "repeat": args.repeat, "configs": results, "notes": notes,
                          "total_seconds": total}, indent=2))
    else:
        for n in notes:
            print(f"note: {n}")
        print(f"total {total:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
