#!/usr/bin/env bash
# --torch-snapshot on a GPU host (issue 7 part 3): a small torch loop runs
# under the preload (tests/gpu/snapshot_check.py run), pauses tracing at the
# end and pickles torch's own torch.cuda.memory._snapshot(); dsmemdecode
# writes ours from the trace; snapshot_check.py compare loads ours with
# torch.cuda._memory_viz and compares allocated bytes, live blocks and their
# addresses with torch's.  Once with the default allocator, once with
# expandable segments.  One PASS/FAIL line each; exit 1 on any FAIL.
# Results (pickles, traces, output) to $OUT/snapshot.tgz.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
. scripts/gpu-env.sh || exit 1
out=${OUT:-$root/snapshot-out}
res=$out/snapshot
mkdir -p "$res"
rc=0
for mode in default expandable; do
	d=$res/$mode
	mkdir -p "$d/trace"
	conf=
	[ "$mode" = expandable ] && conf=expandable_segments:True
	PYTORCH_CUDA_ALLOC_CONF=$conf DSMEMTRACE_DIR=$d/trace LD_PRELOAD=$B/interpose/libdsmemtrace.so timeout 200 \
		python3 "$src/tests/gpu/snapshot_check.py" run "$d" >"$d/out.txt" 2>"$d/err.txt" ||
		{ echo "FAIL snapshot_check ($mode): the loop failed"; tail -5 "$d/err.txt"; rc=1; continue; }
	t=$(ls "$d"/trace/*.zst | head -n 1)
	"$B/decode/dsmemdecode" --torch-snapshot "$d/ours.pickle" "$t" 2>"$d/decode.err" ||
		{ echo "FAIL snapshot_check ($mode): dsmemdecode failed"; cat "$d/decode.err"; rc=1; continue; }
	"$B/decode/dsmemdecode" --format json "$t" >"$d/decoded.json" 2>/dev/null
	echo "== $mode"
	python3 "$src/tests/gpu/snapshot_check.py" compare "$d/torch.pickle" "$d/ours.pickle" | tee "$d/judge.txt" ||
		rc=1
done
tar -C "$out" -czf "$out/snapshot.tgz" snapshot && rm -rf "$res"
exit $rc
