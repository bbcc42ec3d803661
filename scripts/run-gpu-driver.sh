#!/usr/bin/env bash
# The one command for issue 4's GPU checks on the lent host (2 GPUs for the
# NCCL check): builds build-gpu, runs tests/gpu/run_driver.sh, then the
# record-and-replay GPU check (tests/gpu/run.sh through run-gpu-check.sh,
# which now runs with the driver level on), and copies results to $OUT:
#   driver.tgz  (per-check JSON, decoded output, traces)   driver-summary.txt
#   and run-gpu-check.sh's files.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
root=$PWD
export LD_LIBRARY_PATH=$root/.gpu/root/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PYTHONUNBUFFERED=1
res=$root/tests/gpu/results-driver-$(date +%Y%m%d-%H%M%S)
DSMT_GPU_RESULTS=$res timeout -k 10 300 bash tests/gpu/run_driver.sh build-gpu
rc=$?
if [ -n "${OUT:-}" ]; then
	mkdir -p "$OUT"
	cp "$res/summary.txt" "$OUT/driver-summary.txt" 2>/dev/null
	tar -C "$(dirname "$res")" -czf "$OUT/driver.tgz" "$(basename "$res")"
fi
export DSMT_GPU_NO_BUILD=1
bash scripts/run-gpu-check.sh
rc2=$?
echo "run-gpu-driver: driver checks exit $rc, record-and-replay check exit $rc2"
[ $rc -eq 0 ] && [ $rc2 -eq 0 ]
