#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz, clang with ASan/UBSan) and fuzzes each one for a
# fixed time, after replaying its seeds and every recorded crash. A crash stops the run: the
# input is left in build-fuzz/artifacts/; copy it to tests/fuzz/regressions/<target>/, which
# the replay tests of the main and sanitizer builds run from then on, and fix the reader.
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]      (default 30 s, every target)
#   VIREO_FUZZ_DIR=build-fuzz  VIREO_FUZZ_JOBS=1          (longer runs by hand: 600 or more)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SECONDS_PER_TARGET=${1:-30}
shift || true
BUILD=${VIREO_FUZZ_DIR:-$ROOT/build-fuzz}
JOBS=${VIREO_FUZZ_JOBS:-1}
CXX_FUZZ=${VIREO_FUZZ_CXX:-$(command -v clang++-14 || command -v clang++ || true)}
if [ -z "$CXX_FUZZ" ]; then
  echo "fuzz: no clang++ (install clang and libclang-rt-14-dev, see scripts/apt-packages.txt)" >&2
  exit 1
fi

GEN=()
command -v ninja >/dev/null && GEN=(-G Ninja)
cmake -S "$ROOT/tests/fuzz" -B "$BUILD" "${GEN[@]}" -DCMAKE_CXX_COMPILER="$CXX_FUZZ" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$BUILD" -j "$JOBS"

TARGETS=("$@")
if [ ${#TARGETS[@]} -eq 0 ]; then
  TARGETS=(safetensors gguf hubjson config tokenizer inspect recipe)
  [ -x "$BUILD/fuzz_media" ] && TARGETS+=(media)
fi
mkdir -p "$BUILD/artifacts" "$BUILD/tmp"
export TMPDIR="$BUILD/tmp"
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
for t in "${TARGETS[@]}"; do
  seeds=("$ROOT/tests/fuzz/seeds/$t")
  case $t in
    safetensors|gguf|inspect) seeds+=("$ROOT/tests/corpus/bad") ;;
  esac
  corpus="$BUILD/corpus/$t"
  mkdir -p "$corpus"
  # The recorded crashes first: a regression fails fast, before any fuzzing time is spent.
  "$BUILD/fuzz_$t" -runs=0 "$ROOT/tests/fuzz/regressions/$t" "${seeds[@]}" >/dev/null 2>&1 || {
    echo "fuzz: $t crashes on a recorded input (tests/fuzz/regressions/$t or its seeds)" >&2
    "$BUILD/fuzz_$t" -runs=0 "$ROOT/tests/fuzz/regressions/$t" "${seeds[@]}"
    exit 1
  }
  # A crash left by an earlier run is kept aside, not taken for one of this run's: it was
  # replayed above with the regressions only if someone copied it there.
  if ls "$BUILD/artifacts/$t-"* >/dev/null 2>&1; then
    mkdir -p "$BUILD/artifacts/earlier"
    mv "$BUILD/artifacts/$t-"* "$BUILD/artifacts/earlier/"
    echo "fuzz: $t: earlier crash inputs moved to $BUILD/artifacts/earlier/" >&2
  fi
  echo "fuzz: $t for ${SECONDS_PER_TARGET} s"
  "$BUILD/fuzz_$t" "$corpus" "${seeds[@]}" -dict="$ROOT/tests/fuzz/json.dict" -max_total_time="$SECONDS_PER_TARGET" \
    -timeout=10 -rss_limit_mb=3072 -max_len=65536 -artifact_prefix="$BUILD/artifacts/$t-" -print_final_stats=1 2>&1 \
    | grep -E "^(stat::number_of_executed_units|stat::peak_rss_mb|#[0-9]+ +DONE)|ERROR|SUMMARY|artifact" || true
  if ls "$BUILD/artifacts/$t-"* >/dev/null 2>&1; then
    echo "fuzz: $t found a crash: $(ls "$BUILD/artifacts/$t-"*)" >&2
    # The run's own output is filtered to its statistics; the replay shows where it crashed.
    "$BUILD/fuzz_$t" -runs=0 "$BUILD/artifacts/$t-"* 2>&1 | grep -v "^INFO" | tail -40 >&2 || true
    echo "fuzz: copy it into tests/fuzz/regressions/$t/ and fix the reader" >&2
    exit 1
  fi
done
echo "fuzz: ${#TARGETS[@]} targets, ${SECONDS_PER_TARGET} s each, no crash"
