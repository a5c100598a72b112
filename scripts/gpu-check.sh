#!/usr/bin/env bash
# The GPU machine's check, in one run of the device tool. That machine has PyTorch with CUDA,
# cmake, ninja, nvcc and compute-sanitizer, but no Debian packages and no diffusers, so:
#   1. here:   scripts/gpu-check.sh --stage
#      copies the header-only JSON library and the pipeline fixtures (made by the pinned
#      references on this machine) into build-gpu/, downloads the diffusers and gguf wheels
#      into .whl/, and prints the `carry` list;
#   2. there:  scripts/gpu-check.sh [--quick]
#      builds the inference layer without Qt or FFmpeg against that machine's PyTorch, runs
#      every test labelled gpu (CUDA kernels, CUDA layers, the LTX-2 pipeline's parity on the
#      device), the GPU benchmark (tests/bench/bench_gpu.py) and compute-sanitizer memcheck
#      on the kernel, layer and pipeline tests, then the VAE encoder/upsampler/decode stage
#      benchmark (tests/bench/bench_gpu_stages.py) and the Ideogram-4 step benchmark
#      (tests/bench/bench_gpu_ideogram.py) when the budget allows; then the Ampere path: the
#      kernels built for compute capability 8.0 alone (PTX the driver compiles for this GPU)
#      through the kernel, layer and pipeline tests with FP8 GEMMs forced to dequantize
#      (VIREO_FP8_TENSOR_CORES=0), as an RTX 3090 or A100 runs them. Logs go to $OUT (or
#      build-gpu/out) as they are written, so a run cut short still returns what it did.
#      scripts/gpu-check.sh --stages builds vireo-bench and runs only the stage benchmark,
#      --ideogram only the Ideogram-4 one.
#   The fixtures outgrew the carry limit (64 MiB; LTX-2's alone are 160 MiB now), so `--stage`
#   carries the generators' wheels instead (diffusers, transformers, gguf, regex: the machine has
#   torch, tokenizers, safetensors and huggingface_hub) and the run makes every fixture there,
#   in the background while it builds: LTX-2's pipeline, upsampler and diffusion-decoder ones and
#   Ideogram-4's. (The ltx2recipes fixture needs ltx-core and PyAV, too big to carry: the recipe
#   checks are left out there and say so.) `--stage local [ideogram]` copies one family's
#   fixtures from build/ as before, for a run that must not depend on the generators.
#   The device tool brings back at most 8 files: the run keeps summary.txt and one logs.tar.gz
#   (every log, packed again at each step) in $OUT.
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD="$ROOT/build-gpu"
FIXTURES="tests/fixtures/ltx2pipeline"
IDEOGRAM_FIXTURES="tests/fixtures/ideogram4"

if [[ "${1:-}" == "--stage" ]]; then
  set -e
  staged=""
  if [[ "${2:-}" == "local" ]]; then
    staged=$FIXTURES
    marker=v23/run_distilled.safetensors
    if [[ "${3:-}" == "ideogram" ]]; then
      staged=$IDEOGRAM_FIXTURES
      marker=pipeline/case.safetensors
    fi
    source="$ROOT/build/$staged"
    if [[ ! -f "$source/$marker" ]]; then
      echo "gpu-check: no fixtures in $source; run scripts/test.sh (or ctest -R fixtures) first" >&2
      exit 1
    fi
  fi
  rm -rf "$BUILD/tests/fixtures" "$BUILD/third_party" "$ROOT/.whl"
  mkdir -p "$BUILD/third_party" "$BUILD/tests/fixtures"
  [[ -n "$staged" ]] && mkdir -p "$BUILD/$staged" && cp -a "$source/." "$BUILD/$staged/"
  cp -a /usr/include/nlohmann "$BUILD/third_party/"
  # The cuDNN frontend headers for FP8 attention, compressed (3 MB as text; the carry limit is
  # 64 MiB and the fixtures take 56).
  "$ROOT/scripts/cudnn-frontend.sh"
  tar -C "$ROOT/.cache/cudnn-frontend" -cJf "$BUILD/third_party/cudnn-frontend.tar.xz" include .version
  # The references at the project's pins, for the benchmark and the fixture generators: the GPU
  # machine has their other dependencies (torch 2.11, tokenizers 0.23, huggingface_hub 1.3x,
  # safetensors 0.8), except importlib_metadata and a regex as new as transformers checks for.
  mkdir -p "$ROOT/.whl"
  pin() { grep -E "^$1==" "$ROOT/requirements.txt"; }
  "$ROOT/.venv/bin/python" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d "$ROOT/.whl" \
    "$(pin diffusers)" "$(pin gguf)" "$(pin transformers)" importlib_metadata==10.2.0 \
    "regex==$("$ROOT/.venv/bin/python" -c 'import importlib.metadata as m; print(m.version("regex"))')"
  du -sh "$BUILD/tests/fixtures" "$BUILD/third_party" "$ROOT/.whl"
  echo "carry: [\"build-gpu/tests/fixtures\", \"build-gpu/third_party\", \".whl\"]"
  exit 0
