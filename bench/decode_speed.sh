#!/bin/bash
# Decoder throughput: synthesise a training-like trace with mktrace (two
# threads writing 256-event batches, so events reach the file out of seq
# order; 1 MiB frames; zstd level 3 as the tracer), decode it RUNS times and
# report the best CPU time as events/s, plus compressed bytes per event and
# the decoder's peak RSS (the trace's live set is the same at any length:
# a flat RSS across lengths is memory proportional to the live set).
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
best="" rss=0
for ((i = 0; i < runs; i++)); do
	# user+sys CPU seconds and peak RSS (KB) of one decode (JSON report to /dev/null)
	read -r t m < <( { /usr/bin/time -f '%U %S %M' "$dec" --format json -o /dev/null "$tmp/trace.zst" 2>&1 >/dev/null; } |
		awk 'NF == 3 && $1 ~ /^[0-9.]+$/ { printf "%.3f %d\n", $1 + $2, $3 }')
	if [ -z "$best" ] || awk -v a="$t" -v b="$best" 'BEGIN { exit !(a < b) }'; then best=$t; fi
	[ "$m" -gt "$rss" ] && rss=$m
done
awk -v n="$n" -v b="$bytes" -v r="$raw" -v t="$best" 'BEGIN {
	printf "events:            %d\n", n
	printf "trace size:        %d bytes (%.2f bytes/event compressed, %.1f bytes/event raw)\n", b, b / n, r / n
	printf "best decode time:  %.3f s CPU (of '"$runs"' runs)\n", t
	printf "throughput:        %.1f M events/s\n", n / t / 1e6
	printf "decoder peak RSS:  %.1f MiB (largest of the runs)\n", '"$rss"' / 1024
}'
