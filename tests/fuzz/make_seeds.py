#!/usr/bin/env python3
"""Write the seed inputs of the fuzz targets (tests/fuzz/seeds/<target>/), byte-identical on
every run: small valid files and answers of each kind a target reads, so fuzzing starts from
the interesting shapes rather than from nothing. Python stdlib only.

Usage: make_seeds.py [OUTDIR]   (default: tests/fuzz/seeds next to this script)
"""

import json
import struct
import sys
from pathlib import Path


def safetensors(tensors, metadata=None):
    header, data = {}, b""
    for name, dtype, shape, payload in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(payload)]}
        data += payload
    if metadata is not None:
        header["__metadata__"] = metadata
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((-len(text)) % 8)
    return struct.pack("<Q", len(text)) + text + data


def gguf(kvs, tensors, alignment=32):
    def s(text):
        raw = text.encode()
        return struct.pack("<Q", len(raw)) + raw
    out = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs))
    for key, vtype, payload in kvs:
        out += s(key) + struct.pack("<I", vtype) + payload
    offset = 0
    blobs = b""
    for name, ne, gtype, payload in tensors:
        out += s(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", d) for d in ne)
        out += struct.pack("<IQ", gtype, offset)
        blobs += payload + b"\0" * ((-len(payload)) % alignment)
        offset = len(blobs)
    out += b"\0" * ((-len(out)) % alignment)
    return out + blobs


def gguf_string(text):
    raw = text.encode()
    return struct.pack("<Q", len(raw)) + raw


TRANSFORMER = {
    "_class_name": "LTX2VideoTransformer3DModel", "_diffusers_version": "0.42.1", "activation_fn": "gelu-approximate",
    "attention_bias": True, "attention_head_dim": 128, "attention_out_bias": True, "audio_attention_head_dim": 64,
    "audio_cross_attention_dim": 2048, "audio_cross_attn_mod": True, "audio_gated_attn": True, "audio_in_channels": 128,
    "audio_num_attention_heads": 32, "audio_out_channels": 128, "caption_channels": 3840, "cross_attention_dim": 4096,
    "cross_attn_mod": True, "gated_attn": True, "in_channels": 128, "norm_eps": 1e-06, "num_attention_heads": 32,
    "num_layers": 48, "out_channels": 128, "rope_theta": 10000.0, "rope_type": "split", "use_prompt_embeddings": False,
    "vae_scale_factors": [8, 32, 32], "timestep_scale_multiplier": 1000,
}
CONNECTORS = {
    "_class_name": "LTX2TextConnectors", "caption_channels": 3840, "text_proj_in_factor": 49,
    "video_connector_num_attention_heads": 30, "video_connector_attention_head_dim": 128, "video_connector_num_layers": 2,
    "video_connector_num_learnable_registers": 128, "audio_connector_num_attention_heads": 30,
    "audio_connector_attention_head_dim": 128, "audio_connector_num_layers": 2, "audio_connector_num_learnable_registers": 128,
    "per_modality_projections": True, "video_hidden_dim": 4096, "audio_hidden_dim": 2048, "rope_type": "split",
}
EMBEDDED = {"transformer": {
    "num_attention_heads": 32, "attention_head_dim": 128, "in_channels": 128, "num_layers": 48, "cross_attention_dim": 4096,
    "positional_embedding_max_pos": [20, 2048, 2048], "audio_positional_embedding_max_pos": [20], "rope_type": "split",
    "frequencies_precision": "float64", "apply_gated_attention": True, "cross_attention_adaln": True,
    "caption_proj_before_connector": True, "connector_num_attention_heads": 30, "connector_attention_head_dim": 128,
    "connector_num_layers": 2, "connector_num_learnable_registers": 128, "connector_positional_embedding_max_pos": [4096]},
    "vae": {"latent_channels": 128, "decoder_blocks": [["res_x", {"num_layers": 4}], ["compress_all", {"multiplier": 2}]]}}

TOKENIZER = {
    "version": "1.0", "truncation": None, "padding": None,
    "added_tokens": [{"id": 0, "content": "<pad>", "special": True, "normalized": False, "lstrip": False, "rstrip": False,
                      "single_word": False},
                     {"id": 2, "content": "<bos>", "special": True, "normalized": False, "lstrip": False, "rstrip": False,
                      "single_word": False}],
    "normalizer": {"type": "Sequence", "normalizers": [{"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
    "pre_tokenizer": {"type": "Split", "pattern": {"String": " "}, "behavior": "MergedWithPrevious", "invert": False},
    "post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<bos>", "type_id": 0}},
                                                                {"Sequence": {"id": "A", "type_id": 0}}],
                       "special_tokens": {"<bos>": {"id": "<bos>", "ids": [2], "tokens": ["<bos>"]}}},
    "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "byte_fallback": True, "fuse_unk": True,
              "vocab": {"<pad>": 0, "<unk>": 1, "<bos>": 2, "<0x41>": 3, "a": 4, "b": 5, "ab": 6, "\u2581": 7, "\u2581a": 8},
              "merges": ["a b", ["\u2581", "a"]]},
}
TOKENIZER_CONFIG = {"tokenizer_class": "PreTrainedTokenizerFast", "pad_token": "<pad>", "bos_token": "<bos>"}
GEMMA_CONFIG = {"tokenizer_class": "GemmaTokenizerFast", "added_tokens_decoder": {
    "0": {"content": "<pad>", "special": True, "normalized": False, "lstrip": False, "rstrip": False, "single_word": False},
    "2": {"content": "<bos>", "special": True, "normalized": False, "lstrip": False, "rstrip": False, "single_word": False}},
    "pad_token": "<pad>", "bos_token": "<bos>", "eos_token": "<pad>", "unk_token": "<unk>"}

