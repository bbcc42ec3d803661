#!/bin/sh
# Given the three loops traced on an H200 (CPython 3.12, torch 2.11) beside
# torch's own tags (tests/gpu/attrib_truth.py: parameters, gradients,
# optimizer states and saved activations by storage address), when this
# decoder lists the blocks live at each step's peak (--peak-blocks), then
# attrib_compare.py's `other` target (<= 2 % of the peak) holds on every
# loop, and the matched share of tagged bytes does not fall below what the
# rules reach today.
#
# The >= 98 % matched target is not judged here: the truth tags by address
# with no time, and the remaining misses are tags of other tensors at a
# reused address within the step (docs/attribution.md, "H200 ground truth"):
# an activation tag on an Adam intermediate allocated after backward, a
# gradient or step-1 optimizer-state tag on a forward activation still live
# at a backward peak.  The floors below are the figures reached with every
# live block at the peak correctly categorised; a drop is a regression.
set -eu
decoder=$1 python=$2 dir=$3 compare=$4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
for spec in mlp:95.05 transformer:89.40 transformer_ckpt:95.48; do
	loop=${spec%%:*} floor=${spec#*:}
	"$decoder" --format json --peak-blocks "$dir/$loop"/*.zst >"$tmp/$loop.json"
	"$python" "$compare" "$dir/$loop/truth.json" "$tmp/$loop.json" >"$tmp/$loop.txt" || true
	cat "$tmp/$loop.txt"
	line=$(grep "^categories $loop:" "$tmp/$loop.txt")
	"$python" - "$line" "$floor" <<'PY' || fail=1
import re, sys
line, floor = sys.argv[1], float(sys.argv[2])
m = re.search(r": ([0-9.]+) % of tagged peak bytes matched.*other ([0-9.]+) % of peak", line)
if not m:
    sys.exit("run_h200_attrib: no categories line")
matched, other = float(m.group(1)), float(m.group(2))
bad = []
if other > 2.0:
    bad.append(f"other {other} % > 2 %")
if matched < floor:
    bad.append(f"matched {matched} % < {floor} % (the rules' floor)")
print("  judged: other <= 2 %, matched >= " + str(floor) + " % -> " + ("FAIL: " + "; ".join(bad) if bad else "OK"))
sys.exit(1 if bad else 0)
PY
done
exit $fail
