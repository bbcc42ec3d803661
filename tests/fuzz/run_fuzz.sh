#!/usr/bin/env bash
# Bounded libFuzzer run over the decoder (CI) from a seed corpus of real
# traces: every mktrace script of the decode suite (tests/decode/*.txt)
# turned into a trace, and the H200 traces under tests/decode/h200 up to
# 64 KiB.  Fails on any crash, sanitizer report, leak, timeout or input
# needing more than -rss_limit_mb; the crashing input is left in WORKDIR
# (make it a regression: tests/decode/fuzz-regressions/).
#
# Each seed goes in twice: as the file, and turned inside out by trace2rec
# for the target's records mode (up to 32 KiB of records).
#
# usage: run_fuzz.sh FUZZER MKTRACE TRACE2REC SRCROOT WORKDIR [FUZZER OPTIONS...]
#   default options: -max_total_time=60 -seed=1 (DSMT_FUZZ_SECONDS overrides 60)
# The long run (docs/validation.md) is the same command with -runs=10000000
# or -max_total_time=N and a corpus directory kept between runs.
set -uo pipefail
fuzzer=$1 mktrace=$2 trace2rec=$3 src=$4 work=$5
shift 5
rm -rf "$work"
mkdir -p "$work/seeds" "$work/corpus" "$work/artifacts"
n=0
for t in "$src"/tests/decode/*.txt; do
	# the mktrace scripts are the .txt files that start with a command
	# (golden reports share the suffix); mktrace rejects the others
	"$mktrace" "$t" "$work/seeds/$(basename "$t" .txt).zst" 2>/dev/null && n=$((n + 1))
done
while IFS= read -r -d '' f; do
	cp "$f" "$work/seeds/h200-$(echo "${f#"$src"/tests/decode/h200/}" | tr / _)"
	n=$((n + 1))
done < <(find "$src/tests/decode/h200" -name '*.zst' -size -65k -print0)
[ "$n" -gt 10 ] || { echo "FAIL: only $n seed traces" >&2; exit 1; }
r=0
for f in "$work"/seeds/*.zst; do
	if "$trace2rec" "$f" "${f%.zst}.rec" 2>/dev/null && [ "$(stat -c %s "${f%.zst}.rec")" -le 32768 ]; then
		r=$((r + 1))
	else
		rm -f "${f%.zst}.rec"
	fi
done
echo "seed corpus: $n traces, $r of them also as records"
[ $# -gt 0 ] || set -- -max_total_time="${DSMT_FUZZ_SECONDS:-60}" -seed=1
# rss: 1 GiB for the whole process (ASan included); one allocation: 1100 MiB
# (the reorder window may reserve 1 GiB of address space, DSMT_REORDER_MAX,
# touched only where events are held: docs/decisions.md);
# one input: 10 s.  The reports are written to /dev/null inside the target.
"$fuzzer" -rss_limit_mb=1024 -malloc_limit_mb=1100 -timeout=10 -print_final_stats=1 -entropic=0 \
	-artifact_prefix="$work/artifacts/" "$@" "$work/corpus" "$work/seeds" 2>&1 | tail -40
rc=${PIPESTATUS[0]}
if [ "$rc" -ne 0 ] || [ -n "$(ls -A "$work/artifacts")" ]; then
	echo "FAIL: the fuzzer exited $rc; inputs left in $work/artifacts: $(ls "$work/artifacts")" >&2
	exit 1
fi
echo "ok: no crash"