QWEN2_REGEX = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
QWEN_ADDED = [{"id": 5, "content": "<|endoftext|>", "special": True, "normalized": False, "lstrip": False, "rstrip": False,
               "single_word": False},
              {"id": 6, "content": "<|im_start|>", "special": True, "normalized": False, "lstrip": False, "rstrip": False,
               "single_word": False}]
# Qwen2 / Qwen3 layout: NFC, the Qwen2 Split regex, ByteLevel without its regex, byte-level BPE.
QWEN_TOKENIZER = {
    "version": "1.0", "truncation": None, "padding": None, "added_tokens": QWEN_ADDED,
    "normalizer": {"type": "NFC"},
    "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": QWEN2_REGEX}, "behavior": "Isolated", "invert": False},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}]},
    "post_processor": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
    "model": {"type": "BPE", "dropout": None, "unk_token": None, "byte_fallback": False, "fuse_unk": False,
              "vocab": {"a": 0, "b": 1, "\u0120": 2, "ab": 3, "\u0120a": 4}, "merges": [["a", "b"], ["\u0120", "a"]]},
}
QWEN_CONFIG = {"tokenizer_class": "Qwen2Tokenizer", "eos_token": "<|endoftext|>", "pad_token": "<|endoftext|>",
               "added_tokens_decoder": {str(a["id"]): {k: v for k, v in a.items() if k != "id"} for a in QWEN_ADDED}}
QWEN_PLAIN_CONFIG = {"tokenizer_class": "PreTrainedTokenizerFast", "pad_token": "<|endoftext|>"}


def entry(path, size, lfs=True):
    e = {"type": "file", "oid": "%040x" % (size * 7919), "size": size, "path": path}
    if lfs:
        e["lfs"] = {"oid": "%064x" % (size * 104729), "size": size, "pointerSize": 134}
    return e


# A recipe as the studio writes it into an output (core/output/recipe.cpp).
RECIPE = {
    "recipe_version": 1, "app": "vireo-studio 0.1.0", "kind": "video", "pipeline": "ltx2", "family": "ltx-2.3",
    "variant": "distilled-fp8", "model_version": "2.3", "repo": "Lightricks/LTX-2.3", "commit": "c" * 40,
    "model_title": "LTX-2.3 distilled (FP8)", "model_key": "catalog:ltx-2.3/distilled-fp8",
    "files": [{"path": "transformer/diffusion_pytorch_model.safetensors", "bytes": 22630000, "sha256": "ab" * 32}],
    "prompt": "a red fox trots across a frozen lake at dawn\u00e9", "negative_prompt": "blurry", "seed": 424242,
    "schedule": "distilled", "steps": 8, "sigmas": [1.0, 0.99375, 0.9875, 0.98125, 0.975, 0.909375, 0.725, 0.421875, 0.0],
    "guidance_scale": 1.0, "audio_guidance_scale": 1.0, "guidance_rescale": 0.0, "width": 768, "height": 512,
    "frames": 121, "fps": 24.0, "device": "cuda:0", "dtype": "bf16", "placement": "resident", "speed": "fast",
    "steps_skipped": 2, "cuda_graphs": "on: 1 captured, 7 of 8 forwards replayed",
    "paths": "240 FP8 tensor-core GEMM; self-attention: FP8 flash attention (cuDNN)",
    "loras": [{"path": "/loras/style.safetensors", "sha256": "cd" * 32, "strength": 0.8, "status": "partial: 3 keys unmatched"}],
    "conditions": [{"source": "/in/clip.mp4", "copy": "out.cond0.mp4", "sha256": "ef" * 32, "frame": 0, "strength": 1.0,
                    "crf": 0, "frames": 9, "from_end": True}],
    "stages": "two", "stages_requested": "auto", "stages_reason": "768x512 is above the one-pass size",
    "seconds": {"denoise": 3.2, "decode video": 0.6}, "created": "2026-11-30T18:00:00Z", "future_key": {"nested": [1, 2]},
}


