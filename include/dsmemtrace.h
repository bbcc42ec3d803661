/* dsmemtrace public API — optional markers for programs traced with
 * LD_PRELOAD=libdsmemtrace.so.
 *
 * Every symbol is weak: a program that uses these macros runs unchanged
 * without the library (the functions resolve to NULL and the macros do
 * nothing).  From Python: ctypes.CDLL(None).dsmemtrace_mark_step() under the
 * preload.
 */
#ifndef DSMEMTRACE_H
#define DSMEMTRACE_H

#ifdef __cplusplus
extern "C" {
#endif

/* Marks a step boundary (an NVTX-like mark named "dsmemtrace:step"). */
void dsmemtrace_mark_step(void) __attribute__((weak));
/* Marks a named instant; name "dsmemtrace:step" is a step boundary. */
void dsmemtrace_mark(const char *name) __attribute__((weak));

/* Stops recording until dsmemtrace_resume(); hooks only forward meanwhile.
 * The trace marks the paused interval and the decoder resynchronises from the
 * allocator's totals.  Also toggled by the signal DSMEMTRACE_TOGGLE_SIGNAL
 * names (e.g. USR2) for programs that cannot be changed. */
void dsmemtrace_pause(void) __attribute__((weak));
void dsmemtrace_resume(void) __attribute__((weak));

#define DSMEMTRACE_PAUSE()               \
	do {                             \
		if (dsmemtrace_pause)    \
			dsmemtrace_pause(); \
	} while (0)
#define DSMEMTRACE_RESUME()               \
	do {                              \
		if (dsmemtrace_resume)    \
			dsmemtrace_resume(); \
	} while (0)

#define DSMEMTRACE_MARK_STEP()              \
	do {                                \
		if (dsmemtrace_mark_step)   \
			dsmemtrace_mark_step(); \
	} while (0)
#define DSMEMTRACE_MARK(name)                 \
	do {                                  \
		if (dsmemtrace_mark)          \
			dsmemtrace_mark(name); \
	} while (0)

#ifdef __cplusplus
}
#endif
#endif
