#!/usr/bin/env bash
# Screenshots of the studio window under Xvfb (a real X server, so fonts, the Fusion style
# and the theme render as on a desktop) against the local test Hub, mid-download:
# docs/screenshots/{model-picker,download-panel,settings}.png; and of the Generate page on the
# tiny LTX-2.3 checkpoint mid-run, done and with LoRAs: docs/screenshots/generate-{running,done,loras}.png; and of
# the Gallery over real clips: docs/screenshots/gallery-{grid,detail}.png; and every page at
# the smallest and largest sizes the layout test checks: docs/screenshots/PAGE-{1024x700,2560x1440}.png.
#   tests/ui/take_screenshots.sh [BUILD_DIR] [OUT_DIR]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD="${1:-$ROOT/build}"
OUT="${2:-$ROOT/docs/screenshots}"
command -v xvfb-run >/dev/null || { echo "xvfb-run is missing: apt-get install xvfb (scripts/apt-packages.txt lists it)" >&2; exit 1; }
cmake --build "$BUILD" --target test_downloadsgui test_generategui test_gallerygui test_mainwindow
mkdir -p "$OUT"
VIREO_SOURCE_DIR="$ROOT" VIREO_PYTHON="$ROOT/.venv/bin/python" VIREO_SCREENSHOT_DIR="$OUT" QT_QPA_PLATFORM=xcb \
  no_proxy=127.0.0.1,localhost NO_PROXY=127.0.0.1,localhost \
  xvfb-run -a -s "-screen 0 1600x1000x24" "$BUILD/tests/ui/test_downloadsgui" screenshots
VIREO_SOURCE_DIR="$ROOT" VIREO_FIXTURES_ROOT="$BUILD/tests/fixtures" VIREO_SCREENSHOT_DIR="$OUT" QT_QPA_PLATFORM=xcb \
  QT_MEDIA_BACKEND=ffmpeg xvfb-run -a -s "-screen 0 1600x1000x24" "$BUILD/tests/ui/test_generategui" \
  generatesAVideoFromThePage cancelStopsTheRunAndTheQueueShowsIt lorasAreCheckedAppliedAndRestored
VIREO_SOURCE_DIR="$ROOT" VIREO_FIXTURES_ROOT="$BUILD/tests/fixtures" VIREO_SCREENSHOT_DIR="$OUT" QT_QPA_PLATFORM=xcb \
  QT_MEDIA_BACKEND=ffmpeg xvfb-run -a -s "-screen 0 1600x1000x24" "$BUILD/tests/ui/test_gallerygui" \
  gridAdoptsFiltersAndSorts detailPlaysStepsAndGeneratesAgain
VIREO_SOURCE_DIR="$ROOT" VIREO_FIXTURES_ROOT="$BUILD/tests/fixtures" VIREO_SCREENSHOT_DIR="$OUT" QT_QPA_PLATFORM=xcb \
  xvfb-run -a -s "-screen 0 2600x1500x24" "$BUILD/tests/ui/test_mainwindow" everyPageFitsAtEverySize
ls -l "$OUT"
