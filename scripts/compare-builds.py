#!/usr/bin/env python3
"""Two builds of vireo-cli, one set of jobs, the same bytes out: a refactor keeps every CPU
output as it was (issue #26). Runs dit-forward on the tiny fixtures (its output file compared
byte for byte) and generate for each kind of job (text-to-video, image-to-video, keyframes,
clip extend, two stages, a LoRA, the dev schedule with guidance, an Ideogram-4 image; a video's
encoded streams compared packet for packet with ffmpeg's streamhash, an image's pixels at 16
bits; the recipe aside, which holds timings).

Usage: scripts/compare-builds.py OLD_VIREO_CLI NEW_VIREO_CLI FIXTURES_ROOT [WORK_DIR]
Exit status 0 when every output is the same, 1 otherwise."""
import os
import shutil
import subprocess
import sys
import tempfile
import zlib
import struct
from pathlib import Path


def write_png(path, w, h, pixel):
    rows = b"".join(b"\x00" + bytes(c for x in range(w) for c in pixel(x, y)) for y in range(h))

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xffffffff)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
                     + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


def streamhash(path):
    # A PNG is one packet holding its text chunks (the recipe, with timings): its pixels then.
    copy = ["-pix_fmt", "rgb48le", "-f", "rawvideo"] if str(path).endswith(".png") else ["-c", "copy"]
    p = subprocess.run(["ffmpeg", "-v", "error", "-i", str(path), "-map", "0", *copy, "-f", "streamhash", "-hash", "sha256", "-"],
                       capture_output=True, text=True)
    return p.stdout.strip() if p.returncode == 0 else f"(ffmpeg failed: {p.stderr.strip()[:200]})"


def main():
    if len(sys.argv) < 4:
        print(__doc__)
        return 2
    old, new, fixtures = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
    work = Path(sys.argv[4]) if len(sys.argv) > 4 else Path(tempfile.mkdtemp(prefix="vireo-compare-"))
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    root = fixtures / "ltx2pipeline" / "v23"
    dit = fixtures / "ltx2dit" / "v23"
    picture, second = work / "harbour.png", work / "dusk.png"
    write_png(picture, 80, 48, lambda x, y: (40 + 2 * x, 30 + 3 * y, 128))
    write_png(second, 64, 64, lambda x, y: (200 - 2 * x, 90, 40 + 2 * y))
    clip = work / "clip.mp4"
    model = ["--model", root / "diffusers"]
    size = ["--frames", 9, "--width", 64, "--height", 64]
    jobs = {
        "dit-forward, bf16 diffusers": ("dit.safetensors", ["dit-forward", "--model", dit / "diffusers", "--inputs", dit / "case_base.safetensors"]),
        "dit-forward, scaled FP8": ("dit-fp8.safetensors", ["dit-forward", "--model", dit / "fp8.safetensors", "--inputs", dit / "case_fp8.safetensors"]),
        "dit-forward, GGUF": ("dit-gguf.safetensors", ["dit-forward", "--model", dit / "transformer.gguf", "--inputs", dit / "case_gguf.safetensors"]),
        "text to video": ("t2v.mp4", ["generate", *model, *size, "--prompt", "  a lighthouse  at dusk,\tgulls\u00a0crying  ", "--seed", 11]),
        "image to video": ("i2v.mp4", ["generate", *model, *size, "--prompt", "the harbour wakes", "--seed", 12, "--image", picture,
                                       "--image-strength", 0.8]),
        "keyframes": ("keys.mp4", ["generate", *model, "--frames", 17, "--width", 64, "--height", 64, "--prompt", "from dawn to dusk",
                                   "--seed", 13, "--image", picture, "--image", second, "--image-frame", 9, "--image-strength", 0.6]),
        "clip extended from its end": ("extend.mp4", ["generate", *model, *size, "--prompt", "the tide goes on", "--seed", 14, "--clip", clip,
                                                      "--clip-frames", 9, "--clip-from-end"]),
        "two stages": ("two.mp4", ["generate", "--model", root / "single" / "ltx-2.3-tiny.safetensors", "--text-encoder", root / "single" / "gemma",
                                   "--frames", 9, "--width", 128, "--height", 64, "--prompt", "a pier at night", "--seed", 15, "--two-stage",
                                   "--upsampler", root / "publisher" / "lightricks" / "ltx-2.3-spatial-upscaler-x2-1.1.safetensors"]),
        "a LoRA": ("lora.mp4", ["generate", *model, *size, "--prompt", "a painted sea", "--seed", 16,
                                "--lora", f"{root / 'loras' / 'style.safetensors'}:0.7"]),
        "dev schedule, guidance": ("dev.mp4", ["generate", *model, *size, "--prompt", "rain on a window", "--seed", 18, "--schedule", "dev",
                                               "--steps", 4, "--guidance", 3.0, "--negative", "blurry"]),
        "an Ideogram-4 image": ("image.png", ["generate", "--model", fixtures / "ideogram4" / "pipeline" / "model", "--width", 64, "--height", 48,
                                              "--steps", 4, "--seed", 17, "--prompt", "  sign says \u00abhello\u00a0world\u00bb  \u4f60\u597d  "]),
    }
    env = dict(os.environ, XDG_DATA_HOME=str(work / "data"), XDG_CONFIG_HOME=str(work / "config"))
    different = 0
    for name, (file, args) in jobs.items():
        outs = {}
        for label, cli in (("old", old), ("new", new)):
            folder = work / label
            folder.mkdir(exist_ok=True)
            if name.startswith("clip") and not clip.exists():
                shutil.copy(work / "old" / "t2v.mp4", clip)
            out = folder / file
            extra = ["--out", out] + ([] if args[0] == "dit-forward" else ["--no-gallery"])
            p = subprocess.run([str(cli), *map(str, args + extra)], capture_output=True, text=True, timeout=600, env=env)
            if p.returncode != 0:
                outs[label] = f"(failed: {p.stderr.strip()[-300:]})"
            elif file.endswith(".safetensors"):
                outs[label] = out.read_bytes()
            else:
                outs[label] = streamhash(out)
        same = outs["old"] == outs["new"] and not str(outs["old"]).startswith("(")
        different += not same
        print(f"{'same' if same else 'DIFFERENT':9s} {name}" + ("" if same else f"\n    old: {str(outs['old'])[:300]}\n    new: {str(outs['new'])[:300]}"))
    print(f"{len(jobs) - different} of {len(jobs)} outputs the same")
    return 1 if different else 0


if __name__ == "__main__":
    sys.exit(main())
