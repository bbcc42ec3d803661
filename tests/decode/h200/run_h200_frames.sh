#!/bin/sh
# Given a transformer loop traced on an H200 (CPython 3.12, torch 2.11,
# 2026-11-30) with torch's own _record_memory_history(stacks="python") on
# beside the tracer, when this decoder dumps the trace, then the allocator
# events line up with torch's trace one to one by address, and every
# main-thread event's innermost Python frame (function, file, line — the
# line from the recorded co_linetable) equals torch's.  No GPU needed.
set -eu
decoder=$1 python=$2 dir=$3 compare=$4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
t=$(ls "$dir"/*.zst)
"$decoder" --format json "$t" >"$tmp/decoded.json"
"$decoder" --dump "$t" >"$tmp/dump.txt"
"$python" "$compare" "$dir/truth.json" "$tmp/decoded.json" --no-categories --dump "$tmp/dump.txt" \
	--frames "$dir/truth.frames.json.gz"
