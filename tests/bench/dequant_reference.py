"""Times the Python references on the data `vireo-bench dequant` wrote: gguf-py's
quants.dequantize for GGUF blocks, torch ops for scaled FP8 and NF4 (what a Python studio
runs). Usage: dequant_reference.py JOBS.json OUT.json"""
import json
import sys
import time

import numpy as np
import torch
from gguf import GGMLQuantizationType, quants

jobs = json.load(open(sys.argv[1]))
torch.set_num_threads(torch.get_num_threads())


def best_of(repeats, fn):
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


times = []
for job in jobs:
    rows, cols = job["shape"]
    if job["kind"] == "gguf":
        qtype = GGMLQuantizationType(job["type"])
        block, size = quants.GGML_QUANT_SIZES[qtype]
        data = np.fromfile(job["blocks"], dtype=np.uint8).reshape(rows, cols // block * size)
        times.append(best_of(job["repeats"], lambda: quants.dequantize(data, qtype)))
    elif job["kind"] == "fp8":
        dtype = torch.float8_e4m3fn if job["format"] == "e4m3" else torch.float8_e5m2
        w = torch.from_numpy(np.fromfile(job["data"], dtype=np.uint8)).view(dtype).view(rows, cols)
        s = torch.from_numpy(np.fromfile(job["scale"], dtype=np.float32)).reshape(job["scale_shape"])
        if s.dim() == 2 and s.numel() > 1:
            br, bc = -(-rows // s.shape[0]), -(-cols // s.shape[1])
            fn = lambda: w.float() * s.repeat_interleave(br, 0).repeat_interleave(bc, 1)[:rows, :cols]
        elif s.numel() > 1:
            fn = lambda: w.float() * s.view(-1, 1)
        else:
            fn = lambda: w.float() * s
        times.append(best_of(job["repeats"], fn))
    else:
        packed = torch.from_numpy(np.fromfile(job["data"], dtype=np.uint8))
        absmax = torch.from_numpy(np.fromfile(job["absmax"], dtype=np.float32))
        code = torch.linspace(-1, 1, 16)

        def nf4():
            idx = torch.stack([packed >> 4, packed & 15], dim=1).view(-1).long()
            return (code[idx] * absmax.repeat_interleave(job["block"])).view(rows, cols)

        times.append(best_of(job["repeats"], nf4))
json.dump(times, open(sys.argv[2], "w"))
