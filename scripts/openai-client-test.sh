#!/usr/bin/env bash
# Checks `arborist serve` with the official openai client from npm
# (testdata/openai-client: the package pinned in package.json and
# package-lock.json, installed there with `npm ci` when missing or out of
# date). Serves the bench pair (../shared/models/bench) when it is there,
# else the demo pair the binary builds, with the plan shape tune chose for
# the bench pair: an EGT of width 1 and depth 6 with a 0.2 threshold.
#
# usage: scripts/openai-client-test.sh [ARBORIST_BINARY]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$(realpath "${1:-$root/arborist}")
dir=$root/testdata/openai-client
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
	bash "$root/scripts/install-deps.sh" nodejs npm
fi
major=$(node -p 'process.versions.node.split(".")[0]')
if [ "$major" -lt 20 ]; then
	echo "openai client test: Node.js $(node --version) is older than 20, which this test's openai client is checked on" >&2
	exit 1
fi
if [ ! -f "$dir/node_modules/openai/package.json" ] || [ "$dir/package-lock.json" -nt "$dir/node_modules/.package-lock.json" ]; then
	(cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
shared=${ARBORIST_SHARED:-$root/../shared}
bench=$shared/models/bench
if [ -f "$bench/target-60m-q8_0.gguf" ] && [ -f "$bench/draft-noisy-0.05.gguf" ]; then
	target=$bench/target-60m-q8_0.gguf
	draft=$bench/draft-noisy-0.05.gguf
	echo "openai client test: the bench pair ($bench)"
else
	"$bin" demo -o "$work/demo" >"$work/demo.txt" 2>/dev/null
	target=$(sed -n 's/^target: //p' "$work/demo.txt")
	draft=$(sed -n 's/^draft: //p' "$work/demo.txt")
	echo "openai client test: the demo pair ($bench is absent)"
fi
cat >"$work/config.yaml" <<YAML
arborist_version: 0.1.0
models:
  target: {path: "$target", device: cpu, max_seq_len: 512, threads: 2}
  draft: {kind: model, path: "$draft", device: cpu, threads: 2}
speculation: {strategy: egt, egt_widths: [1, 1, 1, 1, 1, 1], branch: 1, w_max: 6, depth_policy: threshold, depth_min: 0.2}
sampling: {temperature: 0, top_k: 0, top_p: 1, min_p: 0, seed: 1}
YAML
node "$dir/test.mjs" "$bin" "$work/config.yaml" "$dir/chat_template.jinja" "$work"
