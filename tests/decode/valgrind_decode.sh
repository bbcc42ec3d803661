#!/bin/sh
# dsmemdecode under valgrind (memcheck) for the valgrind suite: any invalid
# read or write, use of uninitialised memory or definite leak makes it exit
# 99, which the decode tests count as a failure.  DSMT_VG_DECODER: the
# decoder (set by tests/decode/meson.build).
exec valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite \
	--show-leak-kinds=definite "$DSMT_VG_DECODER" "$@"
