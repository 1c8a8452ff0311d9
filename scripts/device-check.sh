#!/usr/bin/env bash
# The CUDA backend's check on a machine with an NVIDIA GPU, in one run of
# at most about 8 minutes (sized for one H200 and 16 cores), with no Go
# there: the binaries are built beforehand and carried.
#
#   scripts/device-check.sh --prepare   (here, with Go and make cuda)
#       builds .device/arborist-cuda (stripped), the GPU test binaries of
#       kernels/cuda, engine/model and profiles, the GUI's
#       libraries (for a machine without them) and a tar of the ../shared
#       models the checks read (conformance kit, stories260K, bench pair;
#       DEVICE_CHECK_NO_BENCH=1 leaves the pair out, and
#       DEVICE_CHECK_NO_CONFORMANCE=1 the kit: both do not fit the carry's
#       64 MiB beside the binaries), all xz-compressed;
#       .device is ignored by git (.gitignore), so name it in the device
#       tool's carry list. Together about 55 MB; the run unpacks it.
#   scripts/device-check.sh [OUTDIR]    (there; OUTDIR defaults to $OUT, or
#       ./device-check-out)
#
# It prints, and writes to OUTDIR (summary.txt, one log per test binary,
# results.json, and work.tar.gz with every step's output and errors):
#  1. the GPU tests of kernels/cuda (each kernel against float64
#     references, batch equals sequential bit for bit, memory checks),
#     engine/model (the model-level suite: whole passes, masks, F16
#     caches, the conformance kit, greedy identity of every strategy) and
#     profiles (logits against the CPU, identity end to end);
#  2. the CUDA vs CPU max logit difference for each weight type (F32, F16,
#     BF16, Q8_0, Q4_0, Q4_K, Q5_K, Q6_K) on a small synthetic model;
#  3. greedy identity on the GPU of chain, tree and egt with autoregressive
#     decoding (run --baseline): on the shared bench pair where shared/ (or
#     ../shared) has it, else on a synthetic target self-drafted by its
#     first layers (--prepare packs the pair unless told not to);
#  3b. DuoDecoding's split: duo and egt --aot with the drafter on the CPU
#     (--draft-device cpu, half the cores) against chain with both models
#     on the GPU and plain GPU decoding, on the bench pair (or the
#     synthetic one) and on an 8B-shape target with a 1B-shape drafter,
#     with the overlap read from the per-step timeline;
#  4. decode tokens/s and T_verify(W) for W = 1..512 on synthetic
#     llama-3.2-1b (F16, Q4_K) and llama-3.1-8b shapes (F16 with 8 of its
#     32 layers unless DEVICE_CHECK_FULL_8B=1; Q4_K whole) beside the HBM
#     roofline (weight bytes / 4.8 TB/s per token);
#  5. the 8B/1B latency model: tune ranks plans with the whole 8B-shape
#     target on the GPU and the 1B-shape drafter on the CPU, every latency
#     measured there and the acceptance assumed (DEVICE_CHECK_ALPHAS,
#     default 0.75 and 0.6; the weights are random), so the predicted
#     speedup of duo over plain GPU decoding is that model's verdict.
# The synthetic models are written in the background while the tests run.
#
#   scripts/device-check.sh --fast [OUTDIR]
#       the fast path's check (docs/CUDA.md, "The fast path"), in at most
#       about 5 minutes: f1. GPU tests: kernels/cuda on the verified path
#       (whose TestFast* hold the fast path's logits to the verified
#       path's and its tree rows to their paths decoded alone, bit for
#       bit) and the model-level suite with ARBORIST_CUDA_PATH=fast;
#       f4. decode tokens/s and T_verify(W) for W = 1..64 on synthetic
#       llama-3.2-1b F16 and Q4_K and llama-3.1-8b Q4_K, on each path,
#       beside the fast path's targets (8B Q4_K decode >= 250 tokens/s,
#       1B F16 >= 1300, T_verify(64)/T_verify(1) <= 1.5 on 8B Q4_K);
#       f5. kernels/cuda's device tests with ARBORIST_CUDA_PATH=fast and
#       the model-level suite on the verified path (after f4, so that the
#       speed step runs within the budget whatever the tests take).
#       Prepare with DEVICE_CHECK_NO_BENCH=1 scripts/device-check.sh
#       --prepare (the bench pair is not read, and the carry stays under
#       64 MiB).
#
# Without a GPU (no /dev/nvidia0 or no libcuda.so.1) the run says so and
# stops (exit 3) before anything starts. DEVICE_CHECK_STANDIN=1 runs it
# there on the stand-in driver (kernels/cuda/standin/build, make
# cuda-check), whose launches are counted, not run: a dry run of the
# script, its timings the host path's alone (with DEVICE_CHECK_SMALL=1
# for small models).
#
# A step that would start after the time budget (DEVICE_CHECK_BUDGET
# seconds, default 420; 270 with --fast) is skipped and reported as
# skipped. With
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
	rm -rf .device
	mkdir -p .device/lib
	cuda_home=${CUDA_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/arborist/cuda-11.8}
	export CGO_ENABLED=1 CPATH="$cuda_home/root/usr/include" LIBRARY_PATH="$cuda_home/root/usr/lib/x86_64-linux-gnu/stubs"
	go test -tags cuda -c -ldflags="-s -w" -o .device/kernels-cuda.test ./kernels/cuda
	go test -tags cuda -c -ldflags="-s -w" -o .device/model-cuda.test ./engine/model
	go test -tags cuda -c -ldflags="-s -w" -o .device/workbench-cuda.test ./profiles
	cp arborist-cuda .device/arborist-cuda
	# the GUI's libraries (libGL, libX11 and theirs), for a GPU machine
	# without them: the CLI never calls them, but the loader wants them
	ldd .device/arborist-cuda | awk '$3 ~ /^\// && $1 !~ /^(libc|libm|libcuda)\.so/ {print $3}' |
		xargs -r cp -L -t .device/lib
	# the models the checks read, from ../shared (the device run carries
	# what is under the checkout only)
	shared=$root/../shared
	if [ -d "$shared/conformance" ]; then
		tar -C "$shared" -cf .device/shared.tar models/stories260K.gguf prompts \
			$( [ -z "${DEVICE_CHECK_NO_CONFORMANCE:-}" ] && echo conformance) \
			$( [ -f "$shared/models/bench/target-60m-q8_0.gguf" ] && [ -z "${DEVICE_CHECK_NO_BENCH:-}" ] && echo models/bench)
	fi
	# compressed: the carry is at most 64 MiB
	xz -T0 -6 .device/*.test .device/arborist-cuda .device/shared.tar 2>/dev/null || xz -T0 -6 .device/*.test .device/arborist-cuda
	du -sh .device
	exit 0
fi

fast=0
if [ "${1:-}" = "--fast" ]; then
	fast=1
	shift
fi

# no_gpu says why this machine has no usable NVIDIA GPU, or fails (it has one)
no_gpu() {
	if ! compgen -G '/dev/nvidia[0-9]*' >/dev/null; then
		echo "no GPU device node (/dev/nvidia0 ...)"
		return 0
	fi
	if ! ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1' &&
		! compgen -G '/usr/lib*/libcuda.so.1' >/dev/null && ! compgen -G '/usr/lib*/*/libcuda.so.1' >/dev/null &&
		! compgen -G '/usr/local/nvidia/lib*/libcuda.so.1' >/dev/null; then
		echo "no NVIDIA driver (libcuda.so.1 not found)"
		return 0
	fi
	return 1
}
standin=
if [ "$dev" = cuda ]; then
	if [ -n "${DEVICE_CHECK_STANDIN:-}" ]; then
		standin=$root/kernels/cuda/standin/build
		if [ ! -e "$standin/libcuda.so.1" ]; then
			echo "device-check: DEVICE_CHECK_STANDIN=1 needs the stand-in driver ($standin/libcuda.so.1: make cuda-check)" >&2
			exit 2
		fi
		export LD_LIBRARY_PATH=$standin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
	elif why=$(no_gpu); then
		msg="device-check: no GPU here: $why; nothing was run (DEVICE_CHECK_STANDIN=1 runs the script on the stand-in driver)"
		echo "$msg" >&2
		o=${1:-${OUT:-$root/device-check-out}}
		mkdir -p "$o" && echo "$msg" >"$o/summary.txt"
		exit 3
	fi

