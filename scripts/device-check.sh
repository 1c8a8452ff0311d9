#!/usr/bin/env bash
# The CUDA backend's check on a machine with an NVIDIA GPU, in one run of
# at most about 8 minutes (sized for one H200 and 16 cores), with no Go
# there: the binaries are built beforehand and carried.
#
#   scripts/device-check.sh --prepare   (here, with Go and make cuda)
#       builds .device/arborist-cuda (stripped) and .device/kernels-cuda.test
#       (kernels/cuda's GPU tests); .device is ignored by git (.gitignore),
#       so name it in the device tool's carry list. Together about 45 MB.
#   scripts/device-check.sh [OUTDIR]    (there; OUTDIR defaults to $OUT, or
#       ./device-check-out)
#
# It prints, and writes to OUTDIR (summary.txt, tests.log, results.json):
#  1. kernels/cuda's GPU tests (each kernel against float64 references,
#     batch equals sequential bit for bit, memory checks);
#  2. the CUDA vs CPU max logit difference for each weight type (F32, F16,
#     BF16, Q8_0, Q4_0, Q4_K, Q5_K, Q6_K) on a small synthetic model;
#  3. greedy identity on the GPU of chain, tree and egt with autoregressive
#     decoding (run --baseline): on the shared bench pair where shared/ (or
#     ../shared) has it, else on a synthetic target self-drafted by its
#     first layers (the bench pair's 62 MB target does not fit the 64 MB a
#     device run carries beside the binaries);
#  3b. DuoDecoding's split: duo with the drafter on the CPU (--draft-device
#     cpu, half the cores) against chain with both models on the GPU and
#     plain GPU decoding, on the bench pair (or the synthetic one) and on an
#     8B-shape target with a 1B-shape drafter, with the overlap read from
#     the per-step timeline;
#  4. decode tokens/s and T_verify(W) for W = 1..512 on synthetic
#     llama-3.2-1b and llama-3.1-8b shapes, F16 and Q4_K, beside the HBM
#     roofline (weight bytes / 4.8 TB/s per token). The 8B shape runs with 8
#     of its 32 layers unless DEVICE_CHECK_FULL_8B=1 (writing and quantising
#     a full 8B model takes minutes of the budget); per-layer timing and the
#     roofline ratio do not depend on the layer count.
#
# A step that would start after the time budget (DEVICE_CHECK_BUDGET
# seconds, default 420) is skipped and reported as skipped. With
# DEVICE_CHECK_DEVICE=cpu every step runs on the CPU with the default
# binary (./arborist), to check the script itself on a machine without a
# GPU (DEVICE_CHECK_SMALL=1 shrinks the speed step to a tiny model there).
# Exit status: 0 when every check that ran passed.
set -uo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
dev=${DEVICE_CHECK_DEVICE:-cuda}

if [ "${1:-}" = "--prepare" ]; then
	set -e
	cd "$root"
	make cuda
	mkdir -p .device
	cp arborist-cuda .device/arborist-cuda
	cuda_home=${CUDA_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/arborist/cuda-11.8}
	CGO_ENABLED=1 CPATH="$cuda_home/root/usr/include" LIBRARY_PATH="$cuda_home/root/usr/lib/x86_64-linux-gnu/stubs" \
		go test -tags cuda -c -ldflags="-s -w" -o .device/kernels-cuda.test ./kernels/cuda
	du -sh .device
	exit 0
fi

out=${1:-${OUT:-$root/device-check-out}}
mkdir -p "$out"
summary=$out/summary.txt
: >"$summary"
work=${TMPDIR:-/tmp}/arborist-device-check
mkdir -p "$work"
budget=${DEVICE_CHECK_BUDGET:-420}
start=$SECONDS
failures=0
results=()

say() { echo "$*" | tee -a "$summary"; }
fail() {
	say "FAIL: $*"
	failures=$((failures + 1))
}
# in_budget NAME: whether step NAME may start.
in_budget() {
	if [ $((SECONDS - start)) -ge "$budget" ]; then
		say "skipped (time budget of ${budget}s spent): $1"
		return 1
	fi
	return 0
}

if [ "$dev" = cuda ]; then
	bin=$root/.device/arborist-cuda
	tests=$root/.device/kernels-cuda.test
else
	bin=$root/arborist
	tests=
