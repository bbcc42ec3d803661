#!/usr/bin/env bash
# dsmemtrace GPU check: real PyTorch loops under the preload, per-step numbers
# from the trace compared byte for byte with PyTorch's own counters.
#
#   bash tests/gpu/run.sh [BUILD_DIR]        (default BUILD_DIR: build-gpu)
#
# Exit: 0 all agree, 1 a disagreement or failure, 77 skipped (no python3,
# torch, CUDA build of torch or GPU; one line says which).
#
# Environment (all optional):
#   DSMT_GPU_RESULTS     results dir (default tests/gpu/results-<date>)
#   DSMT_GPU_LOOPS       loops to run (default: all six)
#   DSMT_GPU_DEPTHS      native depths for the hook-cost runs (default "0 8 16 32";
#                        "none" skips them)
#   DSMT_GPU_STEPS       steps per loop (default 8)
#   DSMT_GPU_HOOK_STEPS  steps of the hook-cost runs (default DSMT_GPU_STEPS)
#   DSMT_GPU_NO_BUILD=1  do not run meson/ninja (the meson test sets it)
#   DSMT_GPU_TIMEOUT     seconds per python run (default 120)
#   DSMT_GPU_DEADLINE    start no new run after this many seconds (default 420)
#   DSMT_GPU_QUIET_SUMMARY=1  write the summary files without printing them
#   PYTHON               interpreter holding torch (default python3)
#   CUDA_HOME            CUDA headers for the build (default: searched)
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
src=$(cd "$here/../.." && pwd)
PY=${PYTHON:-python3}

