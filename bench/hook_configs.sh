# The hook configurations measured by hook_speed.sh and hook_instr.sh
# (sourced): name -> environment.  `-u`: every event unwound (stack cache off).
declare -A env=(
	[off]="DSMEMTRACE_NATIVE_DEPTH=0 DSMEMTRACE_PY_DEPTH=0"
	[native]="DSMEMTRACE_NATIVE_DEPTH=32 DSMEMTRACE_PY_DEPTH=0 DSMEMTRACE_STACK_CACHE=1"
	[native-u]="DSMEMTRACE_NATIVE_DEPTH=32 DSMEMTRACE_PY_DEPTH=0 DSMEMTRACE_STACK_CACHE=0"
	[python]="DSMEMTRACE_NATIVE_DEPTH=0 DSMEMTRACE_PY_DEPTH=32"
	[all]="DSMEMTRACE_NATIVE_DEPTH=32 DSMEMTRACE_PY_DEPTH=32 DSMEMTRACE_STACK_CACHE=1"
	[all-u]="DSMEMTRACE_NATIVE_DEPTH=32 DSMEMTRACE_PY_DEPTH=32 DSMEMTRACE_STACK_CACHE=0"
)
configs=(off native native-u python all all-u)
