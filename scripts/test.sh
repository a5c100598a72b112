#!/usr/bin/env bash
# Installs what is missing, builds everything and runs the whole test suite: the main build
# (warnings as errors; CUDA kernels compiled when nvcc is present), the style and static checks
# of the newest commit's files (scripts/lint.py), the main build's tests (test_packages among
# them builds the installer packages from build/ and runs them unpacked), then the file
# readers, the CPU dequantization kernels, the model ports and the MP4 writer again under
# AddressSanitizer and UndefinedBehaviorSanitizer, then a short fuzzing run of every parser of
# untrusted input (VIREO_FUZZ_SECONDS per target, default 30; 0 skips it; longer runs by hand
# with scripts/fuzz.sh).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
JOBS=${VIREO_TEST_JOBS:-2}

# Warnings are errors here (a fresh build/ only: an existing one keeps how it was configured);
# the sanitizer and fuzzing builds below keep theirs.
VIREO_APT_LISTS="scripts/apt-packages.txt scripts/apt-packages-tests.txt" \
  VIREO_CMAKE_ARGS="-DVIREO_WERROR=ON ${VIREO_CMAKE_ARGS:-}" "$ROOT/scripts/bootstrap.sh" "$ROOT/build"
# Style and static checks on what the newest commit changed (.clang-format, .clang-tidy).
python3 "$ROOT/scripts/lint.py" --build "$ROOT/build"
# The gpu label needs a CUDA device; the GPU machine runs it with `ctest -L gpu`.
ctest --test-dir "$ROOT/build" --output-on-failure -j "$JOBS" -LE gpu

VIREO_CMAKE_ARGS="-DVIREO_GUI=OFF -DVIREO_CUDA=OFF -DVIREO_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug" \
  "$ROOT/scripts/bootstrap.sh" "$ROOT/build-asan" -- test_capability test_tensorfiles test_badcorpus test_inspect test_hostilefiles test_quant test_lora test_qwen3vl \
    test_fp8dequant test_fusedops test_ltx2dit test_gemma3 test_mp4writer test_ltx2upsampler test_imageio test_audioio \
    replay_safetensors replay_gguf replay_hubjson replay_config replay_tokenizer replay_inspect replay_recipe replay_media
ctest --test-dir "$ROOT/build-asan" --output-on-failure -j "$JOBS" -L asan

FUZZ_SECONDS=${VIREO_FUZZ_SECONDS:-30}
if [ "$FUZZ_SECONDS" != 0 ]; then
  VIREO_FUZZ_JOBS=$JOBS "$ROOT/scripts/fuzz.sh" "$FUZZ_SECONDS"
fi
