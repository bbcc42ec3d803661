#!/bin/sh
# usage: run_no_original.sh PROGRAM PRELOAD DECODER
set -eu
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
LD_PRELOAD=$2 DSMEMTRACE_DIR=$d "$1" 2>"$d/err"
n=$(grep -c 'cannot find the original' "$d/err" || true)
[ "$n" = 1 ] || { echo "expected one warning, got $n:"; cat "$d/err"; exit 1; }
"$3" --format json "$d"/dsmemtrace.*.zst >"$d/out.json"
grep -q '"allocs": 500' "$d/out.json" || { echo "events not recorded:"; cat "$d/out.json"; exit 1; }
echo "ok: one warning, 500 allocations recorded"
