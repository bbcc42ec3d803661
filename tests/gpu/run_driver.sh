#!/usr/bin/env bash
# Driver-level GPU checks (issue 4): each check of driver_checks.py run
# without and with the preload; the trace decoded; torch's per-step counters
# compared with the decoder's (compare.py), and the driver-level facts
# gathered by summarize_driver.py.
#
#   bash tests/gpu/run_driver.sh [BUILD_DIR]      (default build-gpu)
#
# Environment: DSMT_GPU_RESULTS (results dir), DSMT_DRIVER_CHECKS (default
# "expandable async graphs profiler nccl"), DSMT_GPU_STEPS (default 8),
# PYTHON.  nccl needs two GPUs (skipped, and said, with one).
# Exit: 0 all pass, 1 a failure, 77 no GPU / torch.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
src=$(cd "$here/../.." && pwd)
PY=${PYTHON:-python3}
PY=$("$PY" -c 'import sys; print(sys.executable)' 2>/dev/null) || { echo "SKIP: no python3"; exit 77; }
"$PY" -c 'import torch,sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null ||
	{ echo "SKIP: driver checks: torch sees no GPU"; exit 77; }
B=${1:-$src/build-gpu}
case $B in /*) ;; *) B=$PWD/$B ;; esac
RES=${DSMT_GPU_RESULTS:-$src/tests/gpu/results-driver-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$RES"
RES=$(cd "$RES" && pwd)
CHECKS=${DSMT_DRIVER_CHECKS:-expandable async graphs profiler nccl}
STEPS=${DSMT_GPU_STEPS:-8}
export PYTHONUNBUFFERED=1
say() { printf '[%4ds] %s\n' "$SECONDS" "$*"; }

if [ "${DSMT_GPU_NO_BUILD:-0}" != 1 ]; then
	cuda=${CUDA_HOME:-/usr/local/cuda}
	[ -d "$B" ] || meson setup "$B" -Dtoolkit_dir="$cuda" >"$RES/build.log" 2>&1
	ninja -C "$B" >>"$RES/build.log" 2>&1 || { echo "build failed:"; tail -30 "$RES/build.log"; exit 1; }
fi
LIB=$B/interpose/libdsmemtrace.so
DEC=$B/decode/dsmemdecode
ngpu=$("$PY" -c 'import torch; print(torch.cuda.device_count())')
TORCHRUN=$(dirname "$PY")/torchrun
[ -x "$TORCHRUN" ] || TORCHRUN="$PY -m torch.distributed.run"
fail=0
for c in $CHECKS; do
	d=$RES/$c
	rm -rf "$d" && mkdir -p "$d/trace"
	if [ "$c" = nccl ]; then
		if [ "$ngpu" -lt 2 ]; then
			say "nccl: SKIP (needs 2 GPUs, this host has $ngpu)"
			continue
		fi
		run=($TORCHRUN --standalone --nproc_per_node 2 "$here/driver_checks.py" nccl)
	else
		run=("$PY" "$here/driver_checks.py" "$c")
	fi
	say "$c: without the preload"
	timeout 300 "${run[@]}" "$d/plain.json" --steps "$STEPS" >"$d/plain.out" 2>&1 ||
		{ say "$c: FAIL (plain run, exit $?)"; tail -20 "$d/plain.out"; fail=1; continue; }
	say "$c: with the preload"
	DSMEMTRACE_DIR=$d/trace LD_PRELOAD=$LIB timeout 300 "${run[@]}" "$d/traced.json" --steps "$STEPS" \
		>"$d/traced.out" 2>"$d/traced.err" ||
		{ say "$c: FAIL (traced run, exit $?)"; tail -20 "$d/traced.out" "$d/traced.err"; fail=1; continue; }
	grep dsmemtrace "$d/traced.err" | sort | uniq -c | sed 's/^/    stderr: /'
	for t in "$d"/trace/*.zst; do
		[ -e "$t" ] || continue
		b=$(basename "$t" .zst)
		"$DEC" --format json "$t" >"$d/$b.decoded.json" 2>"$d/$b.decode.err" || { say "$c: decode of $b failed"; fail=1; }
		"$DEC" --dump "$t" 2>/dev/null | awk '$2 == "DRV" || $2 == "SOURCE" || $2 == "SAMPLE"' >"$d/$b.driver.txt"
	done
	"$PY" "$here/summarize_driver.py" "$c" "$d" || fail=1
done
"$PY" "$here/summarize_driver.py" --all "$RES" >"$RES/summary.txt" 2>&1 || fail=1
cat "$RES/summary.txt"
exit $fail
