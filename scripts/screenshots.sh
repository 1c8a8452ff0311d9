#!/usr/bin/env bash
# Starts the real Arborist window under Xvfb, works through the workflow the
# way a user would (load the pair, profile, calibrate, tune, run plain
# decoding and the tuned plan against it, compare, export) and saves a PNG of
# every screen, for each pair, window size and theme:
#   scripts/screenshots.sh [OUT_DIR] [SIZES] [THEMES] [PAIRS]
# OUT_DIR defaults to ./screenshots; SIZES to "1024x640 1366x768 1920x1080";
# THEMES to "light dark"; PAIRS to "demo bench". The pairs are the built-in demo pair
# (./arborist demo) and, when ../shared/models/bench holds it, the bench
# pair. Pictures land in OUT_DIR/PAIR/SIZE-THEME/; each run's figures
# (tokens/s, measured speedup over plain decoding) in OUT_DIR/PAIR/SIZE-THEME.log.
# Each pair gets a fresh configuration folder (preferences and database),
# shared by its sizes and themes, so the user's own are never touched and
# calibration happens once per pair. Needs xvfb (make screenshots installs it).
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-screenshots}"
sizes="${2:-1024x640 1366x768 1920x1080}"
themes="${3:-light dark}"
want="${4:-demo bench}"
command -v Xvfb >/dev/null || { echo "Xvfb missing: apt-get install xvfb (make screenshots installs it)" >&2; exit 1; }
make -s build >/dev/null
mkdir -p "$out"
out="$(cd "$out" && pwd)"
work="$(mktemp -d)"
display=":$((RANDOM % 400 + 100))"
Xvfb "$display" -screen 0 2000x1200x24 >/dev/null 2>&1 &
xpid=$!
trap 'kill $xpid 2>/dev/null || true; rm -rf "$work"' EXIT
sleep 1

./arborist demo -o "$work/demo" >"$work/demo.txt"
pairs=""
[[ " $want " == *" demo "* ]] && pairs="demo"
declare -A target draft
target[demo]="$(sed -n 's/^target: //p' "$work/demo.txt")"
draft[demo]="$(sed -n 's/^draft: //p' "$work/demo.txt")"
bench=../shared/models/bench
if [[ " $want " == *" bench "* ]] && [ -f "$bench/target-60m-q8_0.gguf" ] && [ -f "$bench/draft-noisy-0.05.gguf" ]; then
	pairs="$pairs bench"
	target[bench]="$(cd "$bench" && pwd)/target-60m-q8_0.gguf"
	draft[bench]="$(cd "$bench" && pwd)/draft-noisy-0.05.gguf"
fi

for pair in $pairs; do
	mkdir -p "$work/config-$pair"
	for size in $sizes; do
		for theme in $themes; do
			dir="$out/$pair/$size-$theme"
			mkdir -p "$dir"
			echo "== $pair $size $theme"
			XDG_CONFIG_HOME="$work/config-$pair" FYNE_THEME="$theme" DISPLAY="$display" LIBGL_ALWAYS_SOFTWARE=1 \
				ARBORIST_SCREENSHOTS="$dir" ARBORIST_SCREENSHOT_SIZE="$size" \
				ARBORIST_SCREENSHOT_TARGET="${target[$pair]}" ARBORIST_SCREENSHOT_DRAFT="${draft[$pair]}" \
				timeout 900 ./arborist >"$dir.log" 2>&1 || { echo "failed, see $dir.log" >&2; tail -5 "$dir.log" >&2; exit 1; }
			grep '^run:' "$dir.log" || true
		done
	done
done
ls -1 "$out"/*/*/*.png | head -100

# Small copies for the README (assets/screenshots holds the committed ones):
# a few screens at 1366x768, 800 pixels wide, in a 64-colour palette.
im=""
for c in magick convert /usr/bin/convert; do
	if "$c" -version 2>/dev/null | grep -q ImageMagick; then im="$c"; break; fi
done
if [ -z "$im" ]; then
	echo "no ImageMagick: no small copies for the README (make screenshots installs it)" >&2
	exit 0
fi
mkdir -p "$out/readme"
for shot in demo/1366x768-dark/3-speedup-model demo/1366x768-light/4-run \
	bench/1366x768-light/5-compare bench/1366x768-dark/2-profile; do
	[ -f "$out/$shot.png" ] || continue
	"$im" "$out/$shot.png" -resize 800x -colors 64 "PNG8:$out/readme/$(echo "$shot" | tr / -).png"
done
ls -l "$out/readme"
