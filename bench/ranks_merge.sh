#!/usr/bin/env bash
# One simulated multi-node job: RANKS rank files (default 1000) of EVENTS
# events each (default 100000; mktrace's training-like `synth`, a different
# seed per rank, the run id, rank, world size and a DeepSpeed command line
# in the header), generated into a temporary directory (never committed),
# then summarised and merged across ranks with `dsmemdecode --summary`, files
# decoded in parallel (--jobs: default all online CPUs).  Reports wall and
# CPU time and the decoder's peak RSS; with CHECK=1 also decodes with
# --jobs 1 and requires the same output.
#   Usage: bench/ranks_merge.sh [BUILD_DIR [RANKS [EVENTS [JOBS]]]]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
B=$(cd "${1:-$root/build}" && pwd)
ranks=${2:-1000}
events=${3:-100000}
jobs=${4:-$(nproc)}
mk=$B/tests/tools/mktrace
dec=$B/decode/dsmemdecode
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
gen() { # rank
	local r=$1
	{
		printf 'meta host node%03d\nmeta pid %d\nmeta rank %d\nmeta world_size %d\n' $((r / 8)) $((10000 + r)) "$r" "$ranks"
		printf 'meta run_id sim-job-%d\nmeta ts_unit_ns 1000\nmeta start_realtime_ns 1700000000000000000\n' "$ranks"
		printf 'meta cmdline python\\0main.py\\0--model_name_or_path\\0facebook/opt-1.3b\\0--zero_stage\\03\\0--per_device_train_batch_size\\04\\0--max_seq_len\\0512\n'
		printf 'synth events=%d threads=2 batch=256 frame=1048576 level=3 seed=%d\n' "$events" $((r + 1))
	} >"$t/r$r.txt"
	"$mk" "$t/r$r.txt" "$t/dsmemtrace.node$((r / 8)).$((10000 + r)).rank$r.zst" 2>/dev/null
	rm -f "$t/r$r.txt"
}
export -f gen
export t mk ranks events
s0=$(date +%s.%N)
seq 0 $((ranks - 1)) | xargs -P "$(nproc)" -I{} bash -c 'gen {}'
s1=$(date +%s.%N)
bytes=$(du -cb "$t"/*.zst | tail -1 | cut -f1)
echo "generated $ranks rank files x $events events ($(awk -v b="$bytes" 'BEGIN {printf "%.1f MB", b / 1e6}')) in $(awk -v a="$s0" -v b="$s1" 'BEGIN {printf "%.1f", b - a}') s"
echo "$(date -u '+%F %H:%M UTC'), load $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) CPUs, dsmemdecode --summary --jobs $jobs:"
/usr/bin/time -f '%e s wall, %U s user, %S s sys, max RSS %M KB' -o "$t/time" \
	"$dec" --summary --jobs "$jobs" "$t"/*.zst >"$t/summary.txt" 2>"$t/err.txt" || true
cat "$t/time"
echo "report: $(wc -l <"$t/summary.txt") lines; stderr: $(wc -l <"$t/err.txt") lines"
grep -E '^(max|skew)' "$t/summary.txt" | cut -c1-160 || true
if [ "${CHECK:-0}" = 1 ]; then
	/usr/bin/time -f '%e s wall, %U s user, %S s sys, max RSS %M KB' -o "$t/time1" \
		"$dec" --summary --jobs 1 "$t"/*.zst >"$t/summary1.txt" 2>"$t/err1.txt" || true
	echo "--jobs 1: $(cat "$t/time1")"
	cmp -s "$t/summary.txt" "$t/summary1.txt" && cmp -s "$t/err.txt" "$t/err1.txt" &&
		echo "--jobs 1 output identical" || { echo "--jobs 1 output DIFFERS"; exit 1; }
fi