fi

# --quick: no benchmark; --bench: only the benchmarks (ops, forward with kernel profiles,
# torch.compile baseline), no tests; --stages: only the VAE encoder/upsampler/decode stage benchmark;
# --ideogram: only the Ideogram-4 step benchmark; --ampere: only the Ampere path (its own build and
# the gpu tests, without the sm_90 build, benchmarks or memcheck).
QUICK=0
BENCH_ONLY=0
STAGES_ONLY=0
IDEOGRAM_ONLY=0
AMPERE_ONLY=0
[[ "${1:-}" == "--quick" ]] && QUICK=1
[[ "${1:-}" == "--bench" ]] && BENCH_ONLY=1
[[ "${1:-}" == "--stages" ]] && STAGES_ONLY=1 && BENCH_ONLY=1
[[ "${1:-}" == "--ideogram" ]] && IDEOGRAM_ONLY=1 && BENCH_ONLY=1
[[ "${1:-}" == "--ampere" ]] && AMPERE_ONLY=1
# Logs are written to $BUILD/logs; $OUT (or build-gpu/out) gets summary.txt and logs.tar.gz,
# packed again after every note so a run cut short still returns what it did.
RESULTS=${OUT:-$BUILD/out}
OUTDIR="$BUILD/logs"
rm -rf "$OUTDIR"
mkdir -p "$OUTDIR" "$RESULTS"
SUMMARY="$OUTDIR/summary.txt"
: >"$SUMMARY"
pack() {
  cp "$SUMMARY" "$RESULTS/summary.txt.tmp" && mv "$RESULTS/summary.txt.tmp" "$RESULTS/summary.txt"
  tar -C "$OUTDIR" -czf "$RESULTS/logs.tar.gz.tmp" . 2>/dev/null && mv "$RESULTS/logs.tar.gz.tmp" "$RESULTS/logs.tar.gz"
}
note() { echo "$*" | tee -a "$SUMMARY"; pack; }
start=$SECONDS
elapsed() { echo $((SECONDS - start)); }
# The device lease is short: later stages shrink or skip to end within this many seconds.
BUDGET=${VIREO_GPU_BUDGET_S:-450}

PYTHON=${VIREO_PYTHON:-$(command -v python3)}
"$PYTHON" -c "import torch; assert torch.cuda.is_available(), 'no CUDA device'; print('torch', torch.__version__, torch.cuda.get_device_name(0))" | tee -a "$SUMMARY" || exit 1
[[ -f "$BUILD/third_party/nlohmann/json.hpp" ]] \
  || { echo "gpu-check: build-gpu/ was not staged; run scripts/gpu-check.sh --stage here and carry what it prints" >&2; exit 1; }
if compgen -G "$ROOT/.whl/*.whl" >/dev/null; then
  "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/vireo-site "$ROOT"/.whl/*.whl \
    && export PYTHONPATH=/tmp/vireo-site${PYTHONPATH:+:$PYTHONPATH}
