"""Writes a synthetic checkpoint of about SIZE_GB for `vireo-bench read`: bf16 and fp8
tensors shaped like a DiT's linears, with the real safetensors writer.
Usage: make_bench_file.py OUT.safetensors SIZE_GB"""
import sys

import torch
from safetensors.torch import save_file

out, size_gb = sys.argv[1], float(sys.argv[2])
target = int(size_gb * 1e9)
tensors, total, i = {}, 0, 0
# A repeating pattern is enough: the bench measures reading, not the values.
pattern = torch.arange(4096 * 4096, dtype=torch.int16).view(torch.bfloat16).view(4096, 4096)
while total < target:
    name = f"model.diffusion_model.transformer_blocks.{i // 4}.ff.net.{i % 4}.weight"
    t = pattern if i % 3 else pattern.view(torch.int16).to(torch.int8).view(torch.float8_e4m3fn)
    tensors[name] = t.clone()
    total += t.numel() * t.element_size()
    i += 1
save_file(tensors, out)
print(f"{out}: {len(tensors)} tensors, {total / 1e9:.2f} GB")
