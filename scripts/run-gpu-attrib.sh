#!/usr/bin/env bash
# Attribution checks on a GPU host (issue 5): PyTorch loops that tag every
# parameter, gradient, optimizer state and saved activation
# (tests/gpu/attrib_truth.py) run under the preload; the trace decoded with
# --peak-blocks and judged by tests/gpu/attrib_compare.py; one run with
# torch's own Python-stack recorder beside ours checks our Python frames.
# Results (JSON, dumps, traces, judge output) to $OUT/attrib.tgz.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
. scripts/gpu-env.sh || exit 1
out=${OUT:-$root/attrib-out}
res=$out/attrib
mkdir -p "$res"
rc=0
for loop in ${DSMT_ATTRIB_LOOPS:-mlp transformer transformer_ckpt}; do
	d=$res/$loop
	mkdir -p "$d/trace"
	fr=
	[ "$loop" = transformer ] && fr=--frames
	DSMEMTRACE_DIR=$d/trace LD_PRELOAD=$B/interpose/libdsmemtrace.so timeout 200 \
		python3 "$src/tests/gpu/attrib_truth.py" "$loop" "$d/truth.json" --steps 6 $fr >"$d/out.txt" 2>"$d/err.txt" ||
		{ echo "$loop: run failed"; tail -5 "$d/err.txt"; rc=1; continue; }
	t=$(ls "$d"/trace/*.zst | head -n 1)
	"$B/decode/dsmemdecode" --format json --peak-blocks "$t" >"$d/decoded.json" 2>"$d/decode.err"
	"$B/decode/dsmemdecode" --format json --top 8 "$t" >"$d/top.json" 2>/dev/null
	"$B/decode/dsmemdecode" --dump "$t" >"$d/dump.txt" 2>/dev/null
	args=(--dump "$d/dump.txt")
	[ -n "$fr" ] && args+=(--frames "$d/truth.frames.json")
	python3 "$src/tests/gpu/attrib_compare.py" "$d/truth.json" "$d/decoded.json" "${args[@]}" | tee "$d/judge.txt" || rc=1
	grep dsmemtrace "$d/err.txt" | sort | uniq -c
done
tar -C "$out" -czf "$out/attrib.tgz" attrib && rm -rf "$res"
exit $rc
