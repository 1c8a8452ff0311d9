#!/usr/bin/env bash
# The kernels' register budget, held by make cuda-check (docs/CUDA.md):
#
#   scripts/ptxas-budget.sh BUDGET PTX LOG...
#
# LOG is ptxas's -v output for one architecture each (nvcc -Xptxas -v
# -cubin), PTX the generated PTX of one of them, BUDGET the table of the
# fast path's kernels (kernel, most registers it may use, whether its
# loops may load 16-bit words). It fails when any kernel spills to local
# memory, when a budgeted kernel uses more registers than its budget on
# any architecture (or is missing from a log, or a fast kernel from the
# table), and when a kernel marked "wide" has a 16-bit global load in the
# PTX (its weights are to be read 16 bytes at a time). It prints every
# budgeted kernel's registers.
set -euo pipefail

budget=$1
ptx=$2
shift 2

fail=0
# kernel arch registers spill-bytes, from each log
table=$(for log in "$@"; do
	awk '
		/Compiling entry function/ { match($0, /function .[A-Za-z0-9_]+/); k = substr($0, RSTART + 10, RLENGTH - 10);
			match($0, /sm_[0-9]+/); arch = substr($0, RSTART, RLENGTH) }
		/bytes spill stores/ { s = $5 + $9; spill[k "|" arch] = s }
		/Used [0-9]+ registers/ { match($0, /Used [0-9]+/); r = substr($0, RSTART + 5, RLENGTH - 5); print k, arch, r, spill[k "|" arch] + 0 }
	' "$log"
done)
if [ -z "$table" ]; then
	echo "ptxas-budget: no kernels in $*" >&2
	exit 1
fi
while read -r k arch regs spill; do
	if [ "$spill" -ne 0 ]; then
		echo "ptxas-budget: $k spills $spill bytes on $arch" >&2
		fail=1
	fi
done <<<"$table"

printf '%-16s %-6s %s\n' kernel budget "registers by architecture"
while read -r k most wide; do
	case $k in '' | '#'*) continue ;; esac
	got=$(awk -v k="$k" '$1 == k { printf "%s:%s ", $2, $3 }' <<<"$table")
	if [ -z "$got" ]; then
		echo "ptxas-budget: $k is not in the ptxas output" >&2
		fail=1
		continue
	fi
	printf '%-16s %-6s %s\n' "$k" "$most" "$got"
	for r in $(awk -v k="$k" '$1 == k { print $3 }' <<<"$table"); do
		if [ "$r" -gt "$most" ]; then
			echo "ptxas-budget: $k uses $r registers, over its budget of $most" >&2
			fail=1
		fi
	done
	if [ "$wide" = wide ]; then
		n=$(awk -v e=".entry $k(" 'index($0, e) { on = 1 } on { print } on && /^}/ { exit }' "$ptx" | grep -cE 'ld\.global(\.nc)?\.[usb]16' || true)
		if [ "$n" -ne 0 ]; then
			echo "ptxas-budget: $k has $n 16-bit global loads" >&2
			fail=1
		fi
	fi
done <"$budget"

# every fast kernel has a budget
for k in $(awk '{ print $1 }' <<<"$table" | sort -u | grep '^f_'); do
	if ! grep -qE "^$k " "$budget"; then
		echo "ptxas-budget: fast kernel $k has no budget in $budget" >&2
		fail=1
	fi
done
exit $fail
