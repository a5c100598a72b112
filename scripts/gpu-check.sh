#!/usr/bin/env bash
# The GPU machine's check, in one run of the device tool. That machine has PyTorch with CUDA,
# cmake, ninja and nvcc, but no Debian packages and no diffusers, so:
#   1. here:   scripts/gpu-check.sh --stage
#      copies the header-only JSON library and the pipeline fixtures (made by the pinned
#      references on this machine) into build-gpu/ and prints the `carry` list;
#   2. there:  scripts/gpu-check.sh
#      builds the inference layer without Qt or FFmpeg against that machine's PyTorch, then
#      runs every test labelled gpu: the CUDA dequantization kernels and the LTX-2 pipeline's
#      parity (float32, TF32 off) and bfloat16 checks on the device.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD="$ROOT/build-gpu"
FIXTURES="tests/fixtures/ltx2pipeline"

if [[ "${1:-}" == "--stage" ]]; then
  source="$ROOT/build/$FIXTURES"
  if [[ ! -f "$source/v23/run_distilled.safetensors" ]]; then
    echo "gpu-check: no pipeline fixtures in $source; run scripts/test.sh (or ctest -R fixtures.ltx2pipeline) first" >&2
    exit 1
  fi
  rm -rf "$BUILD/$FIXTURES" "$BUILD/third_party"
  mkdir -p "$BUILD/$FIXTURES" "$BUILD/third_party"
  cp -a "$source/." "$BUILD/$FIXTURES/"
  cp -a /usr/include/nlohmann "$BUILD/third_party/"
  du -sh "$BUILD/$FIXTURES" "$BUILD/third_party"
  echo "carry: [\"build-gpu/$FIXTURES\", \"build-gpu/third_party\"]"
  exit 0
fi

PYTHON=${VIREO_PYTHON:-$(command -v python3)}
"$PYTHON" -c "import torch; assert torch.cuda.is_available(), 'no CUDA device'; print('torch', torch.__version__, torch.cuda.get_device_name(0))"
[[ -f "$BUILD/third_party/nlohmann/json.hpp" && -d "$BUILD/$FIXTURES/v23" ]] \
  || { echo "gpu-check: build-gpu/ was not staged; run scripts/gpu-check.sh --stage here and carry what it prints" >&2; exit 1; }

cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DVIREO_GUI=OFF -DVIREO_CUDA=ON \
  -DVIREO_PYTHON="$PYTHON" -DVIREO_NLOHMANN_INCLUDE="$BUILD/third_party" -DCMAKE_CUDA_ARCHITECTURES=90
ninja -C "$BUILD" test_fp8dequant_gpu test_dequant_gpu test_ltx2pipeline
# -FA: the fixtures were carried in; their generators need diffusers, which is not there.
ctest --test-dir "$BUILD" -L gpu -FA '.*' --output-on-failure -V | grep -v '^[0-9]*: PASS'
