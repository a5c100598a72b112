#!/usr/bin/env python3
"""Repo specs for tests/hub/hubserver.py.

Usage: specs.py OUT.json [--scale S] [--no-hashes]

make_spec(scale) returns the spec dict. Model repos mirror the real file lists
with every real byte size divided by `scale` (default 1e5: 43 GB -> 433 KB),
at least 1 byte. Small text files (configs, READMEs) are literal text and not
scaled. The tiny/* repos use fixed sizes, independent of the scale.

Where a size comes from is noted per entry:
  [ltx2 5.1]  /work/shared/reference/ltx2.md section 5.1 (published sizes)
  [ltx2 7.3]  ltx2.md section 7.3 / 3.0 (parameter count x bytes, checked there
              against published totals)
  [ideo 1.3]  ideogram4-and-peer-studio.md section 1.3 / 3.1
  [3rd-party] a public download script's listing (approximate sizes), see below
  [guess]     plausible value, not from any source

Lightricks/LTX-2 file list: the diffusers folders and their shard names come from
a public `hf download Lightricks/LTX-2 ...` script built from a snapshot tree
(transformer 8 shards, text_encoder 11 `model-*` shards, tokenizer files) and a
bootstrap script noting a second, duplicate text_encoder set
`diffusion_pytorch_model-*-of-00012` (~50 GB) and a latent_upsampler/ folder.
The diffusers part the pipeline reads adds up to ~93 GB (text encoder 49.7 +
transformer 37.8 + connectors 2.9 + vae 2.4 + audio 0.2), matching the figure
we were given; root checkpoints + duplicate set + upsamplers bring the total to
~295 GB of the ~314 GB quoted for the whole repo (the rest is unaccounted for).
"""

import argparse
import hashlib
import json
import os
import sys

DEFAULT_SCALE = 1e5
GOOD_TOKEN = "hf_goodtoken000000000000000000000000"
# Valid on the Hub but granted nothing: gives the 403 "not in the authorized list" case.
OTHER_TOKEN = "hf_othertoken00000000000000000000000"

GB = 1_000_000_000
MB = 1_000_000


def _seed(key):
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "little")


def _commit(repo_id):
    return hashlib.sha1(f"vireo-test-commit:{repo_id}".encode()).hexdigest()


def _json(obj):
    return json.dumps(obj, indent=2, sort_keys=True) + "\n"


class RepoBuilder:
    def __init__(self, repo_id, scale, seed_ns=None, **attrs):
        self.repo_id = repo_id
        self.scale = scale
        self.seed_ns = seed_ns or repo_id  # mirrors reuse the upstream namespace: identical bytes
        self.files = {}
        self.attrs = attrs

    def blob(self, path, real_size, lfs=True):
        """A generated file of real_size/scale bytes."""
        self.files[path] = {"size": max(1, int(round(real_size / self.scale))), "lfs": lfs,
                            "seed": _seed(f"{self.seed_ns}/{path}")}

    def fixed(self, path, size, lfs=True):
        self.files[path] = {"size": size, "lfs": lfs, "seed": _seed(f"{self.seed_ns}/{path}")}

    def text(self, path, text):
        self.files[path] = {"text": text}

    def shards(self, folder, stem, sizes, index_name, ext="safetensors"):
        """A sharded component plus its index; the index's total_size is the
        scaled sum so a loader reading it stays self-consistent."""
        n = len(sizes)
        names = [f"{stem}-{i + 1:05d}-of-{n:05d}.{ext}" for i in range(n)]
        for name, size in zip(names, sizes):
            self.blob(f"{folder}/{name}", size)
        weight_map = {f"layers.{i}.weight": name for i, name in enumerate(names)}
        total = sum(self.files[f"{folder}/{name}"]["size"] for name in names)
        self.text(f"{folder}/{index_name}", _json({"metadata": {"total_size": total}, "weight_map": weight_map}))

    def common(self, title):
        self.text(".gitattributes", "*.safetensors filter=lfs diff=lfs merge=lfs -text\n"
                                    "*.gguf filter=lfs diff=lfs merge=lfs -text\n"
                                    "*.model filter=lfs diff=lfs merge=lfs -text\n"
                                    "tokenizer.json filter=lfs diff=lfs merge=lfs -text\n")
        self.text("README.md", f"# {title}\n\nScaled-down test double served by tests/hub/hubserver.py.\n")

    def build(self):
        out = {"commit": _commit(self.repo_id), "branches": ["main"], "gated": False, "private": False,
               "allowed_tokens": [], "files": self.files}
        out.update(self.attrs)
        return out


