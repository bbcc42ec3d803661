#!/bin/sh
# Given traces recorded on an NVIDIA H200 (torch 2.11.0+cu130, CUDA 13.0,
# 2026-11-30, tests/gpu/run.sh) and the per-step counters torch itself
# reported in the same runs, when this decoder replays the traces, then every
# step's allocated (and, outside expandable segments, reserved) numbers equal
# torch's byte for byte — on any machine, no GPU needed.
set -eu
decoder=$1 python=$2 dir=$3 compare=$4
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
