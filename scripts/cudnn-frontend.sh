#!/usr/bin/env bash
# NVIDIA's cuDNN frontend (header-only C++, MIT licence), which the FP8 attention kernel builds
# its cuDNN graph with (kernels/fp8attention.cpp), installed into PREFIX (default
# .cache/cudnn-frontend): the pinned wheel from PyPI without its Python dependencies, checked
# against the hash below, of which only include/ and the licence texts are kept.
#
#   scripts/cudnn-frontend.sh [PREFIX]
#
# Idempotent: a second run with the same version does nothing. The kernel runs with the
# libcudnn.so.9 that torch itself loads (its wheel pins cuDNN 9.19).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PREFIX=${1:-$ROOT/.cache/cudnn-frontend}
VERSION=1.32.0
WHEEL=nvidia_cudnn_frontend-$VERSION-cp311-cp311-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl
SHA256=c6006556017a4d1c914c52a556c71b1267f2d6a0500f742e7b4edef539878df0
PYTHON=${VIREO_PYTHON:-$ROOT/.venv/bin/python}

if [ -f "$PREFIX/include/cudnn_frontend.h" ] && [ "$(cat "$PREFIX/.version" 2>/dev/null)" = "$VERSION" ]; then
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "cudnn-frontend: fetching $VERSION (headers only)"
"$PYTHON" -m pip download -q --no-deps --only-binary=:all: --python-version 3.11 --implementation cp \
  --platform manylinux_2_28_x86_64 -d "$tmp" "nvidia-cudnn-frontend==$VERSION"
echo "$SHA256  $tmp/$WHEEL" | sha256sum -c --quiet
"$PYTHON" -m zipfile -e "$tmp/$WHEEL" "$tmp/wheel"
rm -rf "$PREFIX"
mkdir -p "$PREFIX"
cp -a "$tmp/wheel/include" "$PREFIX/include"
cp -a "$tmp/wheel/nvidia_cudnn_frontend-$VERSION.dist-info/licenses" "$PREFIX/licenses"
echo "$VERSION" > "$PREFIX/.version"