def _split(total, n, first=None, last=None):
    """n shard sizes summing to total (optionally with given first/last sizes)."""
    fixed = [s for s in (first, last) if s is not None]
    k = n - len(fixed)
    each = (total - sum(fixed)) // k
    sizes = [each] * k
    sizes[-1] += total - sum(fixed) - each * k
    if first is not None:
        sizes.insert(0, first)
    if last is not None:
        sizes.append(last)
    return sizes


def tiny_plain():
    r = RepoBuilder("tiny/plain", 1, branches=["main", "refs/pr/1"])
    r.text("README.md", "# tiny/plain\n\nFour files: two text, two LFS.\n")
    r.text("config.json", _json({"architectures": ["TinyModel"], "hidden_size": 64, "num_layers": 2}))
    r.fixed("small.safetensors", 64 * 1024)
    r.fixed("large.safetensors", 3 * 1024 * 1024)
    return r.build()


def gated_model():
    r = RepoBuilder("gated/model", 1, gated="manual", allowed_tokens=[GOOD_TOKEN])
    r.fixed("model.safetensors", 256 * 1024)
    return r.build()


def tiny_private():
    r = RepoBuilder("tiny/private", 1, private=True, allowed_tokens=[GOOD_TOKEN])
    r.text("config.json", _json({"private": True}))
    r.fixed("weights.safetensors", 16 * 1024)
    return r.build()


def tiny_hostile():
    """Names a downloader must refuse (formats.md 1.8: no absolute paths, no `..`).
    Listed verbatim by the tree API; only for negative tests."""
    r = RepoBuilder("tiny/hostile", 1)
    r.text("ok.txt", "fine\n")
    r.text("../escape.txt", "outside the snapshot\n")
    r.text("sub/../../escape2.txt", "outside the snapshot\n")
    r.text("/abs.txt", "absolute\n")
    return r.build()


def tiny_spoof():
    """Names that are safe paths but hostile text: a quote that would forge a key in
    hand-assembled JSON, a right-to-left override and a C1 control that would reorder or
    recolour a terminal line, and a legitimate non-ASCII name next to them."""
    r = RepoBuilder("tiny/spoof", 1)
    r.text('q"uote", "path": "/etc/passwd', "forged key\n")
    r.text("\u202egnp.safetensors", "right-to-left override\n")
    r.text("\u009b31mred.txt", "C1 control sequence introducer\n")
    r.text("caf\u00e9.json", "{}\n")
    return r.build()


