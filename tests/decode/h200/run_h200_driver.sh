#!/bin/sh
# Given the driver-level checks recorded on two NVIDIA H200s (2026-11-30,
# torch 2.11.0+cu130, CUDA 13.0, NCCL 2.28.9; tests/gpu/run_driver.sh):
# expandable segments, backend:cudaMallocAsync, a CUDA-graph loop,
# torch.profiler inside a traced run, a 2-rank NCCL job — with torch's own
# per-step counters from the same runs — when this decoder replays them,
# then every step's allocated and reserved equal torch's (allocated only for
# cudaMallocAsync), each trace carries the driver level, the profiled run
# shows the hand-over to torch.profiler, and NCCL's buffers are attributed
# to NCCL on both ranks.  No GPU needed.
set -eu
decoder=$1 python=$2 dir=$3 summarize=$4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
for d in "$dir"/*/; do
	c=$(basename "$d")
	mkdir -p "$tmp/$c"
	cp "$d"/traced*.json "$tmp/$c/"
	for t in "$d"/*.zst; do
		"$decoder" --format json "$t" >"$tmp/$c/$(basename "$t" .zst).decoded.json" ||
			{ echo "$c: decoder failed on $t"; fail=1; }
	done
	"$python" "$summarize" "$c" "$tmp/$c" || fail=1
done
exit $fail
