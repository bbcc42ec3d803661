#!/usr/bin/env bash
# Build dsmemtrace if needed, run a training loop under the preload, decode it.
#
#   bash examples/run_example.sh       # build dir: ./build (or $BUILD)
#
# README command 1: installs what is missing first (scripts/ensure-deps.sh:
# apt-get as root, else it says what to install).
#
# With PyTorch and a GPU (python3 -c 'import torch; assert torch.cuda.is_available()')
# it runs examples/pytorch_train.py; otherwise examples/standin_train over the
# stand-in CUDA/torch libraries the tests build.  Either prints PyTorch's own
# per-step counters first; dsmemdecode --per-step must print the same numbers.
set -eu

root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$root/build}
case $build in /*) ;; *) build=$(pwd)/$build ;; esac

# shellcheck source=../scripts/ensure-deps.sh
source "$root/scripts/ensure-deps.sh"
if [ ! -f "$build/build.ninja" ]; then
	"$MESON" setup "$build" "$root" -Dtoolkit_dir="$CUDA_HOME" >/dev/null
fi
if python3 -c 'import torch; assert torch.cuda.is_available()' >/dev/null 2>&1; then
	use_torch=1
	targets="interpose/libdsmemtrace.so decode/dsmemdecode"
else
	use_torch=
	targets="interpose/libdsmemtrace.so decode/dsmemdecode examples/standin_train
	         tests/standin/libtorchstub.so tests/standin/libcuda.so.1"
fi
# shellcheck disable=SC2086
"$NINJA" -C "$build" $targets >/dev/null

preload=$build/interpose/libdsmemtrace.so   # absolute: children may chdir
decoder=$build/decode/dsmemdecode
for f in "$preload" "$decoder"; do
	[ -e "$f" ] || { echo "run_example.sh: $f was not built" >&2; exit 1; }
done

traces=${DSMEMTRACE_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/dsmemtrace-example.XXXXXX")}
mkdir -p "$traces"

if [ -n "$use_torch" ]; then
	echo "== PyTorch on $(python3 -c 'import torch; print(torch.cuda.get_device_name(0))'), under the preload"
	LD_PRELOAD=$preload DSMEMTRACE_DIR=$traces python3 "$root/examples/pytorch_train.py" "$@"
else
	echo "== no usable PyTorch GPU: stand-in training loop, under the preload"
	LD_LIBRARY_PATH=$build/tests/standin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} \
	LD_PRELOAD=$preload DSMEMTRACE_DIR=$traces "$build/examples/standin_train" "$@"
fi

echo
echo "== dsmemdecode --per-step $traces/dsmemtrace.*.zst"
"$decoder" --per-step "$traces"/dsmemtrace.*.zst
