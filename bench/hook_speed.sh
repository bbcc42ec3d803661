#!/usr/bin/env bash
# Hook speed through the real preload and the stand-in allocator (no GPU):
# median steady-state ns per allocator event (DSMEMTRACE_SELFTIME, after the
# first 2 000 events; two clock reads of the measurement included) for
#   off       no stacks (native depth 0, Python frames off)
#   native    DSMEMTRACE_NATIVE_DEPTH=32 (stack cache on, the default)
#   native-u  the same, DSMEMTRACE_STACK_CACHE=0 (every event unwound)
#   python    Python frames on (depth 32), no native stack
#   all       native 32 + Python frames + NVTX context (a train_step range per
#             round, a layer range per 8 events; the NVTX handlers' own cost
#             is printed apart, per push or pop)
#   all-u     the same, DSMEMTRACE_STACK_CACHE=0
# runs rotating through the configurations (bench/hook_speed_victim.py:
# 32 000 events per run at a Python depth of 10); then the share of events
# whose recorded native stack equals a full unwind up to the first
# interpreter frame (DSMEMTRACE_STACK_CHECK=1), cache on and off.
#   Usage: bench/hook_speed.sh [BUILD_DIR [RUNS [PYTHON]]]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
B=$(cd "${1:-$root/build}" && pwd)
runs=${2:-7}
py=$(${3:-python3} -c 'import sys; print(sys.executable)') # not a pyenv shim: one process
shim=$B/tests/python/libnvtxshim.so
[ -f "$shim" ] || { echo "hook_speed: $shim not built" >&2; exit 1; }
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
echo "$(date -u '+%F %H:%M UTC'), load $(cut -d' ' -f1-3 /proc/loadavg), $("$py" -c 'import platform; print("CPython", platform.python_version())')"
source "$root/bench/hook_configs.sh"
one() { # config [extra env...] -> stderr of one run
	local c=$1
	shift
	local nv=()
	case $c in all* | default) nv=("$shim") ;; esac
	env LD_LIBRARY_PATH="$B/tests/standin" DSMEMTRACE_DIR="$t" LD_PRELOAD="$B/interpose/libdsmemtrace.so" \
		${env[$c]} "$@" "$py" "$root/bench/hook_speed_victim.py" 400 10 "${nv[@]}" 2>&1 >/dev/null
	rm -f "$t"/*.zst
}
declare -A ns nv
for r in $(seq "$runs"); do
	for i in "${!configs[@]}"; do
		c=${configs[$(((i + r) % ${#configs[@]}))]}
		out=$(one "$c" DSMEMTRACE_SELFTIME=1)
		ns[$c]+=" $(sed -n 's/.*after them \([0-9.]*\) ns\/event.*/\1/p' <<<"$out")"
		nv[$c]+=" $(sed -n 's/.*NVTX push\/pop, \([0-9.]*\) ns each.*/\1/p' <<<"$out")"
	done
done
med() { printf '%s\n' $@ | sort -g | awk 'NF {a[++n]=$1} END {if (n) print a[int((n+1)/2)]; else print "-"}'; }
printf '%-9s %14s  %s\n' config "median ns/ev" "runs (ns per allocator event; NVTX: ns per push or pop)"
for c in "${configs[@]}"; do
	printf '%-9s %14s  %s' "$c" "$(med ${ns[$c]})" "${ns[$c]# }"
	[ -n "${nv[$c]// /}" ] && printf '   NVTX median %s' "$(med ${nv[$c]})"
	echo
done
echo "stack check (native 32 + Python frames + NVTX, every event also unwound in full):"
for c in all all-u; do
	one "$c" DSMEMTRACE_STACK_CHECK=1 | sed -n 's/.*stackcheck: /  /p'
done
