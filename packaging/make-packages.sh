#!/usr/bin/env bash
# Builds the installer packages from a configured and built folder (`ninja` done) into
# BUILD_DIR/packages (or --out DIR): the application and the runtime (libtorch + NVIDIA
# libraries), each as .deb, .rpm and .tar.gz.
#
#   packaging/make-packages.sh [BUILD_DIR] [--fast] [--generators "DEB;RPM;TGZ"] [--out DIR]
#
# --fast compresses quickly (the packaging test); without it the .deb is xz and the .rpm
# zstd-19, which takes minutes for the 3 GB runtime but saves download size.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=$ROOT/build
GENERATORS="DEB;RPM;TGZ"
OUT=
export VIREO_PACKAGE_COMPRESSION=release
while [ $# -gt 0 ]; do
  case "$1" in
    --fast) VIREO_PACKAGE_COMPRESSION=fast ;;
    --generators) GENERATORS=$2; shift ;;
    --out) OUT=$2; shift ;;
    -*) echo "make-packages: unknown option $1" >&2; exit 2 ;;
    *) BUILD=$(cd "$1" && pwd) ;;
  esac
  shift
done
[ -f "$BUILD/CPackRuntimeConfig.cmake" ] || { echo "make-packages: $BUILD is not a configured build with the GUI" >&2; exit 2; }
# Programs linked against this distribution's FFmpeg would run on this distribution only.
if ! grep -q '^VIREO_FFMPEG_KIND_USED:INTERNAL=private$' "$BUILD/CMakeCache.txt"; then
  echo "make-packages: $BUILD links the system's FFmpeg; packages need the private one (scripts/ffmpeg.sh, then configure again)" >&2
  exit 2
fi
OUT=${OUT:-$BUILD/packages}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)

# cpack builds nothing with Ninja: build first. Each cpack gets its own folder, because
# CPack clears its staging tree on start, and each runtime generator runs in its own cpack so
# that gzip, which has one thread, overlaps with the others.
IFS=';' read -r -a gens <<< "$GENERATORS"
jobs=(app)
for g in "${gens[@]}"; do jobs+=("runtime-$g"); done
pids=()
for job in "${jobs[@]}"; do
  rm -rf "${OUT:?}/.$job"
  if [ "$job" = app ]; then
    args=(--config "$BUILD/CPackConfig.cmake" -G "$GENERATORS")
  else
    args=(--config "$BUILD/CPackRuntimeConfig.cmake" -G "${job#runtime-}")
  fi
  cpack "${args[@]}" -B "$OUT/.$job" > "$OUT/.$job.log" 2>&1 &
  pids+=($!)
done
status=0
for i in "${!jobs[@]}"; do
  if wait "${pids[$i]}"; then
    find "$OUT/.${jobs[$i]}" -maxdepth 1 -type f -exec mv -f {} "$OUT/" \;
  else
    status=1
    cat "$OUT/.${jobs[$i]}.log" >&2
  fi
  # The staging trees hold an uncompressed copy of everything.
  rm -rf "${OUT:?}/.${jobs[$i]}" "$OUT/.${jobs[$i]}.log"
done
[ $status -eq 0 ] || { echo "make-packages: cpack failed" >&2; exit 1; }
ls -l "$OUT"