fi
if [ ! -x "$bin" ]; then
	echo "device-check: $bin not found (run scripts/device-check.sh --prepare and carry .device)" >&2
	exit 2
fi
db=$work/arborist.db
export HOME=$work/home # arborist's config and caches stay in the work folder
mkdir -p "$HOME"

say "# Arborist device check, $(date -u '+%Y-%m-%d %H:%M UTC'), device $dev"
if command -v nvidia-smi >/dev/null 2>&1; then
	nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | sed 's/^/gpu: /' | tee -a "$summary"
fi
say "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) threads"

# ---------------------------------------------------------------- 1. tests
if [ -n "$tests" ]; then
	say ""
	say "## 1. kernel tests (kernels/cuda, GPU)"
	if [ -x "$tests" ]; then
		(cd "$root/kernels/cuda" && timeout 180 "$tests" -test.v -test.timeout 170s) >"$out/tests.log" 2>&1
		rc=$?
		grep -E '^(--- |ok|PASS|FAIL)' "$out/tests.log" | tee -a "$summary"
		[ $rc -eq 0 ] || fail "kernel tests (exit $rc; tests.log)"
	else
		fail "$tests not found"
	fi
fi

# ------------------------------------------------------ 2. logit difference
say ""
say "## 2. max |logit(cuda) - logit(cpu)| per weight type (synthetic dim 512, 2 layers, vocab 2048, 24 positions)"
ids=$(seq -s, 1 24)
shape="custom:dim=512,layers=2,heads=8,kv=4,ffn=1536,vocab=2048"
printf '%-6s %12s %12s %s\n' type max_diff max_logit argmax_agree | tee -a "$summary"
for t in F32 F16 BF16 Q8_0 Q4_0 Q4_K Q5_K Q6_K; do
	in_budget "logits $t" || break
	m=$work/logits-$t.gguf
	"$bin" synth --shape "$shape" --type "$t" --seed 3 -o "$m" --force >/dev/null 2>&1 || {
		fail "synth $t"
		continue
	}
	"$bin" logits --model "$m" --ids "$ids" --top 2048 --device cpu >"$work/cpu-$t.jsonl" 2>"$work/cpu-$t.err" || {
		fail "logits $t on cpu: $(tail -1 "$work/cpu-$t.err")"
		continue
	}
	"$bin" logits --model "$m" --ids "$ids" --top 2048 --device "$dev" >"$work/dev-$t.jsonl" 2>"$work/dev-$t.err" || {
		fail "logits $t on $dev: $(tail -1 "$work/dev-$t.err")"
		continue
	}
	line=$(python3 - "$work/cpu-$t.jsonl" "$work/dev-$t.jsonl" <<'EOF'
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])]
b = [json.loads(l) for l in open(sys.argv[2])]
assert len(a) == len(b) and a, "row counts differ"
diff = big = 0.0
agree = 0
for ra, rb in zip(a, b):
    da, db = dict(ra["top"]), dict(rb["top"])
    assert set(da) == set(db), "different ids"
    diff = max(diff, max(abs(da[k] - db[k]) for k in da))
    big = max(big, max(abs(v) for v in da.values()))
    agree += ra["top"][0][0] == rb["top"][0][0]
print(f"{diff:.3g} {big:.3g} {agree}/{len(a)}")
EOF
	) || {
		fail "comparing $t"
		continue
	}
	read -r d big agree <<<"$line"
	printf '%-6s %12s %12s %s\n' "$t" "$d" "$big" "$agree" | tee -a "$summary"
	results+=("{\"check\":\"logits\",\"type\":\"$t\",\"max_diff\":$d,\"max_logit\":$big,\"argmax_agree\":\"$agree\"}")
	# a difference above 2% of the largest logit is a wrong kernel, not rounding
	if python3 -c "import sys; sys.exit(0 if float('$d') <= 0.02 * float('$big') + 1e-3 else 1)"; then :; else
		fail "$t logits differ by $d (largest logit $big)"
	fi
	rm -f "$m"
done

# -------------------------------------------------------- 3. greedy identity
say ""
say "## 3. greedy identity with autoregressive decoding on $dev (run --baseline, 64 tokens)"
pair=()
for s in "$root/shared" "$root/../shared"; do
	if [ -f "$s/models/bench/target-60m-q8_0.gguf" ] && [ -f "$s/models/bench/draft-noisy-0.05.gguf" ]; then
		pair=(--target "$s/models/bench/target-60m-q8_0.gguf" --draft "$s/models/bench/draft-noisy-0.05.gguf")
		say "pair: the shared bench pair ($s/models/bench)"
		break
	fi
