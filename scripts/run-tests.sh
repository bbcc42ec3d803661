#!/usr/bin/env bash
# README command 2: install what is missing, build, run the whole test suite
# (unit, decode, preload; gpu is skipped where no GPU is).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/ensure-deps.sh"
cd "$dsmt_root"
build=${DSMT_BUILD_DIR:-build}
dsmt_build "$build"
"$MESON" test -C "$build" --print-errorlogs --num-processes "$(nproc)" "$@"
