#!/usr/bin/env bash
# Stage a pinned DeepSpeed and what it needs beyond the GPU image into .whl/
# (git-ignored), for GPU hosts without network.  Run here (network), then
# carry .whl in the device call and start the command with
#   bash scripts/install-deepspeed.sh && export PYTHONPATH=/tmp/site
#
# DeepSpeed ships as an sdist whose setup.py imports torch, so it is
# installed on the GPU host (which has torch) with DS_BUILD_OPS=0 (no ops
# compiled; JIT ops are not needed for ZeRO with torch's optimizers).
# Pure-Python and binary wheels for CPython 3.12 manylinux x86-64.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
DS_VERSION=${DS_VERSION:-0.19.8}
mkdir -p .whl
rm -f .whl/deepspeed-*.tar.gz
py() { python3 -m pip download -q --no-deps -d .whl "$@"; }
py --no-binary :all: "deepspeed==$DS_VERSION"
bin=(--only-binary=:all: --python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64
	--platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64)
py "${bin[@]}" hjson 'pydantic>=2,<3' annotated-types typing-inspection
# pydantic pins its core exactly
core=$(unzip -p .whl/pydantic-2*.whl '*/METADATA' | sed -n 's/^Requires-Dist: pydantic-core==\([0-9.]*\).*/\1/p' | head -n 1)
py "${bin[@]}" "pydantic-core==$core"
ls -la .whl
tar -xzOf .whl/deepspeed-"$DS_VERSION".tar.gz "deepspeed-$DS_VERSION/requirements/requirements.txt" 2>/dev/null |
	sed 's/^/deepspeed requires: /' || true
