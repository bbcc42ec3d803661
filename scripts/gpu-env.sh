# Sourced by the GPU-host scripts (scripts/run-gpu-*.sh, bench/gpu/run.sh)
# from the repository root, after `set -uo pipefail` and the cd there:
# sets root (this tree), src (DSMT_SRC: the tree to build, default root), B
# (src/build-gpu), puts .gpu's libunwind on LD_LIBRARY_PATH (carried from
# scripts/gpu-deps.sh), and builds the library and the decoder.  Returns 1
# when the build fails.
root=$PWD
src=${DSMT_SRC:-$root}
export PYTHONUNBUFFERED=1
export LD_LIBRARY_PATH=$root/.gpu/root/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
B=$src/build-gpu
{ [ -d "$B" ] || meson setup "$B" "$src" -Dtoolkit_dir=/usr/local/cuda >/dev/null; } &&
	ninja -C "$B" interpose/libdsmemtrace.so decode/dsmemdecode >/dev/null ||
	{ echo "$(basename "$0"): building $B failed" >&2; return 1; }
