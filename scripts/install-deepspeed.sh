#!/usr/bin/env bash
# On the GPU host: install the wheels and the DeepSpeed sdist staged by
# scripts/stage-deepspeed.sh into /tmp/site (no network, no ops built).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
[ -d .whl ] || { echo "install-deepspeed: .whl missing (run scripts/stage-deepspeed.sh here and carry .whl)"; exit 1; }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
DS_BUILD_OPS=0 DS_SKIP_CUDA_CHECK=1 python3 -m pip install -q --no-index --no-deps --no-build-isolation \
	--no-cache-dir --target /tmp/site .whl/deepspeed-*.tar.gz
python3 -c 'import deepspeed, torch; print("deepspeed", deepspeed.__version__, "torch", torch.__version__)'