def ltx2(scale):
    r = RepoBuilder("Lightricks/LTX-2", scale)
    r.common("Lightricks/LTX-2")
    r.text("model_index.json", _json({  # illustrative content, not the real file
        "_class_name": "LTX2Pipeline", "_diffusers_version": "0.37.0",
        "audio_vae": ["diffusers", "AutoencoderKLLTX2Audio"], "connectors": ["ltx2", "LTX2TextConnectors"],
        "scheduler": ["diffusers", "FlowMatchEulerDiscreteScheduler"],
        "text_encoder": ["transformers", "Gemma3ForConditionalGeneration"],
        "tokenizer": ["transformers", "GemmaTokenizerFast"],
        "transformer": ["diffusers", "LTX2VideoTransformer3DModel"],
        "vae": ["diffusers", "AutoencoderKLLTX2Video"], "vocoder": ["ltx2", "LTX2Vocoder"]}))
    # Root single-file checkpoints (ltx-pipelines / ComfyUI layout).
    r.blob("ltx-2-19b-dev.safetensors", 43_280_000_000)                 # [ltx2 5.1] "~43.3 GB" (43.28 GB computed, 7.3)
    r.blob("ltx-2-19b-distilled.safetensors", 43_280_000_064)           # [ltx2 5.1] same model size; +64 B header [guess]
    r.blob("ltx-2-19b-dev-fp8.safetensors", 27_100_000_000)             # [ltx2 5.1] "27.1 GB"
    r.blob("ltx-2-19b-distilled-fp8.safetensors", 27_127_589_812)       # [ltx2 5.1] exact
    r.blob("ltx-2-19b-distilled-lora-384.safetensors", 7_670_000_000)   # [ltx2 5.1] "7.67 GB"
    r.blob("ltx-2-spatial-upscaler-x2-1.0.safetensors", 996_000_000)    # [guess] ~ latent_upsampler/ below
    r.blob("ltx-2-temporal-upscaler-x2-1.0.safetensors", 1_050_000_000)  # [guess]
    # diffusers components.
    r.text("transformer/config.json", _json({"_class_name": "LTX2VideoTransformer3DModel", "num_layers": 48}))
    # [ltx2 7.3] 2.0 DiT 18.876 B params bf16 = 37.75 GB; 8 shards [3rd-party], split [guess]
    r.shards("transformer", "diffusion_pytorch_model", _split(37_752_000_000, 8, last=2_822_000_000),
             "diffusion_pytorch_model.safetensors.index.json")
    r.text("connectors/config.json", _json({"_class_name": "LTX2TextConnectors"}))
    r.blob("connectors/diffusion_pytorch_model.safetensors", 2_862_000_000)  # [ltx2 7.3] 1.431 B params bf16
    r.text("vae/config.json", _json({"_class_name": "AutoencoderKLLTX2Video"}))
    r.blob("vae/diffusion_pytorch_model.safetensors", 2_445_000_000)          # [ltx2 7.3] enc 694.1 M + dec 528.4 M bf16
    r.text("audio_vae/config.json", _json({"_class_name": "AutoencoderKLLTX2Audio"}))
    r.blob("audio_vae/diffusion_pytorch_model.safetensors", 106_400_000)      # [ltx2 3.0] 21.3 M + 31.9 M bf16
    r.text("vocoder/config.json", _json({"_class_name": "LTX2Vocoder"}))
    r.blob("vocoder/diffusion_pytorch_model.safetensors", 111_200_000)        # [ltx2 3.0] 55.6 M bf16
    r.text("latent_upsampler/config.json", _json({"_class_name": "LTX2LatentUpsamplerModel"}))
    r.blob("latent_upsampler/diffusion_pytorch_model.safetensors", 996_000_000)  # [3rd-party] "connectors + latent_upsampler ~3.9 GB" minus connectors
    r.text("text_encoder/config.json", _json({"architectures": ["Gemma3ForConditionalGeneration"]}))
    r.text("text_encoder/generation_config.json", _json({"cache_implementation": "hybrid"}))
    # [3rd-party] per-shard sizes of the transformers-format Gemma 3 12B set (~49.7 GB, fp32-sized)
    r.shards("text_encoder", "model",
             [1_690_000_000, 4_990_000_000, 4_840_000_000, 4_950_000_000, 4_910_000_000, 4_950_000_000,
              4_910_000_000, 4_950_000_000, 4_910_000_000, 4_950_000_000, 2_690_000_000],
             "model.safetensors.index.json")
    # [3rd-party] the duplicate diffusers-named set, 12 shards "~50 GB"; split [guess]
    r.shards("text_encoder", "diffusion_pytorch_model", _split(49_800_000_000, 12),
             "diffusion_pytorch_model.safetensors.index.json")
    # tokenizer/ names [3rd-party]; sizes [3rd-party] approximate
    r.text("tokenizer/added_tokens.json", _json({"<image_soft_token>": 262144}))
    r.text("tokenizer/chat_template.jinja", "{{ bos_token }}{% for m in messages %}{{ m['content'] }}{% endfor %}\n")
    r.text("tokenizer/special_tokens_map.json", _json({"bos_token": "<bos>", "eos_token": "<eos>", "pad_token": "<pad>"}))
    r.blob("tokenizer/tokenizer.json", 33_400_000)                 # LFS (over the Hub's 10 MB non-LFS limit)
    r.blob("tokenizer/tokenizer.model", 4_690_000)                 # LFS (*.model)
    r.blob("tokenizer/tokenizer_config.json", 1_160_000, lfs=False)  # plain git: generated non-LFS bytes
    r.text("scheduler/scheduler_config.json", _json({"_class_name": "FlowMatchEulerDiscreteScheduler",
                                                     "use_dynamic_shifting": True}))
    return r.build()


