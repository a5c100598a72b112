#!/usr/bin/env bash
# Builds the private FFmpeg that Vireo's media layer links statically: Debian 12's FFmpeg 5.1
# source (fetched with apt and checked against the archive's signed index), configured with only
# what Vireo reads and writes, installed into PREFIX (default .cache/ffmpeg).
#
#   scripts/ffmpeg.sh [PREFIX]
#
# Why private: the distributions ship FFmpeg under different sonames (Debian 12 libavcodec.so.59,
# Ubuntu 24.04 .60, Fedora 41 .61), so programs linked against one distribution's FFmpeg run on
# no other. Linked statically with its symbols kept local, this copy also never meets the
# distribution's FFmpeg that Qt Multimedia loads for playback in the same process.
# Idempotent: a second run with the same source and configuration does nothing.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PREFIX=${1:-$ROOT/.cache/ffmpeg}
WORK=$ROOT/.cache/ffmpeg-build
JOBS=${VIREO_FFMPEG_JOBS:-$(nproc)}

# What Vireo uses, and nothing else: H.264 (libx264) + AAC in MP4 out (and x264's lossless RGB
# for the conditioning frames kept beside an output); stills and conditioning
# clips in (the common camera and web formats); the user's audio in (WAV, AIFF, FLAC, MP3,
# AAC/M4A, Ogg Vorbis and Opus, a video's soundtrack; libswresample only because FFmpeg's Opus
# decoder needs it). A format missing here is an error naming the file and the codec, never a
# silent substitute.
CONFIG=(
  --disable-shared --enable-static --enable-pic
  --disable-programs --disable-doc --disable-debug
  --disable-avdevice --disable-avfilter --disable-postproc
  --disable-network --disable-autodetect --disable-everything
  --enable-gpl --enable-libx264 --enable-zlib
  --enable-encoder=libx264,libx264rgb,aac
  --enable-decoder=h264,hevc,vp8,vp9,mpeg4,mpeg2video,mpeg1video,mjpeg,prores,png,apng,bmp,webp,gif,tiff
  --enable-decoder=aac,mp3float,mp3,flac,alac,vorbis,opus,pcm_u8,pcm_s16le,pcm_s16be,pcm_s24le,pcm_s24be,pcm_s32le,pcm_f32le,pcm_f64le
  --enable-parser=h264,hevc,vp8,vp9,mpeg4video,mpegvideo,mjpeg,png,bmp,webp,gif,aac,flac,mpegaudio,vorbis,opus
  --enable-demuxer=mov,matroska,avi,mpegts,gif,apng,image_png_pipe,image_jpeg_pipe,image_webp_pipe,image_bmp_pipe,image_tiff_pipe
  --enable-demuxer=wav,w64,aiff,flac,mp3,aac,ogg
  --enable-muxer=mp4
  --enable-protocol=file
)

# The source: whatever Debian 12 currently ships (security fixes included), verified by apt.
APT=(-o Dir::State::Lists="$WORK/apt/lists" -o Dir::Cache="$WORK/apt/cache"
     -o Dir::Etc::SourceList="$WORK/apt/sources.list" -o Dir::Etc::SourceParts=/nonexistent
     -o Debug::NoLocking=1 -o APT::Sandbox::User="$(id -un)")
mkdir -p "$WORK/apt/lists/partial" "$WORK/apt/cache/archives/partial" "$WORK/src"
cat > "$WORK/apt/sources.list" <<'EOF'
deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bookworm main
deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian-security bookworm-security main
EOF
orig=$(ls "$WORK"/src/ffmpeg_*.orig.tar.xz 2>/dev/null | sort -V | tail -n1 || true)
if [ -z "$orig" ] || [ -n "${VIREO_FFMPEG_REFRESH:-}" ]; then
  apt-get "${APT[@]}" -qq update
  (cd "$WORK/src" && apt-get "${APT[@]}" -qq source --download-only ffmpeg)
  orig=$(ls "$WORK"/src/ffmpeg_*.orig.tar.xz | sort -V | tail -n1)
fi
version=$(basename "$orig" | sed -E 's/^ffmpeg_(.*)\.orig\.tar\.xz$/\1/')
case "$version" in 5.1.*) ;; *) echo "ffmpeg.sh: expected FFmpeg 5.1.x source, got $version" >&2; exit 1 ;; esac

stamp="$version $(printf '%s\n' "${CONFIG[@]}" | sha256sum | cut -c1-16) $(gcc -dumpfullversion)"
if [ "$(cat "$PREFIX/.vireo-ffmpeg" 2>/dev/null)" = "$stamp" ]; then
  exit 0
fi
echo "ffmpeg.sh: building FFmpeg $version (private, static) into $PREFIX"
src=$WORK/ffmpeg-$version
rm -rf "$src"
tar -xJf "$orig" -C "$WORK"
cc=gcc
command -v ccache >/dev/null && cc="ccache gcc"
# configure's scratch files stay in the work folder even when a run is interrupted.
mkdir -p "$WORK/tmp"
(
  cd "$src"
  TMPDIR="$WORK/tmp" ./configure --prefix="$PREFIX" --cc="$cc" "${CONFIG[@]}" > "$WORK/configure.log" 2>&1 \
    || { tail -n 30 "$WORK/configure.log" >&2; exit 1; }
  make -s -j"$JOBS" > "$WORK/make.log" 2>&1 || { tail -n 40 "$WORK/make.log" >&2; exit 1; }
  rm -rf "$PREFIX"
  make -s install > /dev/null
)
cp "$src/COPYING.GPLv2" "$PREFIX/COPYING.GPLv2"
echo "$stamp" > "$PREFIX/.vireo-ffmpeg"
rm -rf "$src"
