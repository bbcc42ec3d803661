# Sourced by scripts/run-example.sh and scripts/run-tests.sh: makes sure the
# build dependencies are present on a Debian or Ubuntu machine, installing
# what is missing with apt-get when run as root, else saying exactly what to
# install.  Exports MESON, NINJA and CUDA_HOME for the caller.
#
# Optional: libdw-dev (elfutils), for function names and file:line in
# dsmemdecode; installed with the rest as root, else named and skipped.
#
# CUDA headers (cuda_runtime_api.h, nvtx3/) are needed at build time only.
# Without a toolkit ($CUDA_HOME, /usr/local/cuda) they come from NVIDIA's pip
# wheels (nvidia-cuda-runtime, nvidia-nvtx, nvidia-cuda-cupti), unpacked under .deps/.

dsmt_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

dsmt_die() { echo "dsmemtrace setup: $*" >&2; exit 1; }

dsmt_missing_pkgs() {
	local m=()
	command -v gcc >/dev/null || m+=(gcc)
	command -v pkg-config >/dev/null || m+=(pkg-config)
	command -v ninja >/dev/null || m+=(ninja-build)
	command -v python3 >/dev/null || m+=(python3)
	command -v nm >/dev/null || m+=(binutils)
	command -v zstd >/dev/null || m+=(zstd)
	[ -f /usr/include/zstd.h ] || m+=(libzstd-dev)
	if ! command -v meson >/dev/null; then m+=(meson); fi
	[ ${#m[@]} -eq 0 ] || printf '%s\n' "${m[@]}"
}

dsmt_install() {
	local pkgs=() p
	for p in "$@"; do [ -n "$p" ] && pkgs+=("$p"); done
	[ ${#pkgs[@]} -eq 0 ] && return 0
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
		echo "dsmemtrace setup: installing ${pkgs[*]}" >&2
		DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null &&
			DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${pkgs[@]}" >/dev/null ||
			dsmt_die "apt-get install ${pkgs[*]} failed"
	else
		dsmt_die "missing: ${pkgs[*]}. Install them with: sudo apt-get install -y ${pkgs[*]}"
	fi
}

# Optional: elfutils libdw gives dsmemdecode function names and file:line for
# native stacks (without it: module+offset).  Installed along with the rest
# when we can install (root with apt-get), else named and skipped.
dsmt_missing_optional() {
	if [ ! -f /usr/include/elfutils/libdwfl.h ] && ! pkg-config --exists libdw 2>/dev/null; then
		echo libdw-dev
	fi
	# the test command's sanitizer and fuzz jobs (scripts/run-tests.sh):
	# clang with libFuzzer (Debian: libclang-rt-14-dev), valgrind
	if [ -n "${DSMT_WANT_TEST_TOOLS:-}" ]; then
		command -v clang >/dev/null || echo clang
		if command -v clang >/dev/null && ! echo 'int LLVMFuzzerTestOneInput(const char*d,unsigned long n){return 0;}' |
			clang -x c -fsanitize=fuzzer -o /dev/null - 2>/dev/null; then
			echo "libclang-rt-$(clang -dumpversion | cut -d. -f1)-dev"
		elif ! command -v clang >/dev/null; then
			echo libclang-rt-14-dev
		fi
		command -v valgrind >/dev/null || echo valgrind
	fi
}

mapfile -t _dsmt_pkgs < <(dsmt_missing_pkgs)
mapfile -t _dsmt_opt < <(dsmt_missing_optional)
if [ ${#_dsmt_opt[@]} -gt 0 ]; then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
		_dsmt_pkgs+=("${_dsmt_opt[@]}")
	else
		echo "dsmemtrace setup: optional ${_dsmt_opt[*]} not installed (libdw-dev: dsmemdecode shows module+offset" \
			"instead of function and file:line; clang, libclang-rt-*-dev, valgrind: the test command skips its" \
			"fuzz and valgrind jobs); to get them: sudo apt-get install -y ${_dsmt_opt[*]}" >&2
	fi
fi
dsmt_install "${_dsmt_pkgs[@]}"

# meson >= 1.0 (Debian 12 ships 1.0.1; Ubuntu 22.04's 0.61 is too old: use a venv)
MESON=meson
NINJA=ninja
_mv=$(meson --version 2>/dev/null || echo 0)
if [ "${_mv%%.*}" -lt 1 ]; then
	if [ ! -x "$dsmt_root/.deps/venv/bin/meson" ]; then
		python3 -m venv "$dsmt_root/.deps/venv" 2>/dev/null || dsmt_install python3-venv
		[ -x "$dsmt_root/.deps/venv/bin/pip" ] || python3 -m venv "$dsmt_root/.deps/venv" ||
			dsmt_die "cannot create a venv for meson >= 1.0"
		"$dsmt_root/.deps/venv/bin/pip" install -q 'meson>=1.0' ninja ||
			dsmt_die "pip install meson failed (meson $_mv is older than 1.0)"
	fi
	MESON=$dsmt_root/.deps/venv/bin/meson
	NINJA=$dsmt_root/.deps/venv/bin/ninja
fi

# CUDA headers
if [ -z "${CUDA_HOME:-}" ]; then
	_pyn=$(python3 -c 'import nvidia, os; print(os.path.join(list(nvidia.__path__)[0], "cu13"))' 2>/dev/null || true)
	for d in /usr/local/cuda "$dsmt_root/.deps/cuda/nvidia/cu13" ${_pyn:+"$_pyn"}; do
		if [ -f "$d/include/nvtx3/nvToolsExt.h" ] && [ -f "$d/include/cuda_runtime_api.h" ] &&
			[ -f "$d/include/cupti.h" ]; then
			CUDA_HOME=$d
			break
		fi
	done
fi
if [ -z "${CUDA_HOME:-}" ]; then
	echo "dsmemtrace setup: no CUDA headers found; fetching NVIDIA's header wheels into .deps/cuda" >&2
	python3 -m pip --version >/dev/null 2>&1 || dsmt_install python3-pip
	mkdir -p "$dsmt_root/.deps/wheels" "$dsmt_root/.deps/cuda"
	python3 -m pip download -q --no-deps --only-binary=:all: --platform manylinux2014_x86_64 \
		--platform manylinux_2_25_x86_64 --python-version 3.12 -d "$dsmt_root/.deps/wheels" \
		'nvidia-cuda-runtime==13.0.96' 'nvidia-nvtx==13.0.85' 'nvidia-cuda-cupti==13.0.85' ||
		dsmt_die "could not download the CUDA header wheels; install the CUDA toolkit headers and set CUDA_HOME"
	for w in "$dsmt_root"/.deps/wheels/*.whl; do
		python3 -m zipfile -e "$w" "$dsmt_root/.deps/cuda" || dsmt_die "cannot unpack $w"
	done
	CUDA_HOME=$dsmt_root/.deps/cuda/nvidia/cu13
fi
[ -f "$CUDA_HOME/include/nvtx3/nvToolsExt.h" ] || dsmt_die "CUDA_HOME=$CUDA_HOME has no include/nvtx3/nvToolsExt.h"
export CUDA_HOME MESON NINJA

# dsmt_build BUILD_DIR [meson options...]: configure once, then build
dsmt_build() {
	local b=$1
	shift
	if [ ! -f "$b/build.ninja" ]; then
		"$MESON" setup "$b" "$dsmt_root" -Dtoolkit_dir="$CUDA_HOME" "$@" >/dev/null ||
			dsmt_die "meson setup failed (see $b/meson-logs/meson-log.txt)"
	fi
	"$NINJA" -C "$b" >/dev/null || "$NINJA" -C "$b" || dsmt_die "build failed"
}

# dsmt_build_targets BUILD_DIR "TARGETS" [meson options...]: configure once,
# then build only those targets
dsmt_build_targets() {
	local b=$1 t=$2
	shift 2
	if [ ! -f "$b/build.ninja" ]; then
		"$MESON" setup "$b" "$dsmt_root" -Dtoolkit_dir="$CUDA_HOME" "$@" >/dev/null ||
			dsmt_die "meson setup failed (see $b/meson-logs/meson-log.txt)"
	fi
	# shellcheck disable=SC2086
	"$NINJA" -C "$b" $t >/dev/null || "$NINJA" -C "$b" $t || dsmt_die "build failed"
}
