#!/bin/sh
# bench-types.sh [DIR]: the CPU backend's figures for the weight types users
# run most, on models of the bench target's shape: the shared
# Q8_0 bench target itself, and synthetic Q4_0, F32, Q4_K and Q6_K models
# written to DIR (default: a temporary folder, removed afterwards). With
# OLD=path/to/another/arborist, each model is also measured with that binary,
# interleaved, so the two can be compared within one run. ROUNDS (default 2)
# repeats the whole loop; WIDTHS (default 1,2,4,8,16,32,64) and REPS (3) are
# passed to `arborist bench`.
set -eu
cd "$(dirname "$0")/.."
go build -o arborist .
dir=${1:-}
if [ -z "$dir" ]; then
	dir=$(mktemp -d)
	trap 'rm -rf "$dir"' EXIT
fi
shape=dim=512,layers=20,heads=64,kv=32,vocab=512
for t in Q4_0 F32; do
	[ -f "$dir/b-$t.gguf" ] || ./arborist synth --shape custom:$shape,ffn=1376 --type $t -o "$dir/b-$t.gguf"
done
for t in Q4_K Q6_K; do # K-quant rows are multiples of 256
	[ -f "$dir/b-$t.gguf" ] || ./arborist synth --shape custom:$shape,ffn=1536 --type $t -o "$dir/b-$t.gguf"
done
target=../shared/models/bench/target-60m-q8_0.gguf
round=1
while [ "$round" -le "${ROUNDS:-2}" ]; do
	for t in Q8_0 Q4_0 F32 Q4_K Q6_K; do
		f="$dir/b-$t.gguf"
		[ "$t" = Q8_0 ] && f=$target
		for bin in ${OLD:-} ./arborist; do
			echo "=== round $round, $t, $bin"
			"$bin" bench --model "$f" --reps "${REPS:-3}" --widths "${WIDTHS:-1,2,4,8,16,32,64}"
		done
	done
	round=$((round + 1))
done