def ltx23(scale):
    r = RepoBuilder("Lightricks/LTX-2.3", scale)
    r.common("Lightricks/LTX-2.3")
    r.blob("ltx-2.3-22b-dev.safetensors", 46_149_344_974)                   # [ltx2 5.1] exact
    r.blob("ltx-2.3-22b-distilled.safetensors", 46_149_345_038)             # [ltx2 5.1] exact
    r.blob("ltx-2.3-22b-distilled-1.1.safetensors", 46_149_345_334)         # [ltx2 5.1] exact
    r.blob("ltx-2.3-22b-distilled-lora-384.safetensors", 7_605_507_256)     # [ltx2 5.1] exact
    r.blob("ltx-2.3-22b-distilled-lora-384-1.1.safetensors", 7_605_507_256)  # [ltx2 5.1] "(-1.1)" given the same size
    # Upscaler versions are from ltx2.md 5.1; full names by analogy with LTX-2 [guess], sizes [guess].
    r.blob("ltx-2.3-spatial-upscaler-x2-1.0.safetensors", 996_000_000)
    r.blob("ltx-2.3-spatial-upscaler-x2-1.1.safetensors", 996_000_000)
    r.blob("ltx-2.3-spatial-upscaler-x1.5-1.0.safetensors", 1_010_000_000)
    r.blob("ltx-2.3-temporal-upscaler-x2-1.0.safetensors", 1_050_000_000)
    return r.build()


def ltx23_fp8(scale):
    r = RepoBuilder("Lightricks/LTX-2.3-fp8", scale)
    r.common("Lightricks/LTX-2.3-fp8")
    # Names [ltx2 5.1]; sizes not published there, "~29.5 GB" by its computation [ltx2 7.3].
    r.blob("ltx-2.3-22b-dev-fp8.safetensors", 29_500_000_000)
    r.blob("ltx-2.3-22b-distilled-fp8.safetensors", 29_560_000_000)  # 44 vs 43 fp8 blocks [ltx2 5.3]; delta [guess]
    return r.build()


def ltx23_gguf(scale):
    r = RepoBuilder("unsloth/LTX-2.3-GGUF", scale)
    r.common("unsloth/LTX-2.3-GGUF")
    # [ltx2 5.4] dev quants at the root, distilled under distilled/, UD-* mixes; only
    # Q4_K_M and Q8_0 are named there, the other quant names are [guess].
    # Sizes: Q4_K_M "~14-15 GB" [ltx2 7.3]; others = 21.0 B params (DiT + connector stacks)
    # x bits/weight [guess].
    quants = {"Q3_K_M": 11_300_000_000, "Q4_K_M": 14_600_000_000, "Q5_K_M": 16_400_000_000,
              "Q6_K": 18_100_000_000, "Q8_0": 22_400_000_000, "UD-Q4_K_XL": 15_200_000_000}
    for q, size in quants.items():
        r.blob(f"ltx-2.3-22b-dev-{q}.gguf", size)
    for q in ("Q4_K_M", "Q8_0"):
        r.blob(f"distilled/ltx-2.3-22b-distilled-{q}.gguf", quants[q])
    # Companions, names per ltx2.md 5.4 and ideogram4-and-peer-studio.md 4.4
    # (`vae/..._video_vae...`, `vae/..._audio_vae...`, `text_encoders/..._embeddings_connectors`).
    for variant in ("dev", "distilled"):
        r.blob(f"vae/ltx-2.3-22b-{variant}_video_vae.safetensors", 1_452_000_000)  # [ltx2 7.3] 2.3 VAE bf16 1.45 GB
        r.blob(f"vae/ltx-2.3-22b-{variant}_audio_vae.safetensors", 360_000_000)    # [ltx2 7.3] audio VAE + vocoder 0.36 GB
        # [ltx2 7.3] text projection 1.156 B bf16 = 2.3 GB; may also hold the connector stacks [guess]
        r.blob(f"text_encoders/ltx-2.3-22b-{variant}_embeddings_connectors.safetensors", 2_312_000_000)
    return r.build()


