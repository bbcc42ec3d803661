#!/usr/bin/env bash
# README command 2: install what is missing, build, run the whole test suite
# (unit, decode, preload; gpu is skipped where no GPU is), then the same
# sources under sanitizers (issue 8; docs/decisions.md says why each where):
#   build-san   clang, ASan+UBSan: the unit and decode suites, and the
#               decoder's fuzz target for DSMT_FUZZ_SECONDS (60) from the seed
#               corpus (gcc without clang: no fuzz job, said so)
#   build-tsan  gcc, TSan: the multi-thread tests (suite threads)
#   build       valgrind on the decoder: suite valgrind
# DSMT_SANITIZERS=0 skips them; they also do not run when arguments for
# `meson test` are given (a selection of tests).
set -euo pipefail
DSMT_WANT_TEST_TOOLS=1
source "$(dirname "${BASH_SOURCE[0]}")/ensure-deps.sh"
cd "$dsmt_root"
build=${DSMT_BUILD_DIR:-build}
dsmt_build "$build"
if [ $# -gt 0 ]; then
	exec "$MESON" test -C "$build" --print-errorlogs --num-processes "$(nproc)" "$@"
fi
# everything but valgrind here (it runs below, with the sanitizer jobs)
"$MESON" test -C "$build" --print-errorlogs --num-processes "$(nproc)" --no-suite valgrind
[ "${DSMT_SANITIZERS:-1}" != 0 ] || exit 0

# UBSan stops at the first report; ASan's leak check is on (a leak fails)
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 ASAN_OPTIONS=detect_leaks=1:detect_stack_use_after_return=1
export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 DSMT_SANITIZED=1 DSMT_HOSTILE_STRIDE=16
san=${DSMT_SAN_BUILD_DIR:-build-san}
if command -v clang >/dev/null; then
	CC=clang dsmt_build "$san" -Db_sanitize=address,undefined -Db_lundef=false
else
	echo "dsmemtrace tests: clang not found: ASan+UBSan with gcc, no fuzz job (apt-get install clang libclang-rt-14-dev)" >&2
	dsmt_build "$san" -Db_sanitize=address,undefined -Db_lundef=false
fi
echo "== ASan+UBSan: unit, decode, fuzz ($san)"
"$MESON" test -C "$san" --print-errorlogs --num-processes "$(nproc)" --timeout-multiplier 3 --suite unit --suite decode --suite fuzz \
	--no-suite symbol
tsan=${DSMT_TSAN_BUILD_DIR:-build-tsan}
dsmt_build_targets "$tsan" "tests/tracer/tracer_threads decode/dsmemdecode" -Db_sanitize=thread -Db_lundef=false
echo "== TSan: threads ($tsan)"
"$MESON" test -C "$tsan" --no-rebuild --print-errorlogs --num-processes 1 --suite threads
echo "== valgrind: the decoder ($build)"
"$MESON" test -C "$build" --print-errorlogs --num-processes "$(nproc)" --suite valgrind