abspath() { case $1 in /*) printf '%s\n' "$1" ;; *) printf '%s\n' "$PWD/$1" ;; esac; }

# --- skip unless torch sees a CUDA GPU -------------------------------------
if ! command -v "$PY" >/dev/null 2>&1; then
	echo "SKIP: gpu check: $PY not found"
	exit 77
fi
probe=$("$PY" - 2>/dev/null <<'EOF'
import sys
try:
    import torch
except Exception as e:
    print(f"torch not importable ({type(e).__name__}: {e})"); sys.exit(1)
if not torch.version.cuda:
    print(f"torch {torch.__version__} is built without CUDA"); sys.exit(1)
if not torch.cuda.is_available() or torch.cuda.device_count() < 1:
    print(f"torch {torch.__version__} (CUDA {torch.version.cuda}) sees no GPU"); sys.exit(1)
print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, {torch.cuda.get_device_name(0)}")
EOF
)
probe_rc=$?
probe=$(printf '%s\n' "$probe" | tail -n 1)
if [ $probe_rc -ne 0 ]; then
	echo "SKIP: gpu check: ${probe:-python3 -c 'import torch' failed}"
	exit 77
fi

# The interpreter itself, not a wrapper script (a pyenv shim would start
# shells and helpers, each traced under the preload).
PY=$("$PY" -c 'import sys; print(sys.executable)' 2>/dev/null) || PY=${PYTHON:-python3}

B=$(abspath "${1:-$src/build-gpu}")
RES=$(abspath "${DSMT_GPU_RESULTS:-$src/tests/gpu/results-$(date +%Y%m%d-%H%M%S)}")
LOOPS=${DSMT_GPU_LOOPS:-mlp transformer_ckpt transformer_ckpt_expandable side_stream oom empty_cache pause_resume}
DEPTHS=${DSMT_GPU_DEPTHS:-0 8 16 32}
[ "$DEPTHS" = none ] && DEPTHS=
STEPS=${DSMT_GPU_STEPS:-8}
RUN_TIMEOUT=${DSMT_GPU_TIMEOUT:-120}
DEADLINE=${DSMT_GPU_DEADLINE:-420}
export PYTHONUNBUFFERED=1

mkdir -p "$RES" || { echo "gpu check: cannot create $RES" >&2; exit 1; }
rm -rf "$RES/loops" "$RES/hook" "$RES/env"
mkdir -p "$RES/loops" "$RES/hook" "$RES/env"

say() { printf '[%4ds] %s\n' "$SECONDS" "$*"; }

say "gpu check: $probe"
say "build dir $B, results in $RES"

# libunwind.so.8 for native stacks: scripts/gpu-deps.sh unpacks Debian's
# into .gpu/ for hosts without one (the library dlopens it by that name).
carried=$src/.gpu/root/usr/lib/x86_64-linux-gnu
if [ -e "$carried/libunwind.so.8" ] && ! "$PY" -c 'import ctypes; ctypes.CDLL("libunwind.so.8")' 2>/dev/null; then
	export LD_LIBRARY_PATH=$carried${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi

# --- environment facts for the summary -------------------------------------
{
	echo "probe=$probe"
	echo "python=$(command -v "$PY")"
	echo "build_dir=$B"
	echo "results=$RES"
	echo "steps=$STEPS"
	echo "uname=$(uname -srm)"
	echo "host=$(hostname 2>/dev/null || echo unknown)"
	echo "date=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
	if command -v nvidia-smi >/dev/null 2>&1; then
		echo "nvidia_smi=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -n 1)"
	fi
	if command -v git >/dev/null 2>&1 && git -C "$src" rev-parse HEAD >/dev/null 2>&1; then
		echo "git=$(git -C "$src" describe --always --dirty 2>/dev/null)"
	fi
	echo "ld_library_path=${LD_LIBRARY_PATH:-}"
	if "$PY" -c 'import ctypes; ctypes.CDLL("libunwind.so.8")' 2>/dev/null; then
		echo "libunwind=found"
	else
		echo "libunwind=missing (native stacks off; see scripts/gpu-deps.sh)"
	fi
} >"$RES/env/facts.txt"

# --- build ------------------------------------------------------------------
find_cuda_home() {
	local c d nvcc
	local -a cands=()
	[ -n "${CUDA_HOME:-}" ] && cands+=("$CUDA_HOME")
	[ -n "${CUDA_PATH:-}" ] && cands+=("$CUDA_PATH")
	cands+=(/usr/local/cuda)
	if nvcc=$(command -v nvcc 2>/dev/null); then
		cands+=("$(dirname "$(dirname "$(readlink -f "$nvcc")")")")
	fi
	for d in /usr/local/cuda-*; do [ -d "$d" ] && cands+=("$d"); done
	# NVIDIA's pip wheels (nvidia-nvtx, nvidia-cuda-runtime) beside torch
	while IFS= read -r d; do [ -n "$d" ] && cands+=("$d"); done < <("$PY" - 2>/dev/null <<'EOF'
import glob, os
try:
    import nvidia
    for p in nvidia.__path__:
        for h in sorted(glob.glob(os.path.join(p, "*", "include", "nvtx3", "nvToolsExt.h"))):
            print(os.path.dirname(os.path.dirname(os.path.dirname(h))))
except Exception:
    pass
EOF
)
	for c in "${cands[@]}"; do
		if [ -f "$c/include/nvtx3/nvToolsExt.h" ] && [ -f "$c/include/cuda_runtime_api.h" ]; then
			printf '%s\n' "$c"
			return 0
		fi
	done
	for c in "${cands[@]}"; do
		if [ -f "$c/include/nvtx3/nvToolsExt.h" ]; then
			printf '%s\n' "$c"
			return 0
		fi
	done
	return 1
}

build() {
	local log=$RES/build.log meson ninja cuda
	local -a MESON
	if meson=$(command -v meson 2>/dev/null); then
		MESON=("$meson")
	elif "$PY" -c 'import mesonbuild' 2>/dev/null; then
		MESON=("$PY" -m mesonbuild.mesonmain)
	else
		echo "gpu check: meson not found (neither on PATH nor as python3 -m mesonbuild)"
		return 1
	fi
	if ninja=$(command -v ninja 2>/dev/null); then
		:
	elif ninja=$("$PY" -c 'import ninja, os; print(os.path.join(ninja.BIN_DIR, "ninja"))' 2>/dev/null) && [ -x "$ninja" ]; then
		export NINJA=$ninja
	else
		echo "gpu check: ninja not found"
		return 1
	fi
	if [ ! -f "$B/build.ninja" ]; then
		if ! cuda=$(find_cuda_home); then
			echo "gpu check: no CUDA headers (nvtx3/nvToolsExt.h) under \$CUDA_HOME, /usr/local/cuda, nvcc's root or the nvidia pip packages"
			return 1
		fi
		echo "gpu check: CUDA headers from $cuda" | tee -a "$log"
		CUDA_HOME=$cuda "${MESON[@]}" setup "$B" "$src" >>"$log" 2>&1 || {
			echo "gpu check: meson setup failed; end of $log:"
			tail -n 30 "$log"
			[ -f "$B/meson-logs/meson-log.txt" ] && cp "$B/meson-logs/meson-log.txt" "$RES/meson-log.txt"
			return 1
		}
	fi
	# Only what this check needs; the whole tree if those names are unknown.
	if ! "${NINJA:-ninja}" -C "$B" interpose/libdsmemtrace.so decode/dsmemdecode bench/hook_cost >>"$log" 2>&1; then
		echo "gpu check: building the two targets failed, trying the whole tree" >>"$log"
		"${NINJA:-ninja}" -C "$B" >>"$log" 2>&1 || {
			echo "gpu check: ninja failed; end of $log:"
			tail -n 30 "$log"
			return 1
		}
	fi
	return 0
}

if [ -z "${DSMT_GPU_NO_BUILD:-}" ]; then
	say "building (log: $RES/build.log)"
	if ! build; then
		echo "build=failed" >>"$RES/env/facts.txt"
		"$PY" "$here/summarize.py" "$RES"
		exit 1
	fi
	echo "build=ok" >>"$RES/env/facts.txt"
fi
LIB=$B/interpose/libdsmemtrace.so
DEC=$B/decode/dsmemdecode
if [ ! -f "$LIB" ] || [ ! -x "$DEC" ]; then
	echo "gpu check: $LIB or $DEC missing (build first, or unset DSMT_GPU_NO_BUILD)"
	echo "build=missing" >>"$RES/env/facts.txt"
	"$PY" "$here/summarize.py" "$RES"
	exit 1
fi
say "library $LIB"

# --- helpers ----------------------------------------------------------------
# run_loop DIR TAG LOOP [VAR=VALUE...]; TAG "preload" runs under the library
run_loop() {
	local dir=$1 tag=$2 loop=$3 rc t0
	shift 3
	local -a envs=("$@") unset=()
	mkdir -p "$dir"
	if [ "$loop" = transformer_ckpt_expandable ]; then
		envs+=("PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True")
	fi
	if [ "$tag" = preload ]; then
		rm -rf "$dir/trace"
		mkdir -p "$dir/trace"
		envs+=("LD_PRELOAD=$LIB" "DSMEMTRACE_DIR=$dir/trace")
	else
		unset=(-u LD_PRELOAD -u DSMEMTRACE_DIR)
	fi
	printf '%s\n' "${envs[@]}" >"$dir/$tag.env"
	if [ "$SECONDS" -ge "$DEADLINE" ]; then
		echo "deadline" >"$dir/$tag.skipped"
		say "$(basename "$dir"): $tag run SKIPPED (past the ${DEADLINE}s deadline)"
		return 1
	fi
	t0=$SECONDS
	timeout -k 10 "$RUN_TIMEOUT" env "${unset[@]}" "${envs[@]}" \
		"$PY" "$here/loops.py" "$loop" "$dir/$tag.json" --steps "$STEPS" \
		>"$dir/$tag.out" 2>"$dir/$tag.err"
	rc=$?
	echo "$rc" >"$dir/$tag.rc"
	echo $((SECONDS - t0)) >"$dir/$tag.wall_s"
	say "$(basename "$dir"): $tag run rc=$rc ($((SECONDS - t0))s) $(grep -m1 '^final_loss=' "$dir/$tag.out")"
	[ "$rc" -eq 124 ] && say "  timed out after ${RUN_TIMEOUT}s"
	if [ "$rc" -ne 0 ]; then
		tail -n 5 "$dir/$tag.err" | sed 's/^/    /'
	fi
	return "$rc"
}

# decode_and_compare DIR: the trace of DIR/preload.json's process
decode_and_compare() {
	local dir=$1 pid="" trace="" n rc
	if [ -f "$dir/preload.json" ]; then
		pid=$("$PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))["pid"])' "$dir/preload.json" 2>/dev/null)
	fi
	n=$(find "$dir/trace" -maxdepth 1 -name '*.zst' | wc -l)
	echo "$n" >"$dir/trace.count"
	if [ -n "$pid" ]; then
		trace=$(find "$dir/trace" -maxdepth 1 -name "dsmemtrace.*.$pid.zst" | head -n 1)
	fi
	if [ -z "$trace" ]; then
		# loop crashed before writing its JSON: the largest trace, for diagnosis
		# shellcheck disable=SC2012
		trace=$(ls -S "$dir"/trace/*.zst 2>/dev/null | head -n 1)
	fi
	if [ -z "$trace" ]; then
		echo "no trace file in $dir/trace (pid ${pid:-unknown})" >"$dir/decode.problem"
		say "$(basename "$dir"): NO TRACE FILE"
		return 1
	fi
	echo "$trace" >"$dir/trace.path"
	stat -c %s "$trace" >"$dir/trace.bytes"
	"$DEC" -v --format json "$trace" >"$dir/decode.json" 2>"$dir/decode.err"
	echo $? >"$dir/decode.rc"
	"$DEC" --ignore-totals --format json "$trace" >"$dir/decode-nt.json" 2>"$dir/decode-nt.err"
	echo $? >"$dir/decode-nt.rc"
	cmp -s "$dir/decode.json" "$dir/decode-nt.json"
	echo $? >"$dir/cmp.rc"
	"$DEC" --dump "$trace" >"$dir/dump.txt" 2>"$dir/dump.err"
	echo $? >"$dir/dump.rc"
	# one record a line: "<frame> TYPE field=value ..."; events carry seq=
	wc -l <"$dir/dump.txt" | tr -d ' ' >"$dir/dump.lines"
	{ grep -c ' seq=' "$dir/dump.txt" || true; } >"$dir/dump.events"
	{ grep -cE '^[0-9]+ (ALLOC|FREE) ' "$dir/dump.txt" || true; } >"$dir/dump.allocfree"
	head -n 300 "$dir/dump.txt" >"$dir/dump.head"
	rm -f "$dir/dump.txt"
	if [ -f "$dir/preload.json" ]; then
		"$PY" "$here/compare.py" "$dir/preload.json" "$dir/decode.json" \
			--json-out "$dir/compare.json" --name "$(basename "$dir")" >"$dir/compare.txt" 2>&1
		rc=$?
	else
		echo "compare: no loop JSON (the loop failed)" >"$dir/compare.txt"
		rc=1
	fi
	echo "$rc" >"$dir/compare.rc"
	say "$(tail -n 1 "$dir/compare.txt")"
	[ "$(cat "$dir/cmp.rc")" = 0 ] || say "  --ignore-totals output DIFFERS from the default"
	[ "$(cat "$dir/decode.rc")" = 0 ] || say "  dsmemdecode exit $(cat "$dir/decode.rc"): $(tail -n 1 "$dir/decode.err")"
	return "$rc"
}

result_of() { grep -m1 "^$1=" "$2" 2>/dev/null | cut -d= -f2-; }

# --- the loops --------------------------------------------------------------
read -r -a loops <<<"$LOOPS"
printf '%s\n' "${loops[@]}" >"$RES/loops.list"
for loop in "${loops[@]}"; do
	d=$RES/loops/$loop
	mkdir -p "$d"
	run_loop "$d" preload "$loop"
	[ -f "$d/preload.skipped" ] && continue
	decode_and_compare "$d"
	run_loop "$d" plain "$loop"
	# same results with and without the library?  On a mismatch run once more
	# without it to tell a library effect from run-to-run nondeterminism.
	if [ -f "$d/plain.rc" ] && [ "$(cat "$d/plain.rc")" = 0 ] && [ "$(cat "$d/preload.rc")" = 0 ]; then
		if [ "$(result_of final_loss "$d/preload.out")|$(result_of param_checksum "$d/preload.out")" != \
			"$(result_of final_loss "$d/plain.out")|$(result_of param_checksum "$d/plain.out")" ]; then
			say "$loop: results differ with and without the preload; running it again without"
			run_loop "$d" plain2 "$loop"
		fi
	fi
done

# --- hook cost: native stack depth vs ns/event --------------------------------
read -r -a depths <<<"$DEPTHS"
# longer runs for the cost figures, so start-up costs do not dominate
STEPS=${DSMT_GPU_HOOK_STEPS:-$STEPS}
printf '%s\n' "${depths[@]}" >"$RES/hook.list"
for depth in "${depths[@]}"; do
	d=$RES/hook/depth-$depth
	mkdir -p "$d"
	run_loop "$d" preload transformer_ckpt "DSMEMTRACE_NATIVE_DEPTH=$depth" DSMEMTRACE_SELFTIME=1
	[ -f "$d/preload.skipped" ] && continue
	grep 'selftime:' "$d/preload.err" >"$d/selftime.txt"
	if [ -s "$d/selftime.txt" ]; then
		# one line a traced process; the loop's is the one with the most events
		say "depth $depth: $(sort -k3,3n "$d/selftime.txt" | tail -n 1)"
	else
		say "depth $depth: no selftime line on stderr"
	fi
	decode_and_compare "$d"
done

# --- summary ------------------------------------------------------------------
say "done; summary in $RES/summary.txt and $RES/summary.json"
quiet=()
[ -n "${DSMT_GPU_QUIET_SUMMARY:-}" ] && quiet=(--quiet)
"$PY" "$here/summarize.py" "$RES" "${quiet[@]}"
exit $?
