#!/bin/sh
# Given traces recorded on an NVIDIA H200 (torch 2.11.0+cu130, CUDA 13.0,
# 2026-11-30, tests/gpu/run.sh) and the per-step counters torch itself
# reported in the same runs, when this decoder replays the traces, then every
# step's allocated (and, outside expandable segments, reserved) numbers equal
# torch's byte for byte — on any machine, no GPU needed.
#
# Traces of an older layout of the format (before the 2026-11-30 redefinition
# of format 1: no META zstd_prefix_bytes in the header) cannot be decoded by
# this decoder: the test is skipped (exit 77) until they are re-recorded.
set -eu
decoder=$1 python=$2 dir=$3 compare=$4
first=$(ls "$dir"/*.zst | head -n 1)
# the header is a zstd skippable frame: its META records are plain bytes
if ! "$python" - "$first" <<'EOF'
import sys
d = open(sys.argv[1], "rb").read(1 << 16)
n = int.from_bytes(d[4:8], "little")
key = b"zstd_prefix_bytes"
sys.exit(0 if d[:4] == bytes.fromhex("5d2a4d18") and bytes([len(key)]) + key in d[8:8 + n] else 1)
EOF
then
	echo "SKIP: h200 traces predate the current layout; re-record with scripts/run-gpu-check.sh"
	exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
for t in "$dir"/*.zst; do
	name=$(basename "$t" .zst)
	"$decoder" --format json "$t" >"$tmp/$name.json" 2>"$tmp/$name.err" || { echo "$name: decoder failed"; cat "$tmp/$name.err"; fail=1; continue; }
	flag=--no-expandable
	case $name in *expandable*) flag=--expandable ;; esac
	"$python" "$compare" "$dir/$name.torch.json" "$tmp/$name.json" $flag --name "$name" | tail -n 1 || fail=1
done
exit $fail
