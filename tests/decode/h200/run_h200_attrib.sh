#!/bin/sh
# Given three loops traced on an H200 (CPython 3.12, torch 2.11, 2026-11-30)
# beside PyTorch's own tags (tests/gpu/attrib_truth.py: parameters and
# buffers, gradients from register_post_accumulate_grad_hook, optimizer
# states after step(), saved activations from saved_tensors_hooks — each tag
# naming one exact allocation through torch's running allocation count),
# when this decoder lists the blocks live at each step's peak
# (--peak-blocks), then on every loop >= 98 % of the tagged peak bytes get
# the tagged category and <= 2 % of the peak is `other`
# (tests/gpu/attrib_compare.py).  No GPU needed.
set -eu
decoder=$1 python=$2 dir=$3 compare=$4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
for loop in mlp transformer transformer_ckpt; do
	t=$(ls "$dir/$loop"/*.zst)
	"$decoder" --format json --peak-blocks "$t" >"$tmp/$loop.json"
	"$decoder" --dump "$t" >"$tmp/$loop.dump"
	"$python" "$compare" "$dir/$loop/truth.json" "$tmp/$loop.json" --dump "$tmp/$loop.dump" || fail=1
done
exit $fail
