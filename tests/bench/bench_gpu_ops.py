"""The pieces of one LTX-2.3 transformer layer on the 768x512x121 workload, each timed alone on
the CUDA device: every GEMM in bf16 and as FP8 (per-tensor and row-wise scales, with and
without fast accumulation), attention with each fused kernel, and the elementwise passes
(Vireo's fused ops loaded from libvireo_kernels.so). The sum per layer is the floor a
forward of that layer can reach with these kernels; bench_gpu.py measures the real forward.

Usage: bench_gpu_ops.py [--kernels build-gpu/kernels/libvireo_kernels.so] [--json FILE]
"""
import argparse
import json
import sys

import torch
import torch.nn.functional as F

ap = argparse.ArgumentParser()
ap.add_argument("--kernels", default="")
ap.add_argument("--json", default="")
args = ap.parse_args()
assert torch.cuda.is_available()
dev = torch.device("cuda")
BF16, FP8 = torch.bfloat16, torch.float8_e4m3fn
M, TEXT, D, DA, FF = 6144, 1024, 4096, 2048, 16384
if args.kernels:
    torch.ops.load_library(args.kernels)


def median_ms(fn, repeat=20, warmup=3):
    for _ in range(warmup):
        fn()
    ts = []
    for _ in range(repeat):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b))
    ts.sort()
    return ts[len(ts) // 2]


# (name, M, K, N) of the video-side GEMMs of one layer (audio-side ones are 126 rows: noise)
GEMMS = [("attn1 qkv+gates", M, D, 3 * D + 32), ("attn1 out", M, D, D), ("attn2 q", M, D, D), ("attn2 kv (text)", TEXT, D, 2 * D),
         ("attn2 out", M, D, D), ("a2v q", M, D, DA), ("a2v out", M, DA, D), ("v2a kv", M, D, 2 * DA),
         ("ff proj", M, D, FF), ("ff out", M, FF, D)]
rows = []
tot = {"bf16": 0.0, "fp8 tensor": 0.0, "fp8 tensor fast": 0.0, "fp8 row": 0.0, "fp8 row fast": 0.0}
for name, m, k, n in GEMMS:
    x = torch.randn(m, k, device=dev, dtype=BF16)
    w = torch.randn(n, k, device=dev, dtype=BF16) * 0.02
    bias = torch.randn(n, device=dev, dtype=BF16)
    xq, wq = x.to(FP8), (w * 20).to(FP8)
    one = torch.ones((), device=dev)
    sa, sb = one.expand(m, 1).contiguous(), torch.ones(1, n, device=dev)
    r = {"gemm": name, "shape": [m, k, n], "tflop": 2 * m * k * n / 1e12}
    r["bf16"] = median_ms(lambda: F.linear(x, w, bias))
    r["fp8 tensor"] = median_ms(lambda: torch._scaled_mm(xq, wq.t(), one, one, bias=bias, out_dtype=BF16))
    r["fp8 tensor fast"] = median_ms(lambda: torch._scaled_mm(xq, wq.t(), one, one, bias=bias, out_dtype=BF16, use_fast_accum=True))
    try:
        r["fp8 row"] = median_ms(lambda: torch._scaled_mm(xq, wq.t(), sa, sb, bias=bias, out_dtype=BF16))
        r["fp8 row fast"] = median_ms(lambda: torch._scaled_mm(xq, wq.t(), sa, sb, bias=bias, out_dtype=BF16, use_fast_accum=True))
    except RuntimeError as e:
        r["fp8 row"] = r["fp8 row fast"] = float("nan")
        print("row-wise failed:", str(e)[:200])
    for key in tot:
        tot[key] += r[key]
    rows.append(r)
print(f"{'gemm (video side)':18s} {'MxKxN':>20s} {'bf16 ms':>8s} {'TFLOP/s':>8s} {'fp8 t':>7s} {'fp8 t+f':>7s} {'fp8 r':>7s} {'fp8 r+f':>7s}")
for r in rows:
    m, k, n = r["shape"]
    print(f"{r['gemm']:18s} {f'{m}x{k}x{n}':>20s} {r['bf16']:8.3f} {r['tflop'] / r['bf16'] * 1e3:8.0f} {r['fp8 tensor']:7.3f} "
          f"{r['fp8 tensor fast']:7.3f} {r['fp8 row']:7.3f} {r['fp8 row fast']:7.3f}")
print("   sum per layer: " + ", ".join(f"{k} {v:.2f} ms" for k, v in tot.items()))

att = {}
q = torch.randn(1, M, 32, 128, device=dev, dtype=BF16).transpose(1, 2)
kt = torch.randn(1, TEXT, 32, 128, device=dev, dtype=BF16).transpose(1, 2)
from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402

for label, backend in (("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION),
                       ("efficient", SDPBackend.EFFICIENT_ATTENTION)):
    try:
        with sdpa_kernel(backend):
            s = median_ms(lambda: F.scaled_dot_product_attention(q, q, q))
            c = median_ms(lambda: F.scaled_dot_product_attention(q, kt, kt))
        att[label] = (s, c)
        print(f"attention {label:9s}: self 6144x6144 {s:.3f} ms ({4 * M * M * D / s / 1e9:.0f} TFLOP/s), "
              f"text 6144x1024 {c:.3f} ms")
    except RuntimeError as e:
        print(f"attention {label}: unavailable ({str(e)[:120]})")

ew = {}
x = torch.randn(1, M, D, device=dev, dtype=BF16)
big = torch.randn(1, M, FF, device=dev, dtype=BF16)
mod = torch.randn(1, 1, 2, D, device=dev, dtype=BF16) * 0.1
ew["addcmul residual [6144,4096]"] = median_ms(lambda: torch.addcmul(x, x, mod[:, :, 0]))
ew["gelu tanh [6144,16384]"] = median_ms(lambda: F.gelu(big, approximate="tanh"))
ew["rms_norm (ATen) [6144,4096]"] = median_ms(lambda: F.rms_norm(x, (D,), eps=1e-6))
if args.kernels:
    ew["vireo rms_norm_modulate"] = median_ms(lambda: torch.ops.vireo.rms_norm_modulate(x, mod[:, :, 0], mod[:, :, 1], 1e-6))
    fused = torch.randn(1, M, 3 * D + 32, device=dev, dtype=BF16)
    cs = torch.rand(1, M, 32, 1, 64, device=dev)
    wn = torch.ones(D, device=dev, dtype=BF16)
    ew["vireo rms_norm_rope (q of qkv)"] = median_ms(lambda: torch.ops.vireo.rms_norm_rope(fused[..., :D], wn, cs, cs, 1e-6))
    sc = torch.ones((), device=dev)
    ew["vireo quantize_fp8 [6144,4096]"] = median_ms(lambda: torch.ops.vireo.quantize_fp8(x, sc))
    ew["vireo quantize_fp8 [6144,16384]"] = median_ms(lambda: torch.ops.vireo.quantize_fp8(big, sc))
copy_dst = torch.empty_like(x)
ew["copy [6144,4096] (bandwidth floor)"] = median_ms(lambda: copy_dst.copy_(x))
for k, v in ew.items():
    print(f"elementwise {k:36s} {v * 1e3:8.1f} us")
if args.json:
    with open(args.json, "w") as f:
        json.dump({"gemms": rows, "gemm_totals": tot, "attention": att, "elementwise_ms": ew}, f, indent=2)