# a carried .device from --prepare is compressed: unpack it once
if compgen -G "$root/.device/*.xz" >/dev/null; then
	for f in "$root"/.device/*.xz; do
		python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" "$f" "${f%.xz}" && rm -f "$f"
	done
	chmod +x "$root"/.device/*.test "$root"/.device/arborist-cuda 2>/dev/null
	if [ -f "$root/.device/shared.tar" ]; then
		mkdir -p "$root/.device/shared" && tar -C "$root/.device/shared" -xf "$root/.device/shared.tar" && rm -f "$root/.device/shared.tar"
	fi
fi
# ../shared beside the checkout is where the tests look for the models
if [ -d "$root/.device/shared" ] && [ ! -e "$root/../shared" ]; then
	ln -s "$root/.device/shared" "$root/../shared"
fi
# the GUI's libraries, where the machine lacks them
if [ -d "$root/.device/lib" ] && [ -x "$root/.device/arborist-cuda" ] &&
	ldd "$root/.device/arborist-cuda" | grep 'not found' | grep -qv libcuda; then
	export LD_LIBRARY_PATH=$root/.device/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi

out=${1:-${OUT:-$root/device-check-out}}
mkdir -p "$out"
summary=$out/summary.txt
: >"$summary"
work=${TMPDIR:-/tmp}/arborist-device-check
mkdir -p "$work"
budget=${DEVICE_CHECK_BUDGET:-420}
[ "$fast" = 1 ] && budget=${DEVICE_CHECK_BUDGET:-270}
start=$SECONDS
failures=0
results=()

say() { echo "$*" | tee -a "$summary"; }
# bounded CMD...: CMD, killed after DEVICE_CHECK_T_STEP seconds (120), so
# that a hang on the device costs one step, not the run
bounded() { timeout "${DEVICE_CHECK_T_STEP:-120}" "$@"; }
# spec_run NAME ARGS...: a bounded `arborist run ARGS` of 64 tokens against
# autoregressive decoding (--baseline --json) into $work/NAME.json; sets
# ident, sp and tps (identical to the baseline, measured speedup, tokens/s)
# and ovv and ovd (drafting during verification, drafting hidden, in %);
# on failure returns 1 with the run's last error line in spec_err.
spec_run() {
	local name=$1
	shift
	if ! bounded "$bin" run "$@" --prompt "Once upon a time there was a little girl" -n 64 \
		--baseline --json --no-store --db "$db" >"$work/$name.json" 2>"$work/$name.err"; then
		spec_err=$(tail -1 "$work/$name.err")
		return 1
	fi
	read -r ident sp tps ovv ovd < <(python3 -c '
import json, sys
d = json.load(open(sys.argv[1])); t = d["totals"]
ov, dr, ve = t.get("overlap_ns", 0), t.get("draft_ns", 0), t.get("verify_ns", 0)
print(d.get("identical_to_baseline"), round(d.get("measured_speedup") or 0, 2), round(t["tokens_per_s"], 1),
      round(100*ov/max(1, ve)), round(100*ov/max(1, ov+dr)))' "$work/$name.json")
}
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
fi
db=$work/arborist.db
export HOME=$work/home # arborist's config and caches stay in the work folder
mkdir -p "$HOME"

say "# Arborist device check$([ "$fast" = 1 ] && echo ' (the fast path)'), $(date -u '+%Y-%m-%d %H:%M UTC'), device $dev"
[ -n "$standin" ] && say "STAND-IN DRIVER ($standin): no GPU; kernels are counted, not run, so every GPU test that checks results skips and every timing is the host path's alone"
if command -v nvidia-smi >/dev/null 2>&1; then
	nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | sed 's/^/gpu: /' | tee -a "$summary"
fi
say "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) threads, flags: $(grep -m1 '^flags' /proc/cpuinfo | grep -oE 'avx512f|avx512_vnni|amx_tile|avx2|fma' | sort -u | tr '\n' ' ')"

# The models of steps 3b, 4 and 5 are written in the background while the
# tests run (writing is CPU work, one core each; the GPU tests leave the
# other cores idle). model NAME waits for one and prints its path.
mkdir -p "$work/models"
layers8b=8
[ "${DEVICE_CHECK_FULL_8B:-0}" = 1 ] && layers8b=32
shape8b="custom:dim=4096,layers=$layers8b,heads=32,kv=8,ffn=14336,vocab=128256"
models=("1b-F16|llama-3.2-1b|F16|4" "1b-Q4_K|llama-3.2-1b|Q4_K|4" "8b-F16|$shape8b|F16|3"
	"8b-Q4_K|$shape8b|Q4_K|3" "8b32-Q4_K|llama-3.1-8b|Q4_K|3"
	"68m-Q4_K|custom:dim=768,layers=2,heads=12,kv=12,ffn=3072,vocab=128256|Q4_K|5")
if [ "${DEVICE_CHECK_SMALL:-0}" = 1 ]; then # the script's own check on a CPU
	small="custom:dim=256,layers=1,heads=4,kv=2,ffn=512,vocab=512"
	models=("1b-F16|$small|F16|4" "1b-Q4_K|$small|Q4_K|4"
		"8b-F16|custom:dim=256,layers=2,heads=4,kv=2,ffn=512,vocab=512|F16|3"
		"8b-Q4_K|custom:dim=256,layers=2,heads=4,kv=2,ffn=512,vocab=512|Q4_K|3"
		"8b32-Q4_K|custom:dim=256,layers=4,heads=4,kv=2,ffn=512,vocab=512|Q4_K|3"
		"68m-Q4_K|custom:dim=256,layers=1,heads=4,kv=4,ffn=256,vocab=512|Q4_K|5")
fi
# the steps to run, in this order, and the models they read
steps=${DEVICE_CHECK_STEPS:-1 2 3 3b 4 5 6}
[ "$fast" = 1 ] && steps=${DEVICE_CHECK_STEPS:-f1 f4 f5}
fast_models=${DEVICE_CHECK_FAST_MODELS:-1b-F16 1b-Q4_K 8b32-Q4_K}
bench_models=${DEVICE_CHECK_BENCH:-1b-F16 1b-Q4_K 8b-F16 8b32-Q4_K}
drafters=${DEVICE_CHECK_DRAFTERS:-1b-Q4_K 68m-Q4_K}
needed=" "
for st in $steps; do
	case $st in
	3b) needed+="8b-Q4_K 1b-Q4_K " ;;
	4) needed+="$bench_models " ;;
	5) needed+="8b32-Q4_K $drafters " ;;
	f4) needed+="$fast_models " ;;
	esac
done
for m in "${models[@]}"; do
	IFS='|' read -r name shape typ seed <<<"$m"
	[[ $needed == *" $name "* ]] || continue
	("$bin" synth --shape "$shape" --type "$typ" --seed "$seed" -o "$work/models/$name.gguf" --force >"$work/models/$name.log" 2>&1 &&
		touch "$work/models/$name.done" || touch "$work/models/$name.failed") &
done
model() {
	local name=$1 waited=0
	while [ ! -e "$work/models/$name.done" ] && [ ! -e "$work/models/$name.failed" ]; do
		if [ $((SECONDS - start)) -ge $((budget + 60)) ]; then
			echo "model $name: not written within the time budget" >&2
			return 1
		fi
		sleep 2
		waited=$((waited + 2))
	done
	if [ -e "$work/models/$name.failed" ]; then
		echo "model $name: $(tail -1 "$work/models/$name.log")" >&2
		return 1
	fi
	[ $waited -gt 0 ] && echo "(waited ${waited}s for model $name)" >>"$summary"
	echo "$work/models/$name.gguf"
}

# ---------------------------------------------------------------- 1. tests
# each package's GPU tests in its own folder (they read sources and
# ../shared from there), each bounded so that a hang costs one step
step_1() {
	if [ "$dev" = cuda ]; then
		"$bin" backends 2>&1 | sed 's/^/backends: /' | tee -a "$summary"
		for spec in "kernels/cuda|kernels-cuda|${DEVICE_CHECK_T_KERNELS:-100}" \
			"engine/model|model-cuda|${DEVICE_CHECK_T_MODEL:-150}" \
			"profiles|workbench-cuda|${DEVICE_CHECK_T_WORKBENCH:-100}|CUDA"; do
			IFS='|' read -r pkg name secs only <<<"$spec"
			say ""
			say "## 1. GPU tests of $pkg"
			in_budget "tests $pkg" || break
			t=$root/.device/$name.test
			if [ ! -x "$t" ]; then
				fail "$t not found"
				continue
			fi
			(cd "$root/$pkg" && timeout $((secs + 15)) "$t" -test.v -test.timeout "${secs}s" ${only:+-test.run "$only"}) >"$out/$name.log" 2>&1
			rc=$?
			grep -E '^\s*(--- (FAIL|SKIP)|ok|PASS|FAIL|panic)' "$out/$name.log" | head -40 | tee -a "$summary"
			say "$(grep -c -- '--- PASS' "$out/$name.log") passed, $(grep -c -- '--- FAIL' "$out/$name.log") failed"
			[ $rc -eq 0 ] || fail "$pkg GPU tests (exit $rc; $name.log)"
		done
	fi
}

# ------------------------------------------------------ 2. logit difference
step_2() {
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
		bounded "$bin" logits --model "$m" --ids "$ids" --top 2048 --device cpu >"$work/cpu-$t.jsonl" 2>"$work/cpu-$t.err" || {
			fail "logits $t on cpu: $(tail -1 "$work/cpu-$t.err")"
			continue
		}
		bounded "$bin" logits --model "$m" --ids "$ids" --top 2048 --device "$dev" >"$work/dev-$t.jsonl" 2>"$work/dev-$t.err" || {
			fail "logits $t on $dev: $(tail -1 "$work/dev-$t.err")"
			continue
		}
		line=$(python3 - "$work/cpu-$t.jsonl" "$work/dev-$t.jsonl" <<-'EOF'
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
}

# find_pair sets pair (run's model flags) once: the shared bench pair where
# shared/ or ../shared has it, else a synthetic target self-drafted by its
# first layers.
pair=()
pair_found=0
find_pair() {
	[ "$pair_found" = 1 ] && return
	pair_found=1
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
}

# -------------------------------------------------------- 3. greedy identity
step_3() {
	say ""
	say "## 3. greedy identity with autoregressive decoding on $dev (run --baseline, 64 tokens)"
	find_pair
	if [ ${#pair[@]} -gt 0 ]; then
		for s in chain tree egt; do
			in_budget "identity $s" || break
			extra=()
			[ "$s" = tree ] && extra=(--widths "3,2,1")
			if spec_run "run-$s" "${pair[@]}" --strategy "$s" "${extra[@]}" --device "$dev"; then
				say "$s: identical_to_baseline=$ident speedup=${sp}x ${tps} tokens/s"
				results+=("{\"check\":\"identity\",\"strategy\":\"$s\",\"identical\":\"$ident\",\"speedup\":$sp,\"tokens_per_s\":$tps}")
				[ "$ident" = True ] || fail "$s output differs from autoregressive decoding"
			else
				fail "run $s: $spec_err"
			fi
		done
	fi
}

# ------------------------------------------------------ 3b. DuoDecoding split
# duo and egt --aot with the drafter on the CPU (its own threads) while the
# target verifies on the device, against chain with both models on the
# device and against plain decoding on the device; the overlap comes from
# the per-step timeline (overlap_ns: drafting that ran during verification).
step_3b() {
	cpu_threads=$(($(nproc) / 2))
	say ""
	say "## 3b. drafter on the CPU ($cpu_threads threads) vs both models on $dev vs plain decoding on $dev (64 tokens)"
	find_pair
	duo_pairs=()
	[ ${#pair[@]} -gt 0 ] && duo_pairs+=("the pair of step 3|${pair[*]}")
	if in_budget "synthetic 8B/1B pair"; then
		if t8=$(model 8b-Q4_K) && d1=$(model 1b-Q4_K); then
			duo_pairs+=("8B-shape target ($layers8b of 32 layers) with a 1B-shape drafter, Q4_K, random weights (acceptance near 0: the overlap and the identity are the figures here, not the speedup)|--target $t8 --draft $d1")
		else
			fail "synth duo pair"
		fi
	fi
	for dp in "${duo_pairs[@]}"; do
		label=${dp%%|*}
		read -r -a args <<<"${dp#*|}"
		say "$label:"
		for cfg in "duo --gamma 12 --draft-device cpu --draft-threads $cpu_threads" \
			"egt --aot --draft-device cpu --draft-threads $cpu_threads" "chain --gamma 4"; do
			in_budget "duo $cfg" || break 2
			name=${cfg%% *}
			[[ $cfg == *--aot* ]] && name=egt-aot
			read -r -a cargs <<<"${cfg#* }"
			if spec_run "duo-$name" "${args[@]}" --strategy "${cfg%% *}" "${cargs[@]}" --threads "$(nproc)" --device "$dev"; then
				say "  $cfg: identical_to_baseline=$ident speedup over plain $dev decoding=${sp}x ${tps} tokens/s; drafting during ${ovv}% of verification, ${ovd}% of drafting hidden"
				results+=("{\"check\":\"duo\",\"pair\":\"${label%% (*}\",\"config\":\"$cfg\",\"identical\":\"$ident\",\"speedup\":$sp,\"tokens_per_s\":$tps,\"overlap_of_verify_pct\":$ovv,\"drafting_hidden_pct\":$ovd}")
				[ "$ident" = True ] || fail "$cfg output differs from autoregressive decoding"
			else
				fail "run $cfg: $spec_err"
			fi
		done
	done
}

# ------------------------------------------------------------------ 4. speed
step_4() {
	say ""
	say "## 4. decode and T_verify(W) on $dev beside the HBM roofline (4.8 TB/s)"
	widths=1,2,4,8,16,32,64,128,256,512
	[ "${DEVICE_CHECK_SMALL:-0}" = 1 ] && widths=1,2,4,8
	for name in $bench_models; do
		label=$(label_of "$name")
		t=${name#*-}
		in_budget "bench $label $t" || break
		if ! m=$(model "$name" 2>"$work/synth.err"); then
			fail "synth $label $t: $(tail -1 "$work/synth.err")"
			continue
		fi
		left=$((budget + 60 - (SECONDS - start)))
		if ! timeout "$left" "$bin" bench --model "$m" --device "$dev" --reps 3 -n 32 --widths "$widths" --json >"$work/bench-$name.json" 2>"$work/bench.err"; then
			fail "bench $label $t: $(tail -1 "$work/bench.err")"
			continue
		fi
		python3 - "$work/bench-$name.json" "$label" "$t" >"$work/bench-one.txt" <<-'EOF2'
	import json, sys
	d = json.load(open(sys.argv[1]))
	label, typ = sys.argv[2], sys.argv[3]
	roof = 4.8e12 / d["weight_bytes"]
	tps = d["decode_median_tokens_per_s"]
	curve = {p["W"]: p["Median"] / 1e6 for p in d["verify_curve"]}
	print(f"{label} {typ}: {d['weight_bytes'] / 2**30:.2f} GiB of weights; decode {tps:.1f} tokens/s, "
	      f"roofline {roof:.1f} tokens/s ({roof / tps:.2f}x away)")
	mem = d.get("device_memory")
	if mem:
	    print(f"  device memory: copy {mem['Copy'] / 1e9:.0f} GB/s (datasheet {mem['Peak'] / 1e9:.0f} GB/s), from the host {mem['HostToDevice'] / 1e9:.1f} GB/s, "
	          f"to it {mem['DeviceToHost'] / 1e9:.1f} GB/s, {mem['Multiprocessors']} multiprocessors; roofline at the copy rate {d['roofline_tokens_per_s']:.0f} tokens/s")
	print("  T_verify(W) ms: " + "  ".join(f"{w}:{ms:.2f}" for w, ms in sorted(curve.items())))
	if 1 in curve and 64 in curve:
	    print(f"  T_verify(64)/T_verify(1) = {curve[64] / curve[1]:.2f}")
	print("JSON " + json.dumps({"check": "bench", "model": label, "type": typ, "weight_bytes": d["weight_bytes"], "device_memory": mem,
	      "decode_tokens_per_s": tps, "roofline_tokens_per_s": roof, "verify_ms": curve}))
	EOF2
		grep -v '^JSON ' "$work/bench-one.txt" | tee -a "$summary"
		while IFS= read -r l; do results+=("${l#JSON }"); done < <(grep '^JSON ' "$work/bench-one.txt")
	done
}

# ------------------------------------------------- 5. the 8B latency model
# DuoDecoding's case on this machine: the full 8B-shape target on the
# device, each drafter (a 1B shape; a 2-layer 768-wide one, Llama-68M's
# body with Llama 3's vocabulary) on the CPU with half the cores. The pair's
# weights are random, so acceptance is assumed (--alpha, a Llama-3.2-1B /
# Llama-3.1-8B-like rate) while every latency is measured here by tune's
# profile: the ranked plans' predicted speedups over plain decoding on the
# device are the latency model's verdict.
step_5() {
	say ""
	say "## 5. the 8B latency model: tune with the whole 8B-shape target on $dev and each drafter on the CPU ($cpu_threads threads), acceptance assumed"
	in_budget "latency model" && t8=$(model 8b32-Q4_K) || return
	for dname in $drafters; do
		d1=$(model "$dname") || continue
		say "drafter: $(label_of "$dname")"
		for alpha in ${DEVICE_CHECK_ALPHAS:-0.75 0.6}; do
			in_budget "latency model $dname $alpha" || return
			if timeout $((budget + ${DEVICE_CHECK_TUNE_GRACE:-90} - (SECONDS - start))) "$bin" tune --target "$t8" --draft "$d1" --device "$dev" --draft-device cpu --draft-threads "$cpu_threads" \
				--threads "$(nproc)" --alpha "$alpha" --no-recheck --top 400 --db "$db" --json >"$work/tune-$dname-$alpha.json" 2>"$work/tune-$dname-$alpha.err"; then
				python3 - "$work/tune-$dname-$alpha.json" "$alpha" "$dname" >"$work/tune-one.txt" <<-'EOF2'
	import json, sys
	d = json.load(open(sys.argv[1])); alpha, drafter = sys.argv[2], sys.argv[3]
	plans = d["plans"]
	def best(f):
	    c = [p for p in plans if f(p)]
	    return max(c, key=lambda p: p["predicted_speedup"]) if c else None
	rows = [("best plan", best(lambda p: True)), ("best duo (CPU drafter)", best(lambda p: p["plan"]["strategy"] == "duo")),
	        ("best chain", best(lambda p: p["plan"]["strategy"] == "chain")), ("best egt", best(lambda p: p["plan"]["strategy"] == "egt"))]
	print(f"alpha {alpha}: {len(plans)} plans ranked")
	for what, p in rows:
	    if p:
	        print(f"  {what}: {p['name']}: predicted {p['predicted_speedup']:.2f}x plain decoding on the device; "
	              f"draft {p['draft_ns']/1e6:.2f} ms, verify {p['verify_ns']/1e6:.2f} ms, step {p['step_ns']/1e6:.2f} ms, {p['aal']:.2f} tokens a step")
	print("JSON " + json.dumps({"check": "latency-model", "drafter": drafter, "alpha": float(alpha),
	      "best": {k: (p and {"name": p["name"], "speedup": p["predicted_speedup"], "draft_ns": p["draft_ns"], "verify_ns": p["verify_ns"], "aal": p["aal"]}) for k, p in rows}}))
	EOF2
				grep -v '^JSON ' "$work/tune-one.txt" | tee -a "$summary"
				while IFS= read -r l; do results+=("${l#JSON }"); done < <(grep '^JSON ' "$work/tune-one.txt")
			else
				fail "tune $dname alpha $alpha: $(tail -1 "$work/tune-$dname-$alpha.err")"
			fi
		done
	done
}

# --------------------------------------- 6. the drafter on the device
# The other placement, for a user with a small card: the target on the
# CPU, the drafter on the device, drafting while the target verifies.
step_6() {
	say ""
	say "## 6. target on the CPU ($cpu_threads threads), drafter on $dev (64 tokens)"
	find_pair
	[ ${#pair[@]} -gt 0 ] || return
	for cfg in "duo --gamma 4" "egt --aot" "chain --gamma 4"; do
		in_budget "placement $cfg" || break
		name=${cfg%% *}
		read -r -a cargs <<<"${cfg#* }"
		if spec_run "place-$name" "${pair[@]}" --strategy "$name" "${cargs[@]}" --device cpu --threads "$cpu_threads" --draft-device "$dev"; then
			say "  $cfg: identical_to_baseline=$ident speedup over plain CPU decoding=${sp}x ${tps} tokens/s"
			results+=("{\"check\":\"placement\",\"config\":\"$cfg\",\"identical\":\"$ident\",\"speedup\":$sp,\"tokens_per_s\":$tps}")
			[ "$ident" = True ] || fail "$cfg with the drafter on $dev differs from autoregressive decoding"
		else
			fail "run $cfg with the drafter on $dev: $spec_err"
		fi
	done
}

# ------------------------------------------- f1. the tests on both paths
# kernels/cuda on the verified path (its TestFast* compare the two paths
# pass by pass) and the model-level suite on the fast path first; after
# the speed step (f4), so that it runs within the budget whatever the
# tests take, f5: kernels/cuda's device tests again on the fast path and
# the model-level suite on the verified path. Each bounded, so a hang
# costs one of them.
step_f1() {
	say ""
	say "## f1. GPU tests on both paths"
	for p in verified fast; do
		ARBORIST_CUDA_PATH=$p "$bin" backends 2>&1 | grep -i cuda | sed "s/^/backends ($p): /" | tee -a "$summary"
	done
	fast_tests "verified|kernels/cuda|kernels-cuda|${DEVICE_CHECK_T_KERNELS:-90}|" \
		"fast|engine/model|model-cuda|${DEVICE_CHECK_T_MFAST:-110}|^TestCUDADevice$"
}

step_f5() {
	say ""
	say "## f5. more GPU tests on both paths"
	fast_tests "fast|kernels/cuda|kernels-cuda|${DEVICE_CHECK_T_KFAST:-45}|^(TestMatMulAgainstReference|TestMatMulMulti|TestEmbed|TestRowOps|TestRoPE|TestAttention|TestKVCompactCopyGatherArgmax|TestDeviceSuite)$" \
		"verified|engine/model|model-cuda|${DEVICE_CHECK_T_MODEL:-90}|^TestCUDADevice$"
}

# fast_tests SPEC...: runs each PATH|PACKAGE|BINARY|SECONDS|RUN test spec
fast_tests() {
	for spec in "$@"; do
		IFS='|' read -r p pkg name secs only <<<"$spec"
		say ""
		say "### $pkg on the $p path"
		in_budget "tests $pkg ($p)" || break
		t=$root/.device/$name.test
		if [ ! -x "$t" ]; then
			fail "$t not found"
			continue
		fi
		log=$out/$name-$p.log
		# on the stand-in the launch budget test is make cuda-check's
		skip=
		[ -n "$standin" ] && skip='^TestLaunchBudget$'
		(cd "$root/$pkg" && ARBORIST_CUDA_PATH=$p timeout $((secs + 15)) "$t" -test.v -test.timeout "${secs}s" ${only:+-test.run "$only"} ${skip:+-test.skip "$skip"}) >"$log" 2>&1
		rc=$?
		grep -E '^\s*(--- (FAIL|SKIP)|ok|PASS|FAIL|panic)|bit for bit the verified' "$log" | head -40 | tee -a "$summary"
		say "$(grep -c -- '--- PASS' "$log") passed, $(grep -c -- '--- FAIL' "$log") failed, $(grep -c -- '--- SKIP' "$log") skipped"
		results+=("{\"check\":\"tests\",\"package\":\"$pkg\",\"path\":\"$p\",\"exit\":$rc,\"passed\":$(grep -c -- '--- PASS' "$log"),\"failed\":$(grep -c -- '--- FAIL' "$log")}")
		[ $rc -eq 0 ] || fail "$pkg GPU tests on the $p path (exit $rc; $(basename "$log"))"
	done
}

# ---------------------------------- f4. decode and T_verify on both paths
step_f4() {
	say ""
	say "## f4. decode and T_verify(W), W = 1..64, on each path"
	widths=1,2,4,8,16,24,32,48,64
	[ "${DEVICE_CHECK_SMALL:-0}" = 1 ] && widths=1,2,4,8
	for name in $fast_models; do
		label=$(label_of "$name")
		t=${name#*-}
		if ! m=$(model "$name" 2>"$work/synth.err"); then
			fail "synth $label $t: $(tail -1 "$work/synth.err")"
			continue
		fi
		for p in verified fast; do
			in_budget "bench $label $t ($p)" || return
			left=$((budget + 60 - (SECONDS - start)))
			if ! ARBORIST_CUDA_PATH=$p timeout "$left" "$bin" bench --model "$m" --device "$dev" --reps 3 -n 32 --widths "$widths" --json \
				>"$work/fbench-$name-$p.json" 2>"$work/fbench.err"; then
				fail "bench $label $t on the $p path: $(tail -1 "$work/fbench.err")"
				continue
			fi
			judge=1
			[ -n "$standin" ] || [ "${DEVICE_CHECK_SMALL:-0}" = 1 ] && judge=0
			python3 - "$work/fbench-$name-$p.json" "$label" "$t" "$p" "$name" "$judge" >"$work/fbench-one.txt" <<-'EOF2'
	import json, sys
	d = json.load(open(sys.argv[1]))
	label, typ, path, name, judge = sys.argv[2:7]
	tps = d["decode_median_tokens_per_s"]
	curve = {p["W"]: p["Median"] / 1e6 for p in d["verify_curve"]}
	ratio = curve[64] / curve[1] if 1 in curve and 64 in curve else None
	roof = d.get("roofline_tokens_per_s")
	print(f"{label} {typ}, {path} path: decode {tps:.1f} tokens/s" + (f" (roofline at the measured copy rate {roof:.0f})" if roof else ""))
	print("  T_verify(W) ms: " + "  ".join(f"{w}:{ms:.2f}" for w, ms in sorted(curve.items())))
	if ratio is not None:
	    print(f"  T_verify(64)/T_verify(1) = {ratio:.2f}")
	target = {"1b-F16": ("decode", 1300), "8b32-Q4_K": ("decode", 250)}.get(name)
	if judge != "1":
	    target = None  # the stand-in's or small models' figures say nothing of the targets
	if target:
	    print(f"  target: decode >= {target[1]} tokens/s: {'met' if tps >= target[1] else 'not met'}")
	if name == "8b32-Q4_K" and ratio is not None and judge == "1":
	    print(f"  target: T_verify(64)/T_verify(1) <= 1.5: {'met' if ratio <= 1.5 else 'not met'}")
	print("JSON " + json.dumps({"check": "bench", "path": path, "model": label, "type": typ, "weight_bytes": d["weight_bytes"],
	      "decode_tokens_per_s": tps, "roofline_tokens_per_s": roof, "verify_ms": curve, "verify_64_over_1": ratio}))
	EOF2
			grep -v '^JSON ' "$work/fbench-one.txt" | tee -a "$summary"
			while IFS= read -r l; do results+=("${l#JSON }"); done < <(grep '^JSON ' "$work/fbench-one.txt")
		done
	done
}

# label_of NAME describes a background model.
label_of() {
	case $1 in
	1b-*) echo "llama-3.2-1b" ;;
	8b-*) echo "llama-3.1-8b ($layers8b of 32 layers)" ;;
	8b32-*) echo "llama-3.1-8b" ;;
	68m-*) echo "2 layers of width 768, Llama 3's vocabulary (0.2B parameters)" ;;
	*) echo "$1" ;;
	esac
}

cpu_threads=$(($(nproc) / 2))
for st in $steps; do
	"step_$st"
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
kill $(jobs -p) 2>/dev/null
tar -C "$work" -czf "$out/work.tar.gz" --exclude='*.gguf' --exclude='*.jsonl' --exclude=home . 2>/dev/null
[ "$failures" -eq 0 ]
