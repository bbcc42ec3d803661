#!/usr/bin/env bash
# On a GPU host (one or two GPUs): install the staged DeepSpeed
# (scripts/stage-deepspeed.sh, carry .whl), build the library (this tree, or
# DSMT_SRC), trace examples/deepspeed_sft/main.py under the preload for each
# configuration, decode on the host, and pack traces, the example's per-rank
# torch counters (with DeepSpeed's ThroughputTimer values and partition
# sizes), logs and decoded JSON into $OUT/ds.tgz — rewritten after every run,
# so a command stopped at its time limit still brings back the runs it
# finished.  tests/gpu/ds_check.py compares them (run there, or here on the
# unpacked ds/ folder).
#
# DSMT_DS_CONFIGS: entries separated by ';', each
#     [gN] stage model micro_batch seq [extra,flags]
# gN: GPUs for the entry (default DSMT_DS_GPUS, else 2); extra flags are
# comma-separated (--offload,--no_step_markers,--steps,3).  Consecutive
# one-GPU entries run two at a time, on GPU 0 and GPU 1, when two GPUs are
# visible.  DSMT_DS_STEPS (default 5), DSMT_DS_TIMEOUT (s per run, 300).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
. scripts/gpu-env.sh || exit 1
# JIT-built DeepSpeed ops (none with torch's optimizers) build once per host
export TORCH_EXTENSIONS_DIR=${TORCH_EXTENSIONS_DIR:-$root/.whl/torch_extensions}
bash scripts/install-deepspeed.sh || exit 1
export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
out=${OUT:-$root/ds-out}
res=$out/ds
mkdir -p "$res"
py=$(python3 -c 'import sys; print(sys.executable)')
torchrun="$(dirname "$py")/torchrun"
ngpu=$(nvidia-smi -L 2>/dev/null | wc -l)
echo "host: $(hostname), $ngpu GPU(s), $(nproc) CPUs, $(free -g | awk '/Mem:/ {print $2}') GiB"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | head -n 2

pack() { tar -C "$out" -czf "$out/ds.tgz.tmp" ds && mv "$out/ds.tgz.tmp" "$out/ds.tgz"; }

# run_one NAME GPUS DEVICES STAGE MODEL MBS SEQ EXTRA
run_one() {
	local name=$1 g=$2 devs=$3 extra=$8 d=$res/$1 t0 rc
	mkdir -p "$d/trace"
	t0=$(date +%s)
	CUDA_VISIBLE_DEVICES=$devs DSMEMTRACE_DIR=$d/trace LD_PRELOAD=$B/interpose/libdsmemtrace.so \
		timeout "${DSMT_DS_TIMEOUT:-300}" "$torchrun" --standalone --nproc_per_node "$g" \
		examples/deepspeed_sft/main.py --model "$5" --zero_stage "$4" --per_device_train_batch_size "$6" \
		--max_seq_len "$7" --steps "${DSMT_DS_STEPS:-5}" --steps_per_print 1 --counters_out "$d/torch.json" \
		${extra//,/ } >"$d/out.txt" 2>"$d/err.txt"
	rc=$?
	echo "$rc $(($(date +%s) - t0))" >"$d/exit"
	for t in "$d"/trace/*.zst; do
		[ -e "$t" ] || continue
		"$B/decode/dsmemdecode" --format json "$t" >"$d/$(basename "$t" .zst).json" 2>>"$d/decode.err"
	done
	echo "== $name: exit $rc in $(($(date +%s) - t0)) s; $(grep -c "^ThroughputTimer" "$d/out.txt") ThroughputTimer lines"
	grep -hE 'out of memory|Error|dsmemtrace:' "$d/err.txt" | sort | uniq -c | head -n 4
}

IFS=';' read -r -a cfgs <<<"${DSMT_DS_CONFIGS:-2 opt-125m 4 256;3 opt-125m 4 256}"
pending=()  # one-GPU entries waiting for a partner
flush_pending() {
	local i=0 e
	for e in "${pending[@]}"; do
		set -- $e
		if [ "$ngpu" -ge 2 ]; then
			run_one "$1" "$2" "$i" "$3" "$4" "$5" "$6" "$7" &
			i=$((i + 1))
			if [ $i -eq 2 ]; then wait; i=0; pack; fi
		else
			run_one "$1" "$2" 0 "$3" "$4" "$5" "$6" "$7"; pack
		fi
	done
	wait
	pending=()
	pack
}
for cfg in "${cfgs[@]}"; do
	set -- $cfg
	g=${DSMT_DS_GPUS:-2}
	case $1 in g[0-9]*) g=${1#g}; shift ;; esac
	extra=${5:-}
	name=g$g-z$1-$2-mb$3-seq$4${extra:+-$(echo "$extra" | tr -d '-' | tr ',' '-')}
	if [ "$g" = 1 ]; then
		pending+=("$name 1 $1 $2 $3 $4 ${extra:-,}")
		[ ${#pending[@]} -eq 2 ] && flush_pending
		continue
	fi
	[ ${#pending[@]} -gt 0 ] && flush_pending
	devs=$(seq -s, 0 $((g - 1)))
	run_one "$name" "$g" "$devs" "$1" "$2" "$3" "$4" "${extra:-,}"
	pack
done
[ ${#pending[@]} -gt 0 ] && flush_pending
"$B/decode/dsmemdecode" --summary "$res"/*/trace/*.zst >"$res/summary.txt" 2>"$res/summary.err"
"$B/decode/dsmemdecode" --summary --format json "$res"/*/trace/*.zst >"$res/summary.json" 2>>"$res/summary.err"
[ -f tests/gpu/ds_check.py ] && python3 tests/gpu/ds_check.py "$res" >"$res/check.txt" 2>&1
pack && rm -rf "$res"