fi
# The fixtures that were not carried are made here by the pinned references, while the build runs.
fixture_jobs=()
make_fixture() {
  local name=$1 script=$2
  [[ -d "$BUILD/tests/fixtures/$name" ]] && return
  OMP_NUM_THREADS=3 "$PYTHON" "$ROOT/tests/fixtures/$script" "$BUILD/tests/fixtures/$name" >"$OUTDIR/fixture-$name.log" 2>&1 &
  fixture_jobs+=("$!:$name")
}
if [[ $BENCH_ONLY -eq 0 ]]; then
  make_fixture ltx2pipeline make_ltx2_pipeline_fixtures.py
  make_fixture ltx2upsampler make_ltx2_upsampler_fixtures.py
  # The Ampere run tests LTX-2 alone; the diffusion-decoder fixture only checks a refusal there.
  [[ $AMPERE_ONLY -eq 1 ]] || make_fixture ltx2diffdec make_ltx2_diffdec_fixtures.py
  [[ $AMPERE_ONLY -eq 1 ]] || make_fixture ideogram4 make_ideogram4_fixtures.py
fi

# 1. Build (sm_90 native code only, which is what this GPU runs; packages carry every
#    architecture); the inference layer, its tests, vireo-cli and vireo-bench.
frontend=()
if [[ -f "$BUILD/third_party/cudnn-frontend.tar.xz" ]]; then
  mkdir -p "$BUILD/third_party/cudnn-frontend"
  tar -C "$BUILD/third_party/cudnn-frontend" -xJf "$BUILD/third_party/cudnn-frontend.tar.xz"
  frontend=(-DVIREO_CUDNN_FRONTEND_INCLUDE="$BUILD/third_party/cudnn-frontend/include")
fi
if [[ $AMPERE_ONLY -eq 1 ]]; then
  echo "sm_90 build: skipped (--ampere)" >"$OUTDIR/build.log"
else
  cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DVIREO_GUI=OFF -DVIREO_CUDA=ON "${frontend[@]}" \
  -DVIREO_PYTHON="$PYTHON" -DVIREO_NLOHMANN_INCLUDE="$BUILD/third_party" -DTORCH_CUDA_ARCH_LIST=9.0 >"$OUTDIR/build.log" 2>&1 \
  && if [[ $STAGES_ONLY -eq 1 || $IDEOGRAM_ONLY -eq 1 ]]; then ninja -C "$BUILD" vireo-bench; \
     elif [[ $BENCH_ONLY -eq 1 ]]; then ninja -C "$BUILD" vireo-cli vireo-bench vireo_kernels; \
     else ninja -C "$BUILD" test_fp8dequant_gpu test_dequant_gpu test_fusedops_gpu test_backend_ops test_cuda_layers test_ltx2pipeline test_ideogram4 vireo-cli \
       $([[ $QUICK -eq 1 ]] || echo vireo-bench); fi \
     >>"$OUTDIR/build.log" 2>&1
fi
build_rc=$?
note "build: rc $build_rc at $(elapsed) s; $(grep -m1 -E "FP8 attention" "$OUTDIR/build.log" || echo "FP8 attention: not reported")"
[[ $build_rc -eq 0 ]] || { tail -40 "$OUTDIR/build.log"; exit 1; }
if [[ -x "$BUILD/app/vireo-cli" ]]; then
  "$BUILD/app/vireo-cli" devices >"$OUTDIR/devices.txt" 2>&1 && "$BUILD/app/vireo-cli" devices --json >"$OUTDIR/devices.json" 2>&1
  note "vireo-cli devices: rc $?"; cat "$OUTDIR/devices.txt" | tee -a "$SUMMARY"
