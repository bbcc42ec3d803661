#!/bin/sh
# dlsym_next without and with libdsmemtrace.so preloaded; with it, also the
# pass-through of its dlsym disassembled: it must end in an indirect jump.
set -eu
exe=$1 lib=$2
"$exe"
LD_PRELOAD=$lib DSMEMTRACE_DIR=${TMPDIR:-/tmp} "$exe"
if command -v objdump >/dev/null 2>&1; then
	body=$(objdump -d --no-show-raw-insn "$lib" | awk '/<dlsym>:/{f=1; next} f && /^$/{exit} f')
	echo "$body" | grep -q 'jmp  *\*%r' || { echo "FAIL: no indirect tail jump in dlsym:"; echo "$body"; exit 1; }
	if echo "$body" | grep -q 'call  *\*%r'; then
		echo "FAIL: dlsym calls the real dlsym (not a tail call):"; echo "$body"; exit 1
	fi
	echo "dlsym pass-through: tail call"
fi
