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
