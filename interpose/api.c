/* The public marker API (include/dsmemtrace.h): weak in the user's program,
 * defined here. */
#include <string.h>

#include "format.h"
#include "preload.h"

/* Declared weak in include/dsmemtrace.h for the user's side; strong here. */
DSMT_EXPORT void dsmemtrace_mark(const char *name);
DSMT_EXPORT void dsmemtrace_mark_step(void);
DSMT_EXPORT void dsmemtrace_pause(void);
DSMT_EXPORT void dsmemtrace_resume(void);

DSMT_EXPORT void dsmemtrace_mark(const char *name)
{
	if (name)
		DSMT_RECORD(dsmt_ev_nvtx_py(DSMT_REC_NVTX_MARK, 0, dsmt_intern(name, strnlen(name, 1000)), 0,
					    DSMT_PY_GIL));
}

DSMT_EXPORT void dsmemtrace_mark_step(void) { dsmemtrace_mark("dsmemtrace:step"); }

DSMT_EXPORT void dsmemtrace_pause(void) { dsmt_pause(); }
DSMT_EXPORT void dsmemtrace_resume(void) { dsmt_resume(); }