fi
# Waits for the fixtures made here, then leaves out the tests whose fixtures are neither carried
# nor made (a second call does nothing).
exclude=()
await_fixtures() {
  for job in "${fixture_jobs[@]}"; do
    wait "${job%%:*}"
    rc=$?
    note "fixture ${job#*:} made here: rc $rc at $(elapsed) s; $(tail -1 "$OUTDIR/fixture-${job#*:}.log")"
    [[ $rc -eq 0 ]] || { tail -5 "$OUTDIR/fixture-${job#*:}.log" | tee -a "$SUMMARY"; rm -rf "$BUILD/tests/fixtures/${job#*:}"; }
  done
  # The tests whose fixtures are neither carried nor made here are left out.
  local unstaged=()
  [[ $BENCH_ONLY -eq 0 && ! -d "$BUILD/$FIXTURES/v23" ]] && unstaged+=(test_ltx2pipeline_cuda)
  [[ $BENCH_ONLY -eq 0 && ! -d "$BUILD/$IDEOGRAM_FIXTURES/pipeline" ]] && unstaged+=(test_ideogram4_cuda)
  if [[ ${#unstaged[@]} -gt 0 ]]; then
    exclude=(-E "$(IFS='|'; echo "${unstaged[*]}")")
    note "no fixtures, left out: ${unstaged[*]}"
  fi
  fixture_jobs=()
}
[[ $AMPERE_ONLY -eq 1 ]] || await_fixtures

# 2. Every gpu-labelled test. -FA: the fixtures were carried in (their generators need diffusers).
gpu_rc=0
[[ $BENCH_ONLY -eq 1 || $AMPERE_ONLY -eq 1 ]] || { ctest --test-dir "$BUILD" -L gpu "${exclude[@]}" -FA '.*' --output-on-failure -V --timeout 300 >"$OUTDIR/ctest.log" 2>&1; gpu_rc=$?; }
[[ $BENCH_ONLY -eq 1 || $AMPERE_ONLY -eq 1 ]] || note "ctest -L gpu: rc $gpu_rc at $(elapsed) s"
[[ $BENCH_ONLY -eq 1 || $AMPERE_ONLY -eq 1 ]] || grep -E "^[0-9]+: (FAIL|   )|Totals|tests passed|tests failed|\(Failed\)|max rel|rel [0-9]|fp8 attention" "$OUTDIR/ctest.log" | grep -v "PASS" | tail -60 | tee -a "$SUMMARY"

# A failure is diagnosed in the same run: the failed tests again with CUDA graphs off, then also
# with FP8 attention off, then also with the fused kernels replaced by their torch compositions. Passing only there names the
# culprit without a second device session.
failed_log="$BUILD/Testing/Temporary/LastTestsFailed.log"
if [[ $BENCH_ONLY -eq 0 && $gpu_rc -ne 0 && -s "$failed_log" ]]; then
  failed=$(cut -d: -f2 "$failed_log" | paste -sd'|')
  for switches in "VIREO_CUDA_GRAPHS=0" "VIREO_CUDA_GRAPHS=0 VIREO_FP8_ATTENTION=0" \
      "VIREO_CUDA_GRAPHS=0 VIREO_FP8_ATTENTION=0 VIREO_FUSED_KERNELS=0"; do
    left=$((BUDGET - $(elapsed)))
    [[ $left -lt 90 ]] && { note "failed tests again with $switches: skipped (budget)"; continue; }
    env $switches timeout $((left / 3 < 200 ? left / 3 : 200)) ctest --test-dir "$BUILD" -R "^($failed)\$" -FA '.*' --output-on-failure -V --timeout 180 \
      >"$OUTDIR/ctest-rerun-${switches// /-}.log" 2>&1
    rc=$?
    note "failed tests again with $switches: rc $rc ($( [[ $rc -eq 0 ]] && echo 'all pass: the switched-off part is at fault' || echo 'still failing')) at $(elapsed) s"
    grep -E "^[0-9]+: FAIL|tests passed|tests failed|\(Failed\)" "$OUTDIR/ctest-rerun-${switches// /-}.log" | tail -12 | tee -a "$SUMMARY"
  done
fi

# The Ampere path on this GPU: the kernels built for compute capability 8.0 alone (sm_80 machine
# code, which a 9.0 device cannot run, and compute_80 PTX, which its driver compiles), so the code
# of sm_80 runs (software FP8 conversion, no FP8 tensor cores), through the kernel, layer and
# pipeline tests with every FP8 GEMM forced to dequantize first (VIREO_FP8_TENSOR_CORES=0).
# Not CUDA_FORCE_PTX_JIT=1: it forces PTX on every library too, and cuBLAS (cublasCreate:
# CUBLAS_STATUS_INTERNAL_ERROR) and many of PyTorch's kernels ("no kernel image") carry none
# for this device (seen on the H200, 2026-12-04).
ampere_path() {
  local left=$((BUDGET - $(elapsed)))
  if [[ $left -lt 150 ]]; then note "Ampere path (compute_80 PTX, VIREO_FP8_TENSOR_CORES=0): skipped (budget spent)"; return; fi
  local dir="$BUILD-sm80"
  cmake -S "$ROOT" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DVIREO_GUI=OFF -DVIREO_CUDA=ON "${frontend[@]}" \
    -DVIREO_PYTHON="$PYTHON" -DVIREO_NLOHMANN_INCLUDE="$BUILD/third_party" "-DTORCH_CUDA_ARCH_LIST=8.0+PTX" >"$OUTDIR/build-sm80.log" 2>&1 \
    && timeout $((left - 60)) ninja -C "$dir" test_fp8dequant_gpu test_dequant_gpu test_fusedops_gpu test_backend_ops test_cuda_layers test_ltx2pipeline \
       >>"$OUTDIR/build-sm80.log" 2>&1
  local rc=$?
  note "Ampere path build (TORCH_CUDA_ARCH_LIST=8.0+PTX): rc $rc at $(elapsed) s"
  [[ $rc -eq 0 ]] || { tail -20 "$OUTDIR/build-sm80.log" | tee -a "$SUMMARY"; return; }
  await_fixtures
  left=$((BUDGET - $(elapsed)))
  # The pipeline case needs the fixtures of the main build folder.
  mkdir -p "$dir/tests" && rm -rf "$dir/tests/fixtures" && ln -sfn "$BUILD/tests/fixtures" "$dir/tests/fixtures"
  VIREO_FP8_TENSOR_CORES=0 timeout $((left > 40 ? left - 20 : 20)) ctest --test-dir "$dir" -L gpu "${exclude[@]}" \
    -E 'test_ideogram4_cuda' -FA '.*' --output-on-failure -V --timeout 240 >"$OUTDIR/ctest-sm80.log" 2>&1
  rc=$?
  note "Ampere path tests (compute_80 PTX, VIREO_FP8_TENSOR_CORES=0): rc $rc at $(elapsed) s"
  grep -E "^[0-9]+: (FAIL|   )|Totals|tests passed|tests failed|\(Failed\)|max rel|rel [0-9]|dequantize \+ GEMM" "$OUTDIR/ctest-sm80.log" \
    | grep -v PASS | tail -30 | tee -a "$SUMMARY"
}

# The video VAE encoder (a still, a tiled and chunked clip), the x2 latent upsampler and the
# tiled VAE decode at 768x512x121, Vireo against diffusers on real-config random weights (two or
# three minutes expected; the decode's output, 0.57 GB in float32, goes through a file too).
# After the tests, the transformer benchmark and memcheck, in what budget they leave.
stage_bench() {
  local left=$((BUDGET - $(elapsed))) limit=$1
  if [[ $left -lt 90 ]]; then note "bench gpu stages: skipped (budget spent)"; return; fi
  [[ $limit -gt $((left - 10)) ]] && limit=$((left - 10))
  PYTHONUNBUFFERED=1 timeout "$limit" "$PYTHON" "$ROOT/tests/bench/bench_gpu_stages.py" "$BUILD/app/vireo-bench" --repeat 3 \
    --work /tmp/vireo-bench-stages --report "$OUTDIR/stages.json" >"$OUTDIR/stages.log" 2>&1
  local rc=$?
  note "bench gpu stages: rc $rc$([[ $rc -eq 124 ]] && echo ' (timed out)') at $(elapsed) s"
  sed -n '/== bench gpu stages/,$p' "$OUTDIR/stages.log" | tee -a "$SUMMARY"
  grep -E "FAILED|Error|error" "$OUTDIR/stages.log" | head -20 | tee -a "$SUMMARY"
  rm -rf /tmp/vireo-bench-stages
}
# One Ideogram-4 DiT step (4 of 34 layers at the real width, 1024x1024, 512 text tokens),
# conditional and unconditional, Vireo bf16 and FP8 against diffusers eager bf16 (about a minute
# expected: most of it writing the 2.5 GiB of random weights and four loads of them). The device
# tool brings back at most 8 files and the full run already writes 8, so there its log goes into
# the summary; with --ideogram it gets its own log and JSON report.
ideogram_bench() {
  local left=$((BUDGET - $(elapsed))) limit=$1 log=/tmp/vireo-bench-ideogram.log report=()
  if [[ $left -lt 90 ]]; then note "bench gpu ideogram: skipped (budget spent)"; return; fi
  [[ $limit -gt $((left - 10)) ]] && limit=$((left - 10))
  [[ $IDEOGRAM_ONLY -eq 1 ]] && log="$OUTDIR/ideogram.log" && report=(--report "$OUTDIR/ideogram.json")
  PYTHONUNBUFFERED=1 timeout "$limit" "$PYTHON" "$ROOT/tests/bench/bench_gpu_ideogram.py" "$BUILD/app/vireo-bench" --layers 4 \
    --repeat 5 --work /tmp/vireo-bench-ideogram "${report[@]}" >"$log" 2>&1
  local rc=$?
  note "bench gpu ideogram: rc $rc$([[ $rc -eq 124 ]] && echo ' (timed out)') at $(elapsed) s"
  if [[ $IDEOGRAM_ONLY -eq 1 ]]; then
    sed -n '/== bench gpu ideogram/,$p' "$log" | tee -a "$SUMMARY"
    grep -E "FAILED|Error|error|skipped" "$log" | head -20 | tee -a "$SUMMARY"
  else
    tail -c 20000 "$log" >>"$SUMMARY"
    sed -n '/== bench gpu ideogram/,$p' "$log"
    grep -E "FAILED|Error|error|skipped" "$log" | head -20
    rm -f "$log"
  fi
  rm -rf /tmp/vireo-bench-ideogram
}
if [[ $AMPERE_ONLY -eq 1 ]]; then
  ampere_path
  note "gpu-check: done in $(elapsed) s"
  exit 0
fi
if [[ $STAGES_ONLY -eq 1 ]]; then
  stage_bench 360
  note "gpu-check: done in $(elapsed) s"
  exit 0
fi
if [[ $IDEOGRAM_ONLY -eq 1 ]]; then
  ideogram_bench 240
  note "gpu-check: done in $(elapsed) s"
  exit 0
fi

# 3. The GPU benchmark.
if [[ $QUICK -eq 0 ]]; then
  bench_extra=()
  if [[ $BENCH_ONLY -eq 1 ]]; then
    PYTHONUNBUFFERED=1 timeout 120 "$PYTHON" "$ROOT/tests/bench/bench_gpu_ops.py" --kernels "$BUILD/kernels/libvireo_kernels.so" \
      --json "$OUTDIR/ops.json" >"$OUTDIR/ops.log" 2>&1
    note "bench gpu ops: rc $? at $(elapsed) s"
    cat "$OUTDIR/ops.log" >>"$SUMMARY"
    bench_extra=(--compile)
  fi
  PYTHONUNBUFFERED=1 timeout $((BUDGET - $(elapsed) - 20)) "$PYTHON" "$ROOT/tests/bench/bench_gpu.py" "$BUILD/app/vireo-cli" \
    --bench "$BUILD/app/vireo-bench" --layers 4 --repeat 10 --work /tmp/vireo-bench-gpu --report "$OUTDIR/bench.json" "${bench_extra[@]}" \
    >"$OUTDIR/bench.log" 2>&1
  note "bench gpu: rc $? at $(elapsed) s"
  sed -n '/== bench gpu/,$p' "$OUTDIR/bench.log" | tee -a "$SUMMARY"
  grep -E "FAILED|Error|error" "$OUTDIR/bench.log" | head -20 | tee -a "$SUMMARY"
  rm -rf /tmp/vireo-bench-gpu
  # LTX-2.5's step beside 2.3's, when the budget allows: bf16 and FP8, the default attention.
  if [[ $((BUDGET - $(elapsed))) -gt 150 ]]; then
    PYTHONUNBUFFERED=1 timeout $((BUDGET - $(elapsed) - 60)) "$PYTHON" "$ROOT/tests/bench/bench_gpu.py" "$BUILD/app/vireo-cli" \
      --bench "$BUILD/app/vireo-bench" --version 2.5 --layers 4 --repeat 10 --attention default --skip q4k,dequant \
      --work /tmp/vireo-bench-gpu25 --report "$OUTDIR/bench25.json" >"$OUTDIR/bench25.log" 2>&1
    note "bench gpu 2.5: rc $? at $(elapsed) s"
    sed -n '/== bench gpu/,$p' "$OUTDIR/bench25.log" | tee -a "$SUMMARY"
    rm -rf /tmp/vireo-bench-gpu25
  else
    note "bench gpu 2.5: skipped (budget)"
  fi
  # One tile of 2.5's 4K third stage (3840x2176x121), when the budget still allows.
  if [[ $((BUDGET - $(elapsed))) -gt 150 ]]; then
    PYTHONUNBUFFERED=1 timeout $((BUDGET - $(elapsed) - 60)) "$PYTHON" "$ROOT/tests/bench/bench_gpu.py" "$BUILD/app/vireo-cli" \
      --bench "$BUILD/app/vireo-bench" --version 2.5 --grid 16x47x73 --layers 4 --repeat 5 --attention default \
      --skip q4k,dequant,lora,recipes --work /tmp/vireo-bench-gpu4k --report "$OUTDIR/bench4k.json" >"$OUTDIR/bench4k.log" 2>&1
    note "bench gpu 2.5 4K tile: rc $? at $(elapsed) s"
    sed -n '/== bench gpu/,$p' "$OUTDIR/bench4k.log" | tee -a "$SUMMARY"
    rm -rf /tmp/vireo-bench-gpu4k
  else
    note "bench gpu 2.5 4K tile: skipped (budget)"
  fi
fi

# 4. compute-sanitizer memcheck: kernels, layers, then one pipeline case per version.
if [[ $BENCH_ONLY -eq 1 ]]; then
  :
elif command -v compute-sanitizer >/dev/null; then
  : >"$OUTDIR/sanitizer.log"
  san() {
    local label=$1 limit=$2; shift 2
    local left=$((BUDGET - $(elapsed)))
    if [[ $left -lt 30 ]]; then note "memcheck $label: skipped (budget spent)"; return; fi
    [[ $limit -gt $left ]] && limit=$left
    timeout "$limit" compute-sanitizer --tool memcheck --error-exitcode 99 --print-limit 20 "$@" >>"$OUTDIR/sanitizer.log" 2>&1
    local rc=$?
    note "memcheck $label: rc $rc ($( [[ $rc -eq 0 ]] && echo clean || ([[ $rc -eq 124 ]] && echo 'timed out' || echo 'ERRORS'))) at $(elapsed) s"
  }
  export VIREO_SOURCE_DIR="$ROOT"
  san test_dequant_gpu 90 "$BUILD/tests/test_dequant_gpu"
  san test_fusedops_gpu 90 "$BUILD/tests/test_fusedops_gpu"
  san test_cuda_layers 120 "$BUILD/tests/test_cuda_layers"
  if [[ -d "$BUILD/$FIXTURES/v23" ]]; then
    VIREO_FIXTURES_DIR="$BUILD/$FIXTURES" VIREO_TEST_DEVICE=cuda san "test_ltx2pipeline distilled" 200 \
      "$BUILD/tests/test_ltx2pipeline" distilledMatchesDiffusers
    VIREO_FIXTURES_DIR="$BUILD/$FIXTURES" VIREO_TEST_DEVICE=cuda san "test_ltx2pipeline image-to-video" 150 \
      "$BUILD/tests/test_ltx2pipeline" imageToVideoMatchesDiffusers
  fi
  if [[ -d "$BUILD/$IDEOGRAM_FIXTURES/pipeline" ]]; then
    VIREO_FIXTURES_DIR="$BUILD/$IDEOGRAM_FIXTURES" VIREO_TEST_DEVICE=cuda san "test_ideogram4 pipeline" 200 \
      "$BUILD/tests/test_ideogram4" pipelineMatchesDiffusersWithInjectedNoise
  fi
  grep -E "Invalid|misaligned|out of bounds|ERROR SUMMARY" "$OUTDIR/sanitizer.log" | head -20 | tee -a "$SUMMARY"
else
  note "compute-sanitizer: not found"
fi
# 5. The Ampere path, the stage benchmark, then the Ideogram-4 step.
ampere_path
[[ $QUICK -eq 0 ]] && stage_bench 180
[[ $QUICK -eq 0 ]] && ideogram_bench 150
note "gpu-check: done in $(elapsed) s"
