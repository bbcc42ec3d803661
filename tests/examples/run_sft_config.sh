#!/bin/sh
# Runs sft_config.py with python3; skipped (77) where there is none.
command -v python3 >/dev/null 2>&1 || { echo "no python3: skipped"; exit 77; }
exec python3 "$(dirname "$0")/sft_config.py" "$@"
