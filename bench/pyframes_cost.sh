#!/usr/bin/env bash
# Python frames: hook cost per tensor event with DSMEMTRACE_PY_DEPTH=0 (off)
# and the default 32, through the real preload and the stand-in allocator
# (bench/hook_speed_victim.py without NVTX: 32 000 events per run at a Python
# depth of 10),
# DSMEMTRACE_SELFTIME steady state (after the first 2 000 events), runs
# alternating between the two settings.  The difference is the walk, the
# interning and the longer record.
#   Usage: bench/pyframes_cost.sh [BUILD_DIR [RUNS [PYTHON]]]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
B=$(cd "${1:-$root/build}" && pwd)
runs=${2:-5}
py=$(${3:-python3} -c 'import sys; print(sys.executable)') # not a pyenv shim: one process
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
echo "$("$py" -c 'import platform; print("CPython", platform.python_version())'), Python depth 10"
one() {
	LD_LIBRARY_PATH=$B/tests/standin DSMEMTRACE_DIR=$t LD_PRELOAD=$B/interpose/libdsmemtrace.so \
		DSMEMTRACE_SELFTIME=1 DSMEMTRACE_PY_DEPTH=$1 "$py" "$root/bench/hook_speed_victim.py" 400 10 2>&1 |
		sed -n 's/.*after them \([0-9.]*\) ns\/event.*/\1/p'
	rm -f "$t"/*.zst
}
off=() on=()
for _ in $(seq "$runs"); do
	off+=("$(one 0)")
	on+=("$(one 32)")
done
echo "PY_DEPTH=0 : ${off[*]} ns/event"
echo "PY_DEPTH=32: ${on[*]} ns/event"
med() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
echo "median: off $(med "${off[@]}"), on $(med "${on[@]}"), difference $(awk -v a="$(med "${on[@]}")" -v b="$(med "${off[@]}")" 'BEGIN {printf "%.1f", a-b}') ns/event"
