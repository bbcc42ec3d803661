#!/usr/bin/env bash
# Hook cost in instructions (valgrind --tool=callgrind): the stable measure on
# a shared machine, where wall-clock ns per event move by 2x with the load.
# bench/hook_speed_victim.py runs at two lengths (R1 and R2 rounds of 80
# allocator events and 20 NVTX push/pop, + a train_step push and pop every 16
# rounds) per configuration of hook_speed.sh;
# the difference of the inclusive instruction counts of the recorder
# (dsmt_ev_mem_py) and of the NVTX handlers (h_RangePushA, h_RangePop),
# divided by the difference in events, is the steady-state cost per event
# without start-up (writer start, first faults).
#   Usage: bench/hook_instr.sh [BUILD_DIR [R1 [R2]]]    (default 50 200)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
B=$(cd "${1:-$root/build}" && pwd)
r1=${2:-50}
r2=${3:-200}
py=$(python3 -c 'import sys; print(sys.executable)')
shim=$B/tests/python/libnvtxshim.so
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
source "$root/bench/hook_configs.sh"
incl() { # callgrind file, function -> inclusive Ir
	callgrind_annotate --inclusive=yes --threshold=100 "$1" 2>/dev/null | awk -v f="$2" '
		!done { for (i = 1; i <= NF; i++) if ($i ~ (":" f "$")) { gsub(",", "", $1); print $1; done = 1; break } }' || true
}
one() { # config rounds -> "allocIr nvtxIr"
	local c=$1 r=$2 nv=()
	case $c in all* | default) nv=("$shim") ;; esac
	env LD_LIBRARY_PATH="$B/tests/standin" DSMEMTRACE_DIR="$t" LD_PRELOAD="$B/interpose/libdsmemtrace.so" \
		DSMEMTRACE_BUFFER_KB=65536 ${env[$c]} valgrind --tool=callgrind --callgrind-out-file="$t/cg" \
		"$py" "$root/bench/hook_speed_victim.py" "$r" 10 "${nv[@]}" >/dev/null 2>&1
	rm -f "$t"/*.zst
	local a p q
	a=$(incl "$t/cg" dsmt_ev_mem_py)
	p=$(incl "$t/cg" h_RangePushA)
	q=$(incl "$t/cg" h_RangePop)
	echo "${a:-0} $((${p:-0} + ${q:-0}))"
}
echo "$(date -u '+%F %H:%M UTC'), $("$py" -c 'import platform; print("CPython", platform.python_version())'), rounds $r1 and $r2"
printf '%-9s %18s %18s\n' config "instr/alloc event" "instr/NVTX call"
for c in "${configs[@]}"; do
	read -r a1 n1 < <(one "$c" "$r1")
	read -r a2 n2 < <(one "$c" "$r2")
	awk -v c="$c" -v a1="$a1" -v a2="$a2" -v n1="$n1" -v n2="$n2" -v d=$(((r2 - r1) * 80)) -v dn=$(((r2 - r1) * 20 + 2 * ((r2 + 15) / 16 - (r1 + 15) / 16))) \
		'BEGIN { printf "%-9s %18.0f %18s\n", c, (a2 - a1) / d, (n2 > 0 ? sprintf("%.0f", (n2 - n1) / dn) : "-") }'
done
