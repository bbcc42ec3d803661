#!/usr/bin/env bash
# Tracing overhead on the GPU (issue 8 part 5), one command on a CUDA host:
#
#   bash bench/gpu/run.sh [JOB ...]
#
# JOB is LOOP:CONFIG; without JOBs every one below runs (about 10 minutes on
# an H200; split them over several commands where a command is limited).
#   LOOP    transformer | tiny | ds-z2 | ds-z3   (bench/gpu/overhead.py)
#   CONFIG  nostacks  DSMEMTRACE_PY_DEPTH=0, native depth 0 (call site only)
#           default   as shipped: Python frames (32), native depth 0
#           stacks    Python frames and DSMEMTRACE_NATIVE_DEPTH=32 (no cache)
#           plain     no preload: torch's recorder alone
#   hookcost  bench/hook_cost, the tracer core alone (C, no torch)
#   stackcheck:D  DSMEMTRACE_STACK_CHECK=1 at native depth D on
#           tests/gpu/loops.py transformer_ckpt (part 4's stack match)
# Each job is one process whose rounds alternate between dsmemtrace paused,
# dsmemtrace recording, and torch's _record_memory_history(stacks="python")
# and ("all"); its trace's bytes per event are measured after it.
# The DeepSpeed loops (examples/deepspeed_sft, OPT-1.3B, micro-batch 4,
# seq 512, one GPU) need scripts/stage-deepspeed.sh's .whl carried along.
# DSMT_BENCH_ROUNDS: rounds per mode (overhead.py's default: 40; ds 8).
# DSMT_REV: the revision to print (a copied tree's .git may be stale).
# Writes $OUT (or ./bench-gpu-out): bench-gpu.txt and overhead-JOB.json;
# bench/README.md and docs/validation.md keep the recorded results.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
if ! nvidia-smi -L >/dev/null 2>&1; then
	echo "SKIP: no NVIDIA GPU here (bench/gpu needs one)"
	exit 77
fi
. scripts/gpu-env.sh || exit 1
out=${OUT:-$root/bench-gpu-out}
mkdir -p "$out"
lib=$B/interpose/libdsmemtrace.so
dec=$B/decode/dsmemdecode
py=$(python3 -c 'import sys; print(sys.executable)')
jobs=("$@")
[ ${#jobs[@]} -gt 0 ] || jobs=(transformer:nostacks transformer:default transformer:stacks transformer:plain
	tiny:nostacks tiny:default tiny:stacks ds-z2:default ds-z2:stacks ds-z3:default ds-z3:stacks)
case " ${jobs[*]}" in
*" ds-"*)
	export TORCH_EXTENSIONS_DIR=${TORCH_EXTENSIONS_DIR:-$root/.whl/torch_extensions}
	bash scripts/install-deepspeed.sh >/dev/null || { echo "bench/gpu: DeepSpeed not installed (carry .whl)"; exit 1; }
	export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
	;;
esac
rc=0
{
	echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -n 1)," \
		"$(nproc) CPUs, rev ${DSMT_REV:-$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)}"
	for job in "${jobs[@]}"; do
		loop=${job%%:*} cfg=${job#*:}
		if [ "$job" = hookcost ]; then
			echo "== hook_cost (C, tracer core, no torch)"
			t=$(mktemp -d)
			ninja -C "$B" bench/hook_cost >/dev/null && "$B/bench/hook_cost" "$t" 200000
			rm -rf "$t"
			continue
		fi
		if [ "$loop" = stackcheck ]; then
			# part 4: the share of events whose recorded native stack equals
			# a full unwind up to the first interpreter frame (CONFIG = depth)
			t=$(mktemp -d)
			echo "== $job: DSMEMTRACE_STACK_CHECK=1, native depth $cfg, stack cache off, transformer_ckpt 20 steps"
			DSMEMTRACE_STACK_CHECK=1 DSMEMTRACE_NATIVE_DEPTH=$cfg DSMEMTRACE_DIR=$t LD_PRELOAD=$lib \
				timeout 300 "$py" tests/gpu/loops.py transformer_ckpt "$t/l.json" --steps 20 2>&1 >/dev/null |
				sed -n 's/.*stackcheck: /   /p'
			rm -rf "$t"
			continue
		fi
		case $loop in
		transformer | tiny) args=("$loop" ${DSMT_BENCH_ROUNDS:+--rounds $DSMT_BENCH_ROUNDS}) ;;
		ds-z2 | ds-z3) args=(ds ${DSMT_BENCH_ROUNDS:+--rounds $DSMT_BENCH_ROUNDS} --zero_stage "${loop#ds-z}" --model opt-1.3b --per_device_train_batch_size 4 --max_seq_len 512) ;;
		*) echo "unknown loop in $job"; rc=1; continue ;;
		esac
		case $cfg in
		nostacks) env=(DSMEMTRACE_PY_DEPTH=0 DSMEMTRACE_NATIVE_DEPTH=0) ;;
		default) env=() ;;
		stacks) env=(DSMEMTRACE_NATIVE_DEPTH=32) ;;
		plain) env=() ;;
		*) echo "unknown configuration in $job"; rc=1; continue ;;
		esac
		t=$(mktemp -d)
		echo "== $job"
		if [ "$cfg" = plain ]; then
			timeout 400 "$py" bench/gpu/overhead.py "${args[0]}" "$out/overhead-$loop-$cfg.json" "${args[@]:1}" 2>"$t/err"
		else
			env "${env[@]}" DSMEMTRACE_DIR="$t" LD_PRELOAD="$lib" \
				timeout 400 "$py" bench/gpu/overhead.py "${args[0]}" "$out/overhead-$loop-$cfg.json" "${args[@]:1}" 2>"$t/err"
		fi
		r=$?
		[ $r -eq 0 ] || { rc=1; echo "   exit $r"; }
		grep -hiE 'error|dsmemtrace:|selftime|stackcheck' "$t/err" | sort | uniq -c | head -n 5
		if ls "$t"/dsmemtrace.*.zst >/dev/null 2>&1; then
			python3 bench/bytes_per_event.py "$dec" "$t" | sed -n 's/^all /   trace: all /p'
		fi
		rm -rf "$t"
	done
	echo "== done $(date -u +%FT%TZ)"
	exit $rc
} 2>&1 | tee -a "$out/bench-gpu.txt"
exit "${PIPESTATUS[0]}"
