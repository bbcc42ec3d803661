#!/usr/bin/env bash
# GPU benchmarks (run after scripts/run-gpu-check.sh, which builds build-gpu):
#   - bench/overhead.py: traced vs untraced rounds alternating in one process,
#     torch's own recorder beside it; native depth 4 (default) and 0
#   - bench/stack_fraction.py on a full-depth trace of the transformer loop
#   - bench/hook_cost (C, no torch)
# Writes bench-gpu.txt and overhead-*.json into $OUT (or ./bench-gpu/).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
root=$PWD
export PYTHONUNBUFFERED=1
export LD_LIBRARY_PATH=$root/.gpu/root/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
B=$root/build-gpu
out=${OUT:-$root/bench-gpu}
mkdir -p "$out"
lib=$B/interpose/libdsmemtrace.so
dec=$B/decode/dsmemdecode
[ -x "$dec" ] && [ -f "$lib" ] || { echo "build-gpu missing: run scripts/run-gpu-check.sh first"; exit 1; }
ninja -C "$B" bench/hook_cost >/dev/null 2>&1 || python3 -c 'import ninja' 2>/dev/null
py=$(python3 -c 'import sys; print(sys.executable)')
{
	echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null)"
	# configurations: native depth, and driver level as shipped (CUPTI +
	# entry-point wrappers) or without CUPTI (-nocupti), Python frames off
	# (-nopy, DSMEMTRACE_PY_DEPTH=0); "plain" runs without the
	# preload (its "off" median is the untraced step time of a process that
	# never loaded the library: the cost of merely holding CUPTI shows there)
	for cfg in ${DSMT_BENCH_CONFIGS:-depth0 depth0-nocupti depth4 plain}; do
		t=$(mktemp -d)
		depth=${cfg#depth}; depth=${depth%%-*}
		echo "== overhead, $cfg"
		case $cfg in
		plain) timeout 240 "$py" bench/overhead.py "$out/overhead-$cfg.json" ;;
		*-nocupti) DSMEMTRACE_CUPTI=0 DSMEMTRACE_NATIVE_DEPTH=$depth DSMEMTRACE_DIR=$t LD_PRELOAD=$lib \
			timeout 240 "$py" bench/overhead.py "$out/overhead-$cfg.json" ;;
		*-nopy) DSMEMTRACE_PY_DEPTH=0 DSMEMTRACE_NATIVE_DEPTH=$depth DSMEMTRACE_DIR=$t LD_PRELOAD=$lib \
			timeout 240 "$py" bench/overhead.py "$out/overhead-$cfg.json" ;;
		*) DSMEMTRACE_NATIVE_DEPTH=$depth DSMEMTRACE_DIR=$t LD_PRELOAD=$lib \
			timeout 240 "$py" bench/overhead.py "$out/overhead-$cfg.json" ;;
		esac
		f=$(ls "$t"/dsmemtrace.*.zst 2>/dev/null | head -n 1)
		if [ -n "$f" ]; then
			n=$("$dec" --dump "$f" | grep -c ' ALLOC \| FREE \| DRV ')
			echo "   trace: $n allocation events, $(stat -c %s "$f") bytes, $(python3 -c "print(round($(stat -c %s "$f")/max($n,1),2))") B/event"
		fi
		rm -rf "$t"
	done
	echo "== stack fraction (transformer_ckpt, DSMEMTRACE_NATIVE_DEPTH=64, 8 steps)"
	t=$(mktemp -d)
	DSMEMTRACE_NATIVE_DEPTH=64 DSMEMTRACE_DIR=$t LD_PRELOAD=$lib timeout 120 "$py" tests/gpu/loops.py transformer_ckpt "$t/l.json" --steps 8 >/dev/null 2>&1
	python3 bench/stack_fraction.py "$dec" "$t"/dsmemtrace.*.zst 0 2 4 8 16 32 64
	rm -rf "$t"
	echo "== hook_cost (C, tracer core, no torch)"
	[ -x "$B/bench/hook_cost" ] && "$B/bench/hook_cost" "$(mktemp -d)" 200000
} 2>&1 | tee "$out/bench-gpu.txt"