done
if [ ${#pair[@]} -eq 0 ] && in_budget "synthetic pair"; then
	if "$bin" synth --shape "custom:dim=1024,layers=8,heads=16,kv=4,ffn=2816,vocab=4096" --type Q8_0 --seed 5 -o "$work/pair-target.gguf" --force >/dev/null 2>&1; then
		pair=(--target "$work/pair-target.gguf" --draft-layers 2)
		say "pair: synthetic target (dim 1024, 8 layers, Q8_0) self-drafted by its first 2 layers (no shared bench pair here)"
	else
		fail "synth pair target"
	fi
fi
if [ ${#pair[@]} -gt 0 ]; then
	for s in chain tree egt; do
		in_budget "identity $s" || break
		extra=()
		[ "$s" = tree ] && extra=(--widths "3,2,1")
		if "$bin" run "${pair[@]}" --strategy "$s" "${extra[@]}" --prompt "Once upon a time there was a little girl" -n 64 \
			--baseline --json --no-store --db "$db" --device "$dev" >"$work/run-$s.json" 2>"$work/run-$s.err"; then
			line=$(python3 -c "
import json,sys
d=json.load(open('$work/run-$s.json'))
print(d.get('identical_to_baseline'), round(d.get('measured_speedup') or 0, 2), round(d['totals']['tokens_per_s'], 1))")
			read -r ident sp tps <<<"$line"
			say "$s: identical_to_baseline=$ident speedup=${sp}x ${tps} tokens/s"
			results+=("{\"check\":\"identity\",\"strategy\":\"$s\",\"identical\":\"$ident\",\"speedup\":$sp,\"tokens_per_s\":$tps}")
			[ "$ident" = True ] || fail "$s output differs from autoregressive decoding"
		else
			fail "run $s: $(tail -1 "$work/run-$s.err")"
		fi
	done
fi

# ------------------------------------------------------ 3b. DuoDecoding split
# duo with the drafter on the CPU (its own threads) while the target
# verifies on the device, against chain with both models on the device and
# against plain decoding on the device; the overlap comes from the per-step
# timeline (overlap_ns: drafting that ran during verification).
say ""
say "## 3b. duo with the drafter on the CPU vs chain on $dev vs plain decoding on $dev (64 tokens)"
duo_pairs=()
[ ${#pair[@]} -gt 0 ] && duo_pairs+=("the pair of step 3|${pair[*]}")
if [ "$dev" = cuda ] && in_budget "synthetic 8B/1B pair"; then
	if "$bin" synth --shape "custom:dim=4096,layers=8,heads=32,kv=8,ffn=14336,vocab=128256" --type Q4_K --seed 3 -o "$work/duo-target.gguf" --force >/dev/null 2>&1 &&
		"$bin" synth --shape llama-3.2-1b --type Q4_K --seed 4 -o "$work/duo-draft.gguf" --force >/dev/null 2>&1; then
		duo_pairs+=("8B-shape target (8 of 32 layers) with a 1B-shape drafter, Q4_K, random weights|--target $work/duo-target.gguf --draft $work/duo-draft.gguf")
	else
		fail "synth duo pair"
	fi
fi
cpu_threads=$(($(nproc) / 2))
for dp in "${duo_pairs[@]}"; do
	label=${dp%%|*}
	read -r -a args <<<"${dp#*|}"
	say "$label:"
	for cfg in "duo --gamma 12 --draft-device cpu --draft-threads $cpu_threads" "chain --gamma 4"; do
		in_budget "duo $cfg" || break 2
		name=${cfg%% *}
		read -r -a cargs <<<"${cfg#* }"
		if "$bin" run "${args[@]}" --strategy "$name" "${cargs[@]}" --prompt "Once upon a time there was a little girl" -n 64 \
			--baseline --json --no-store --db "$db" --device "$dev" >"$work/duo-$name.json" 2>"$work/duo-$name.err"; then
			line=$(python3 -c "
import json
d=json.load(open('$work/duo-$name.json')); t=d['totals']
ov, dr, ve = t.get('overlap_ns', 0), t.get('draft_ns', 0), t.get('verify_ns', 0)
print(d.get('identical_to_baseline'), round(d.get('measured_speedup') or 0, 2), round(t['tokens_per_s'], 1),
      round(100*ov/max(1, ve)), round(100*ov/max(1, ov+dr)))")
			read -r ident sp tps ovv ovd <<<"$line"
			say "  $cfg: identical_to_baseline=$ident speedup over plain $dev decoding=${sp}x ${tps} tokens/s; drafting during ${ovv}% of verification, ${ovd}% of drafting hidden"
			results+=("{\"check\":\"duo\",\"pair\":\"$label\",\"config\":\"$cfg\",\"identical\":\"$ident\",\"speedup\":$sp,\"tokens_per_s\":$tps,\"overlap_of_verify_pct\":$ovv,\"drafting_hidden_pct\":$ovd}")
			[ "$ident" = True ] || fail "$cfg output differs from autoregressive decoding"
		else
			fail "run $cfg: $(tail -1 "$work/duo-$name.err")"
		fi
	done
done
rm -f "$work/duo-target.gguf" "$work/duo-draft.gguf"

# ------------------------------------------------------------------ 4. speed
say ""
say "## 4. decode and T_verify(W) on $dev beside the HBM roofline (4.8 TB/s)"
layers8b=8
[ "${DEVICE_CHECK_FULL_8B:-0}" = 1 ] && layers8b=32
widths=1,2,4,8,16,32,64,128,256,512
specs=("llama-3.2-1b|llama-3.2-1b" "llama-3.1-8b ($layers8b of 32 layers)|custom:dim=4096,layers=$layers8b,heads=32,kv=8,ffn=14336,vocab=128256")
if [ "${DEVICE_CHECK_SMALL:-0}" = 1 ]; then # the script's own check on a CPU
	widths=1,2,4,8
	specs=("small|custom:dim=256,layers=2,heads=4,kv=2,ffn=512,vocab=512")
fi
for spec in "${specs[@]}"; do
	label=${spec%%|*}
	shape=${spec#*|}
	for t in F16 Q4_K; do
		in_budget "bench $label $t" || break 2
		m=$work/bench.gguf
		if ! "$bin" synth --shape "$shape" --type "$t" -o "$m" --force >/dev/null 2>"$work/synth.err"; then
			fail "synth $label $t: $(tail -1 "$work/synth.err")"
			continue
		fi
		left=$((budget + 60 - (SECONDS - start)))
		if ! timeout "$left" "$bin" bench --model "$m" --device "$dev" --reps 3 -n 32 --widths "$widths" --json >"$work/bench.json" 2>"$work/bench.err"; then
			fail "bench $label $t: $(tail -1 "$work/bench.err")"
			rm -f "$m"
			continue
		fi
		python3 - "$work/bench.json" "$label" "$t" >"$work/bench-one.txt" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
label, typ = sys.argv[2], sys.argv[3]
roof = 4.8e12 / d["weight_bytes"]
tps = d["decode_median_tokens_per_s"]
curve = {p["W"]: p["Median"] / 1e6 for p in d["verify_curve"]}
print(f"{label} {typ}: {d['weight_bytes'] / 2**30:.2f} GiB of weights; decode {tps:.1f} tokens/s, "
      f"roofline {roof:.1f} tokens/s ({roof / tps:.2f}x away)")
print("  T_verify(W) ms: " + "  ".join(f"{w}:{ms:.2f}" for w, ms in sorted(curve.items())))
if 1 in curve and 64 in curve:
    print(f"  T_verify(64)/T_verify(1) = {curve[64] / curve[1]:.2f}")
print("JSON " + json.dumps({"check": "bench", "model": label, "type": typ, "weight_bytes": d["weight_bytes"],
      "decode_tokens_per_s": tps, "roofline_tokens_per_s": roof, "verify_ms": curve}))
EOF
		grep -v '^JSON ' "$work/bench-one.txt" | tee -a "$summary"
		while IFS= read -r l; do results+=("${l#JSON }"); done < <(grep '^JSON ' "$work/bench-one.txt")
		rm -f "$m"
	done
done
say ""
say "elapsed: $((SECONDS - start)) s; failures: $failures"
{
	echo "["
	for i in "${!results[@]}"; do
		sep=,
		[ "$i" -eq $((${#results[@]} - 1)) ] && sep=
		echo "  ${results[$i]}$sep"
	done
	echo "]"
} >"$out/results.json"
[ "$failures" -eq 0 ]
