#!/usr/bin/env bash
# The tracer's own resident memory over a long stand-in run: the same Python
# allocation loop (bench/hook_speed_victim.py, NVTX ranges, 8 call sites at a
# Python depth of 10) traced (native stacks 32 + Python frames, the heaviest
# setting) and with DSMEMTRACE_DISABLE=1, one after the other; VmRSS sampled
# every second.  Prints per run the samples' min, max and last, and the
# traced run's excess over the untraced one at the same point of its life.
#   Usage: bench/tracer_rss.sh [BUILD_DIR [ROUNDS]]   (ROUNDS x 80 events; default 60000: 4.8 M events)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
B=$(cd "${1:-$root/build}" && pwd)
rounds=${2:-60000}
py=$(python3 -c 'import sys; print(sys.executable)')
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
run() { # name env... -> samples in $t/name.rss
	local name=$1
	shift
	env LD_LIBRARY_PATH="$B/tests/standin" DSMEMTRACE_DIR="$t" LD_PRELOAD="$B/interpose/libdsmemtrace.so" "$@" \
		"$py" "$root/bench/hook_speed_victim.py" "$rounds" 10 "$B/tests/python/libnvtxshim.so" &
	local pid=$! s=0
	: >"$t/$name.rss"
	while kill -0 "$pid" 2>/dev/null; do
		awk -v s=$s '/^VmRSS/ {print s, $2}' "/proc/$pid/status" >>"$t/$name.rss" 2>/dev/null || true
		sleep 1
		s=$((s + 1))
	done
	wait "$pid"
}
run traced DSMEMTRACE_NATIVE_DEPTH=32 DSMEMTRACE_PY_DEPTH=32
size=$(stat -c %s "$t"/*.zst)
events=$("$B/decode/dsmemdecode" --format json "$t"/*.zst | python3 -c 'import json,sys; print(json.load(sys.stdin)["processes"][0]["events"])')
rm -f "$t"/*.zst
run plain DSMEMTRACE_DISABLE=1
for n in traced plain; do
	awk -v n=$n 'NR == 1 {mn = $2; mx = $2} {if ($2 < mn) mn = $2; if ($2 > mx) mx = $2; last = $2}
		END {printf "%-7s %3d s  VmRSS min %6.1f MiB  max %6.1f MiB  last %6.1f MiB\n", n, NR, mn / 1024, mx / 1024, last / 1024}' "$t/$n.rss"
done
echo "traced run: $events events, trace $size bytes"
awk '{s[NR] = $1; v[NR] = $2} END {printf "traced VmRSS over time:"; for (q = 1; q <= 8; q++) {i = int(NR * q / 8); if (i < 1) i = 1; printf " %ds %.1f", s[i], v[i] / 1024} print " MiB"}' "$t/traced.rss"
# the excess at each second of the shorter run, after the first 2 s
join <(sort -k1,1 "$t/traced.rss") <(sort -k1,1 "$t/plain.rss") | sort -n |
	awk '$1 >= 2 {d = ($2 - $3) / 1024; if (!n++ || d < mn) mn = d; if (d > mx) mx = d; s = $1}
		END {if (n) printf "tracer excess (traced - untraced, same second, %d samples from 2 s to %d s): %.1f to %.1f MiB\n", n, s, mn, mx}'
