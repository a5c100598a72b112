// The schemas of every vireo:: op. Each has a CPU reference (*_cpu.cpp) and, in CUDA builds,
// a CUDA implementation (*.cu) registered for the same schema.
#include <torch/library.h>

TORCH_LIBRARY(vireo, m)
{
    m.def("dequantize_fp8(Tensor weight, Tensor scale, ScalarType dtype, int[] block_size=[]) -> Tensor");
    m.def("dequantize_fp8.out(Tensor weight, Tensor scale, int[] block_size, *, Tensor(a!) out) -> Tensor(a!)");
    m.def("dequantize_gguf(Tensor blocks, int ggml_type, int[] shape, ScalarType dtype) -> Tensor");
    m.def("dequantize_gguf.out(Tensor blocks, int ggml_type, *, Tensor(a!) out) -> Tensor(a!)");
    m.def("dequantize_nf4(Tensor packed, Tensor absmax, Tensor code, int block_size, int[] shape, ScalarType dtype) -> Tensor");
    m.def("dequantize_nf4.out(Tensor packed, Tensor absmax, Tensor code, int block_size, *, Tensor(a!) out) -> Tensor(a!)");
    m.def("quantize_fp8(Tensor x, Tensor scale) -> Tensor");
    m.def("gelu_quantize_fp8(Tensor x, Tensor scale) -> Tensor");
    m.def("rms_norm_modulate(Tensor x, Tensor scale, Tensor shift, float eps) -> Tensor");
    m.def("gated_residual_rms_norm_modulate(Tensor x, Tensor delta, Tensor gate, Tensor scale, Tensor shift, float eps)"
          " -> (Tensor, Tensor)");
    m.def("rms_norm_modulate_fp8(Tensor x, Tensor scale, Tensor shift, float eps, Tensor qscale) -> Tensor");
    m.def("gated_residual_rms_norm_modulate_fp8(Tensor x, Tensor delta, Tensor gate, Tensor scale, Tensor shift, float eps,"
          " Tensor qscale) -> (Tensor, Tensor)");
    m.def("gate_heads(Tensor x, Tensor logits) -> Tensor");
    m.def("gate_heads_fp8(Tensor x, Tensor logits, Tensor qscale) -> Tensor");
    m.def("rms_norm_rope(Tensor x, Tensor weight, Tensor cos, Tensor sin, float eps) -> Tensor");
}