def ideogram(scale, repo_id, seed_ns, gated):
    attrs = {"gated": "manual", "allowed_tokens": [GOOD_TOKEN]} if gated else {}
    r = RepoBuilder(repo_id, scale, seed_ns=seed_ns, **attrs)
    r.common("ideogram-ai/ideogram-4-fp8")
    r.text("model_index.json", _json({  # components per [ideo 1.1]; illustrative content
        "_class_name": "Ideogram4Pipeline", "_diffusers_version": "0.39.0",
        "scheduler": ["diffusers", "FlowMatchEulerDiscreteScheduler"],
        "text_encoder": ["transformers", "Qwen3VLModel"], "tokenizer": ["transformers", "Qwen2Tokenizer"],
        "transformer": ["diffusers", "Ideogram4Transformer2DModel"],
        "unconditional_transformer": ["diffusers", "Ideogram4Transformer2DModel"],
        "vae": ["diffusers", "AutoencoderKLFlux2"]}))
    r.text("scheduler/scheduler_config.json", _json({"_class_name": "FlowMatchEulerDiscreteScheduler",
                                                     "shift": 1.0, "use_dynamic_shifting": False}))
    dit_config = _json({"_class_name": "Ideogram4Transformer2DModel", "in_channels": 128, "num_layers": 34,
                        "attention_head_dim": 256, "num_attention_heads": 18})
    for folder in ("transformer", "unconditional_transformer"):
        r.text(f"{folder}/config.json", dit_config)
        r.blob(f"{folder}/diffusion_pytorch_model.safetensors", 9_289_792_888)  # [ideo 1.3] exact
    r.text("text_encoder/config.json", _json({"architectures": ["Qwen3VLModel"], "ideogram_fp8_weight_only": True}))
    # Repo "~26-28 GB" [ideo 3.1] minus two DiTs (18.58 GB) and the VAE => ~8.5 GB [guess]
    r.blob("text_encoder/model.safetensors", 8_500_000_000)
    r.blob("tokenizer/tokenizer.json", 11_420_000)  # Qwen2 tokenizer.json [guess size]
    r.text("tokenizer/tokenizer_config.json", _json({"tokenizer_class": "Qwen2Tokenizer",
                                                      "extra_special_tokens": []}))
    r.text("vae/config.json", _json({"_class_name": "AutoencoderKLFlux2", "latent_channels": 32}))
    r.blob("vae/diffusion_pytorch_model.safetensors", 168_000_000)  # FLUX.2 VAE, "0.2 GB" bf16 [ideo 1.3]
    return r.build()


def make_spec(scale=DEFAULT_SCALE):
    scale = float(scale)
    if scale <= 0:
        raise ValueError("scale must be > 0")
    repos = {
        "tiny/plain": tiny_plain(),
        "gated/model": gated_model(),
        "tiny/private": tiny_private(),
        "tiny/hostile": tiny_hostile(),
        "tiny/spoof": tiny_spoof(),
        "Lightricks/LTX-2": ltx2(scale),
        "Lightricks/LTX-2.3": ltx23(scale),
        "Lightricks/LTX-2.3-fp8": ltx23_fp8(scale),
        "unsloth/LTX-2.3-GGUF": ltx23_gguf(scale),
        # Upstream is gated; the unsloth mirror is ungated and byte-identical [ideo 4.5],
        # so both share blobs (same sha256): exercises cross-repo blob reuse.
        "ideogram-ai/ideogram-4-fp8": ideogram(scale, "ideogram-ai/ideogram-4-fp8", "ideogram-4-fp8", True),
        "unsloth/ideogram-4-fp8": ideogram(scale, "unsloth/ideogram-4-fp8", "ideogram-4-fp8", False),
    }
    return {"repos": repos, "tokens": [GOOD_TOKEN, OTHER_TOKEN]}


def add_hashes(spec):
    """Stores each file's sha256 in the spec; the server refuses to start if its
    generator disagrees, so a silent change of the content function is caught."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import hubserver
    for repo_id, r in spec["repos"].items():
        for path, f in r["files"].items():
            if "text" in f:
                content = hubserver.Content(len(f["text"].encode()), data=f["text"].encode())
            else:
                content = hubserver.Content(f["size"], seed=f["seed"])
            h = hashlib.sha256()
            for piece in content.iter_range(0, content.size):
                h.update(piece)
            f["sha256"] = h.hexdigest()
    return spec


def main(argv=None):
    ap = argparse.ArgumentParser(description="Write the test-hub repo spec.")
    ap.add_argument("out")
    ap.add_argument("--scale", type=float, default=DEFAULT_SCALE)
    ap.add_argument("--no-hashes", action="store_true", help="do not embed sha256 values")
    args = ap.parse_args(argv)
    spec = make_spec(args.scale)
    if not args.no_hashes:
        add_hashes(spec)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(spec, f, indent=1, sort_keys=True)
        f.write("\n")
    total = sum(f.get("size", len(f.get("text", "").encode())) for r in spec["repos"].values()
                for f in r["files"].values())
    print(f"{args.out}: {len(spec['repos'])} repos, "
          f"{sum(len(r['files']) for r in spec['repos'].values())} files, {total} bytes", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
