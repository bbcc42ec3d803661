#!/usr/bin/env bash
# On a 2-GPU host: install the staged DeepSpeed (scripts/stage-deepspeed.sh,
# carry .whl), build the library (SRC: this tree, or DSMT_SRC), and trace
# examples/deepspeed_sft/main.py (OPT-125m, ZeRO-2 and ZeRO-3, 2 ranks);
# traces, per-rank torch counters and logs go to $OUT/ds.tgz.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
root=$PWD
src=${DSMT_SRC:-$root}
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
export LD_LIBRARY_PATH=$root/.gpu/root/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
bash scripts/install-deepspeed.sh || exit 1
export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
B=$src/build-gpu
[ -d "$B" ] || meson setup "$B" "$src" -Dtoolkit_dir=/usr/local/cuda >/dev/null || exit 1
ninja -C "$B" interpose/libdsmemtrace.so decode/dsmemdecode >/dev/null || exit 1
out=${OUT:-$root/ds-out}
res=$out/ds
mkdir -p "$res"
py=$(python3 -c 'import sys; print(sys.executable)')
# DSMT_DS_CONFIGS: "stage model micro_batch seq [extra,flags]" entries
# separated by ';' (extra flags comma-separated, e.g. --offload,--no_step_markers)
IFS=';' read -r -a cfgs <<<"${DSMT_DS_CONFIGS:-2 opt-125m 4 256;3 opt-125m 4 256}"
for cfg in "${cfgs[@]}"; do
	set -- $cfg
	extra=${5:-}
	name=z$1-$2-mb$3-seq$4${extra:+-$(echo "$extra" | tr -d '-' | tr ',' '-')}
	d=$res/$name
	mkdir -p "$d/trace"
	echo "== $name"
	DSMEMTRACE_DIR=$d/trace LD_PRELOAD=$B/interpose/libdsmemtrace.so timeout 300 \
		"$(dirname "$py")/torchrun" --standalone --nproc_per_node 2 examples/deepspeed_sft/main.py \
		--model "$2" --zero_stage "$1" --per_device_train_batch_size "$3" --max_seq_len "$4" \
		--steps "${DSMT_DS_STEPS:-6}" --counters_out "$d/torch.json" ${extra//,/ } >"$d/out.txt" 2>"$d/err.txt"
	echo "exit $?"; tail -3 "$d/out.txt"; grep -E 'dsmemtrace|Error|error' "$d/err.txt" | sort | uniq -c | head -8
	for t in "$d"/trace/*.zst; do
		"$B/decode/dsmemdecode" --format json "$t" >"$d/$(basename "$t" .zst).json" 2>>"$d/decode.err"
	done
done
tar -C "$out" -czf "$out/ds.tgz" ds && rm -rf "$res"