def seeds():
    f32 = struct.pack("<4f", 1, 2, 3, 4)
    st_plain = safetensors([("w", "F32", [2, 2], f32), ("b", "BF16", [2], b"\x80\x3f\x00\x40")],
                           {"format": "pt", "config": json.dumps(EMBEDDED)})
    st_fp8 = safetensors([("model.diffusion_model.proj_in.weight", "F8_E4M3", [2, 2], b"\x38\x40\x44\x48"),
                          ("model.diffusion_model.proj_in.weight_scale", "F32", [], struct.pack("<f", 0.5)),
                          ("model.diffusion_model.transformer_blocks.0.scale_shift_table", "BF16", [9, 1], b"\0" * 18)])
    q4 = struct.pack("<e", 1.0) + bytes(range(16))
    gg = gguf([("general.architecture", 8, gguf_string("ltxv")), ("general.alignment", 4, struct.pack("<I", 32)),
               ("tokenizer.ggml.scores", 9, struct.pack("<IQ", 6, 3) + struct.pack("<3f", 0.5, -1, 2)),
               ("tokenizer.ggml.tokens", 9, struct.pack("<IQ", 8, 2) + gguf_string("a") + gguf_string("\u2581b"))],
              [("transformer_blocks.0.attn1.to_q.weight", [32, 1], 2, q4), ("proj_in.bias", [4], 0, f32)])
    out = {
        "safetensors": {"plain.safetensors": st_plain, "fp8.safetensors": st_fp8},
        "gguf": {"small.gguf": gg},
        "inspect": {"plain.safetensors": st_plain, "fp8.safetensors": st_fp8, "small.gguf": gg},
        "hubjson": {
            "repoinfo": b"\x00" + json.dumps({"_id": "x", "id": "org/name", "sha": "a" * 40, "gated": "manual", "private": False,
                                              "siblings": [{"rfilename": "model.safetensors"}]}).encode(),
            "tree": b"\x01" + json.dumps([entry("model_index.json", 611, False), {"type": "directory", "oid": "b" * 40, "size": 0,
                                          "path": "transformer"}]).encode()
                    + json.dumps([entry("transformer/diffusion_pytorch_model-00001-of-00002.safetensors", 4_999_000_000),
                                  entry("transformer/config.json", 1500, False)]).encode(),
            "model_index": b"\x02" + json.dumps({"_class_name": "LTX2Pipeline", "transformer": ["diffusers", "X"],
                                                 "vae": ["diffusers", "Y"], "tokenizer": [None, None]}).encode(),
            "shard_index": b"\x03" + json.dumps({"metadata": {"total_size": 10}, "weight_map": {
                "a.weight": "diffusion_pytorch_model-00001-of-00002.safetensors",
                "b.weight": "diffusion_pytorch_model-00002-of-00002.safetensors"}}).encode(),
            "size": b"\x04" + b"43280000000",
            "content_range": b"\x05" + b"bytes 1048576-2097151/3145728",
        },
        "config": {
            "transformer": b"\x00" + json.dumps(TRANSFORMER).encode(),
            "connectors": b"\x01" + json.dumps(CONNECTORS).encode(),
            "embedded": b"\x02" + json.dumps(EMBEDDED).encode(),
            "json": b"\x03" + json.dumps({"a": [1, 2.5, "x", None, True, {"b": [[]]}]}).encode(),
        },
        "tokenizer": {
            "bpe": json.dumps(TOKENIZER).encode() + b"\0" + json.dumps(TOKENIZER_CONFIG).encode(),
            "gemma": json.dumps(TOKENIZER).encode() + b"\0" + json.dumps(GEMMA_CONFIG).encode(),
            "no_config": json.dumps(TOKENIZER).encode(),
            "qwen2": json.dumps(QWEN_TOKENIZER).encode() + b"\0" + json.dumps(QWEN_CONFIG).encode(),
            "qwen2_plain": json.dumps(QWEN_TOKENIZER).encode() + b"\0" + json.dumps(QWEN_PLAIN_CONFIG).encode(),
        },
        "recipe": {
            "full": json.dumps(RECIPE).encode(),
            "oldest": json.dumps({"prompt": "a fox", "seed": 7, "width": 768.0, "height": 512, "frames": 121,
                                  "sigmas": [1.0, 0.5, 0.0], "seconds": {"denoise": 3.5}, "made_by": {"x": [1, None]}}).encode(),
        },
    }
    return out


def main(argv):
    root = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parent / "seeds"
    count = 0
    for target, files in seeds().items():
        folder = root / target
        folder.mkdir(parents=True, exist_ok=True)
        for name, data in files.items():
            (folder / name).write_bytes(data)
            count += 1
    print(f"wrote {count} seeds to {root}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
