/* Python frames per event (format 1.2 PYCODE/PYSTACK records and the
 * trailing pystack field), read from CPython's own frame structures on the
 * hooked thread, without the GIL and without the Python C API on the hot
 * path.  CPython 3.11 and 3.12 only; see pyframes.c. */
#ifndef DSMT_PYFRAMES_H
#define DSMT_PYFRAMES_H

#include <stdint.h>

#include "tracer.h"

/* The PYSTACK id of the calling thread's Python frames (0: none, Python
 * frames off, not a Python process, layout not yet verified).  py is
 * DSMT_PY_NOGIL or DSMT_PY_GIL (tracer.h).  Installed as dsmt_py_hook by a
 * constructor; the tracer calls it inside the event functions. */
DSMT_HIDDEN uint32_t dsmt_py_stack(int py);

#endif
