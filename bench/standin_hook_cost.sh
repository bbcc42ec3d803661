#!/usr/bin/env bash
# Hook cost per tensor event through the real preload and the stand-in CUDA /
# torch libraries (no GPU), by native stack depth, three runs each, steady
# state (DSMEMTRACE_SELFTIME, after the first 2000 events); then the share
# of events whose captured stack holds the whole native stack up to the
# Python interpreter.   Usage: bench/standin_hook_cost.sh [BUILD_DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
B=$(cd "${1:-$root/build}" && pwd)
py=$(python3 -c 'import sys; print(sys.executable)') # not a pyenv shim: one process
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
run() {
	LD_LIBRARY_PATH=$B/tests/standin DSMEMTRACE_DIR=$t LD_PRELOAD=$B/interpose/libdsmemtrace.so "$@"
}
for d in 0 4 8 16; do
	printf 'depth %2d:' "$d"
	for r in 1 2 3; do
		run env DSMEMTRACE_SELFTIME=1 DSMEMTRACE_NATIVE_DEPTH=$d "$py" "$root/bench/standin_victim.py" 400 2>&1 |
			sed -n 's/.*after them \([0-9.]*\) ns\/event.*/ \1/p' | tr -d '\n'
		rm -f "$t"/*.zst
	done
	echo " ns/event"
done
run env DSMEMTRACE_NATIVE_DEPTH=64 "$py" "$root/bench/standin_victim.py" 50
python3 "$root/bench/stack_fraction.py" "$B/decode/dsmemdecode" "$t"/dsmemtrace.*.zst 0 4 8 16
