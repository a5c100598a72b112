#!/usr/bin/env bash
# Installs what is missing, builds, and launches the studio window.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$ROOT/scripts/bootstrap.sh" "$ROOT/build" -- vireo
exec "$ROOT/build/app/vireo" "$@"
