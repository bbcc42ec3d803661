# The hook configurations measured by hook_speed.sh and hook_instr.sh
# (sourced): name -> environment.  `-u`: every event unwound (stack cache off);
# all* and default: with NVTX ranges (hook_speed_victim.py through
# libnvtxshim); default: as shipped (Python frames, native depth 0).
declare -A env=(
	[off]="DSMEMTRACE_NATIVE_DEPTH=0 DSMEMTRACE_PY_DEPTH=0"
	[native]="DSMEMTRACE_NATIVE_DEPTH=32 DSMEMTRACE_PY_DEPTH=0 DSMEMTRACE_STACK_CACHE=1"
	[native-u]="DSMEMTRACE_NATIVE_DEPTH=32 DSMEMTRACE_PY_DEPTH=0 DSMEMTRACE_STACK_CACHE=0"
	[python]="DSMEMTRACE_NATIVE_DEPTH=0 DSMEMTRACE_PY_DEPTH=32"
	[all]="DSMEMTRACE_NATIVE_DEPTH=32 DSMEMTRACE_PY_DEPTH=32 DSMEMTRACE_STACK_CACHE=1"
	[all-u]="DSMEMTRACE_NATIVE_DEPTH=32 DSMEMTRACE_PY_DEPTH=32 DSMEMTRACE_STACK_CACHE=0"
	[default]="DSMEMTRACE_NATIVE_DEPTH=0 DSMEMTRACE_PY_DEPTH=32"
	[all-nvtxpy]="DSMEMTRACE_NATIVE_DEPTH=32 DSMEMTRACE_PY_DEPTH=32 DSMEMTRACE_STACK_CACHE=1 DSMEMTRACE_NVTX_FRAMES=1"
)
# DSMT_HOOK_CONFIGS (space-separated names) picks some; all-nvtxpy: NVTX
# pushes with the caller's Python frames as before 2026-11-30 14:30 UTC
read -r -a configs <<<"${DSMT_HOOK_CONFIGS:-off native native-u python all all-u all-nvtxpy default}"
