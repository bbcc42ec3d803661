#!/usr/bin/env bash
# The one command for the GPU host (no network there):
#
#   bash scripts/run-gpu-check.sh
#
# Before sending the tree there, run scripts/gpu-deps.sh on a machine with
# network and carry .gpu/ (libunwind.so.8 for native stacks).  This script puts .gpu's libraries on
# LD_LIBRARY_PATH, runs tests/gpu/run.sh with build dir build-gpu, copies the
# aggregated results into $OUT when that is set (at most 8 files, flat):
#   summary.txt  summary.json  run-output.txt  build.log
#   results.tar.gz  (per-loop JSON, decoder output, logs, compare tables)
#   traces.tar      (the .zst traces, when together under 15 MiB)
# and prints the summary last.  Exit status: run.sh's (0 pass, 1 fail, 77 skip).
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
root=$PWD
export PYTHONUNBUFFERED=1

libdir=$root/.gpu/root/usr/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH=$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
if [ ! -e "$libdir/libunwind.so.8" ]; then
	echo "run-gpu-check: $libdir/libunwind.so.8 missing (run scripts/gpu-deps.sh and carry .gpu): native stacks will be off"
fi

RES=${DSMT_GPU_RESULTS:-$root/tests/gpu/results-$(date +%Y%m%d-%H%M%S)}
export DSMT_GPU_RESULTS=$RES
# stay well inside a 10-minute command limit: no new loop run after 400 s,
# none longer than 90 s (a loop takes seconds; a hang is reported as exit 124),
# and the whole check stopped at 540 s
export DSMT_GPU_DEADLINE=${DSMT_GPU_DEADLINE:-400}
export DSMT_GPU_TIMEOUT=${DSMT_GPU_TIMEOUT:-90}
export DSMT_GPU_QUIET_SUMMARY=1
mkdir -p "$RES"

timeout -k 10 "${DSMT_GPU_TOTAL_TIMEOUT:-540}" bash tests/gpu/run.sh build-gpu 2>&1 | tee "$RES/run-output.txt"
rc=${PIPESTATUS[0]}
if [ "$rc" -eq 77 ]; then
	rm -f "$RES/run-output.txt"
	rmdir "$RES" 2>/dev/null
	exit 77
fi
if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
	echo "run-gpu-check: tests/gpu/run.sh stopped after ${DSMT_GPU_TOTAL_TIMEOUT:-540}s; summarizing what finished"
	python3 tests/gpu/summarize.py "$RES" --quiet >/dev/null
	rc=1
fi
[ -f "$RES/summary.txt" ] || python3 tests/gpu/summarize.py "$RES" --quiet >/dev/null

if [ -n "${OUT:-}" ] && mkdir -p "$OUT"; then
	for f in summary.txt summary.json run-output.txt build.log; do
		[ -f "$RES/$f" ] && cp "$RES/$f" "$OUT/$f"
	done
	[ -f "$RES/meson-log.txt" ] && cp "$RES/meson-log.txt" "$RES/env/meson-log.txt"
	tar -C "$(dirname "$RES")" --exclude='*.zst' -czf "$OUT/results.tar.gz" "$(basename "$RES")"
	traces=$(cd "$(dirname "$RES")" && find "$(basename "$RES")" -name '*.zst' | sort)
	if [ -n "$traces" ]; then
		bytes=$(cd "$(dirname "$RES")" && printf '%s\n' "$traces" | xargs -d '\n' du -cb | tail -n 1 | cut -f1)
		if [ "${bytes:-0}" -lt $((15 * 1024 * 1024)) ]; then
			(cd "$(dirname "$RES")" && printf '%s\n' "$traces" | tar -cf "$OUT/traces.tar" -T -)
		else
			# only the main loops' traces (the hook-cost runs carry deep stacks)
			(cd "$(dirname "$RES")" && printf '%s\n' "$traces" | grep '/loops/' | tar -cf "$OUT/traces.tar" -T -)
			if [ "$(stat -c %s "$OUT/traces.tar")" -gt $((15 * 1024 * 1024)) ]; then
				rm -f "$OUT/traces.tar"
				echo "run-gpu-check: traces ($bytes bytes) too large to bring back"
			fi
		fi
	fi
	echo "run-gpu-check: copied to \$OUT: $(cd "$OUT" && echo *)"
fi

echo
cat "$RES/summary.txt" 2>/dev/null || echo "run-gpu-check: no summary (see run-output.txt)"
exit "$rc"
