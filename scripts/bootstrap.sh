#!/usr/bin/env bash
# Installs whatever is missing on a Debian 12 machine (Debian packages, the project's Python
# environment with libtorch), then configures and builds. Idempotent: a second run with
# nothing changed only asks ninja, which finds nothing to do.
#
#   scripts/bootstrap.sh [BUILD_DIR] [-- ninja targets...]
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${1:-$ROOT/build}
shift || true
[ "${1:-}" = "--" ] && shift
cd "$ROOT"

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

# 1. Debian packages (the list is data: scripts/apt-packages.txt; scripts/test.sh adds
#    scripts/apt-packages-tests.txt through VIREO_APT_LISTS, daemons only its tests start).
missing=()
for list in ${VIREO_APT_LISTS:-scripts/apt-packages.txt}; do
  while read -r pkg; do
    case "$pkg" in ''|'#'*) continue ;; esac
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed'; then
      missing+=("$pkg")
    fi
  done < "$list"
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "bootstrap: installing Debian packages: ${missing[*]}"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# 2. The Python environment: libtorch for the C++ build and the pinned test references.
#    Debian's own python3 so a fresh machine needs nothing else; rebuilt when
#    requirements.txt changes.
VENV=$ROOT/.venv
stamp=$(sha256sum requirements.txt | cut -d' ' -f1)
if [ ! -x "$VENV/bin/python" ] || [ "$(cat "$VENV/.requirements.sha256" 2>/dev/null)" != "$stamp" ]; then
  echo "bootstrap: creating the Python environment in .venv (torch and test references)"
  rm -rf "$VENV"
  /usr/bin/python3 -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q --upgrade pip
  "$VENV/bin/python" -m pip install -q --no-cache-dir -r requirements.txt
  echo "$stamp" > "$VENV/.requirements.sha256"
fi

# Compiler cache hits across clones (CI builds a fresh clone in another folder).
export CCACHE_BASEDIR="$ROOT" CCACHE_NOHASHDIR=1

# 3. The private FFmpeg the media layer links (Debian 12's source, built once per version).
"$ROOT/scripts/ffmpeg.sh"

# 4. The cuDNN frontend headers the FP8 attention kernel is built with (when CUDA is).
"$ROOT/scripts/cudnn-frontend.sh"

# 5. Configure once (again if the build took the system's FFmpeg before the private one was
#    there), then build. CUDA kernels build when nvcc is found.
export PATH="$PATH:/usr/local/cuda/bin"
if [ ! -f "$BUILD/build.ninja" ]; then
  cmake -S "$ROOT" -B "$BUILD" -G Ninja -DVIREO_PYTHON="$VENV/bin/python" ${VIREO_CMAKE_ARGS:-}
elif ! grep -q '^VIREO_FFMPEG_KIND_USED:INTERNAL=private$' "$BUILD/CMakeCache.txt"; then
  cmake "$BUILD" > /dev/null
fi
ninja -C "$BUILD" "$@"
