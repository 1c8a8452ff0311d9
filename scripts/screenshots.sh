#!/usr/bin/env bash
# Starts the real Arborist window under Xvfb and saves a PNG of every screen
# into the folder given (default ./screenshots), for review.
#   scripts/screenshots.sh [OUT_DIR] [WIDTHxHEIGHT]
# The window is WIDTHxHEIGHT (default: the remembered or default size);
# FYNE_THEME=light or dark chooses the theme.
# Needs xvfb (apt-get install xvfb); builds ./arborist first.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-screenshots}"
size="${2:-}"
command -v Xvfb >/dev/null || { echo "Xvfb missing: apt-get install xvfb" >&2; exit 1; }
make -s build >/dev/null
mkdir -p "$out"
display=":$((RANDOM % 400 + 100))"
Xvfb "$display" -screen 0 2000x1200x24 >/dev/null 2>&1 &
xpid=$!
trap 'kill $xpid 2>/dev/null || true' EXIT
sleep 1
DISPLAY="$display" LIBGL_ALWAYS_SOFTWARE=1 ARBORIST_SCREENSHOTS="$out" ARBORIST_SCREENSHOT_SIZE="$size" timeout 120 ./arborist
ls -1 "$out"/*.png
