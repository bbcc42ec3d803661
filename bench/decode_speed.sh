#!/bin/bash
# Decoder throughput: synthesise a training-like trace with mktrace (two
# threads writing 256-event batches, so events reach the file out of seq
# order; 1 MiB frames; zstd level 3 as the tracer), decode it RUNS times and
# report the best CPU time as events/s, plus compressed bytes per event.
#
# usage: bench/decode_speed.sh [BUILDDIR [EVENTS [RUNS]]]   (default build 20000000 5)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}
events=${2:-20000000}
runs=${3:-5}
mk=$build/tests/tools/mktrace
dec=$build/decode/dsmemdecode
for x in "$mk" "$dec"; do
	[ -x "$x" ] || { echo "decode_speed: $x not built (ninja -C $build)" >&2; exit 1; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
sed "s/EVENTS/$events/" "$here/decode_speed.txt" > "$tmp/gen.txt"
"$mk" "$tmp/gen.txt" "$tmp/trace.zst" 2> "$tmp/gen.log"
n=$(sed -n 's/.*synth: \([0-9]*\) events.*/\1/p' "$tmp/gen.log")
bytes=$(stat -c %s "$tmp/trace.zst")
# decompressed bytes as mktrace wrote them (data frames reference their
# history, so `zstd -dc` cannot decode the file on its own)
raw=$(sed -n 's/.* bytes, \([0-9]*\) bytes raw in .*/\1/p' "$tmp/gen.log")
best=""
for ((i = 0; i < runs; i++)); do
	# user+sys CPU seconds of one decode (JSON report to /dev/null)
	t=$( { /usr/bin/time -f '%U %S' "$dec" --format json -o /dev/null "$tmp/trace.zst" 2>&1 >/dev/null; } |
		awk 'NF == 2 && $1 ~ /^[0-9.]+$/ { printf "%.3f", $1 + $2 }')
	if [ -z "$best" ] || awk -v a="$t" -v b="$best" 'BEGIN { exit !(a < b) }'; then best=$t; fi
done
awk -v n="$n" -v b="$bytes" -v r="$raw" -v t="$best" 'BEGIN {
	printf "events:            %d\n", n
	printf "trace size:        %d bytes (%.2f bytes/event compressed, %.1f bytes/event raw)\n", b, b / n, r / n
	printf "best decode time:  %.3f s CPU (of '"$runs"' runs)\n", t
	printf "throughput:        %.1f M events/s\n", n / t / 1e6
}'
