/* The recording engine: no CUDA in here.  Hooks (interpose/) call the
 * dsmt_ev_* functions; each copies a fixed-size record into the calling
 * thread's ring buffer and returns.  A writer thread, started at the first
 * allocation event, drains the rings, encodes records (format.h) and writes
 * zstd frames.
 *
 * Hot-path contract: no locks, no I/O, no malloc, no Python, constant work
 * apart from the optional native stack capture. */
#ifndef DSMT_TRACER_H
#define DSMT_TRACER_H

#include <stddef.h>
#include <stdatomic.h>
#include <stdint.h>

#define DSMT_HIDDEN __attribute__((visibility("hidden")))
#define DSMT_EXPORT __attribute__((visibility("default")))
#define DSMT_TLS __attribute__((tls_model("initial-exec")))

#define DSMT_MAX_DEPTH 64
/* native frames captured per event unless DSMEMTRACE_NATIVE_DEPTH says otherwise;
 * chosen by measurement, see docs/decisions.md */
#define DSMT_DEFAULT_NATIVE_DEPTH 0

struct dsmt_config {
	char dir[1024];       /* DSMEMTRACE_DIR, default "." */
	unsigned flush_ms;    /* DSMEMTRACE_FLUSH_MS, default 200 */
	int native_depth;     /* DSMEMTRACE_NATIVE_DEPTH */
	int selftime;         /* DSMEMTRACE_SELFTIME=1: time spent in hooks */
	int stack_cache;      /* DSMEMTRACE_STACK_CACHE (default 0): reuse a thread's native stack for a
			       * repeated (call site, Python stack, stack position); 1 in 64 repeats unwound */
	int nvtx_frames;      /* DSMEMTRACE_NVTX_FRAMES (default 0): NVTX push/start/mark carry the
			       * caller's Python frames (no report reads them; ~420 ns a push in torch) */
	int stack_check;      /* DSMEMTRACE_STACK_CHECK=1 (benchmarks): unwind every event in full as
			       * well and count the recorded stacks that equal it (report at exit) */
	size_t ring_bytes;    /* DSMEMTRACE_BUFFER_KB * 1024: first segment per thread */
	uint64_t max_buffer_bytes; /* DSMEMTRACE_MAX_BUFFER_MB: all segments together */
	int disabled;         /* DSMEMTRACE_DISABLE=1, or a fatal condition */
	int toggle_signal;    /* DSMEMTRACE_TOGGLE_SIGNAL, 0 = none */
	unsigned file_mode;   /* DSMEMTRACE_FILE_MODE (octal), default 0600 */
	int secure;           /* AT_SECURE (setuid/setgid...): the library does nothing */
	char self_path[4096]; /* absolute path of this library */
	uint64_t start_mono_ns, start_real_ns;
};

DSMT_HIDDEN extern struct dsmt_config dsmt_cfg;
/* Recursion guard: non-zero while a hook records, and for good on our threads. */
DSMT_HIDDEN extern __thread int dsmt_in_hook DSMT_TLS;

DSMT_HIDDEN void dsmt_config_init(void);
DSMT_HIDDEN uint64_t dsmt_now_ns(void);
/* DSMEMTRACE_SELFTIME: adds the time since t0 to the NVTX handlers' total */
DSMT_HIDDEN void dsmt_selftime_nvtx(uint64_t t0);
DSMT_HIDDEN void dsmt_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Python frames (format 1.2 trailing pystack field).  The *_py event
 * functions take `py`: 0 none, DSMT_PY_NOGIL (the hook never holds the GIL:
 * allocator, driver, runtime), DSMT_PY_GIL (it may: NVTX handlers, where the
 * frame layout can be checked).  With py != 0 the event calls dsmt_py_hook
 * (set by interpose/pyframes.c; NULL when it is not linked in) after the
 * selftime clock started and before the event is stamped; it returns the
 * PYSTACK id of the calling thread's Python frames, 0 for none. */
enum { DSMT_PY_NONE = 0, DSMT_PY_NOGIL = 1, DSMT_PY_GIL = 2, DSMT_PY_GIL_CHECK = 3 };
/* DSMT_PY_GIL_CHECK: an NVTX handler that records no frames
 * (DSMEMTRACE_NVTX_FRAMES=0) but may still hold the GIL: the frame layout
 * check runs there as with DSMT_PY_GIL; the hook returns 0. */
DSMT_HIDDEN extern uint32_t (*dsmt_py_hook)(int py);
/* For dsmt_py_hook, on the hooked thread: the PYSTACK id this thread cached
 * under hash h (0: none); define writes a PYSTACK record of n (code_id,
 * instr) pairs into the thread's ring, caches it under h and returns its id
 * (0: no room).  dsmt_pycode_define writes a PYCODE record (id chosen by the
 * caller); 0 on success. */
DSMT_HIDDEN uint32_t dsmt_pystack_cached(uint64_t h);
DSMT_HIDDEN uint32_t dsmt_pystack_define(uint64_t h, const uint32_t *pairs, unsigned n);
DSMT_HIDDEN int dsmt_pycode_define(uint32_t id, const char *file, uint32_t file_len, const char *qual,
				   uint32_t qual_len, uint32_t firstlineno, const uint8_t *lt, uint32_t lt_len,
				   uint32_t pyver);

/* Events.  `site` is the return address of the hooked function (its caller).
 * tot: NULL or {total_allocated, total_reserved} as the allocator reports. */
DSMT_HIDDEN void dsmt_ev_mem_py(uint8_t rec, uint8_t api, int dev, uint64_t ptr, uint64_t size,
				uint64_t stream, const void *site, const uint64_t *tot, int py);
DSMT_HIDDEN void dsmt_ev_oom_py(int dev, uint64_t size, uint64_t tot_alloc, uint64_t tot_reserved,
				const void *site, int py);
/* Driver level (format.h DSMT_REC_DRV): op is enum dsmt_drv_op, via DSMT_VIA_*
 * (| DSMT_VIA_UNDER_RT).  A hand-over of driver-level recording to `via`
 * (0: none) for `reason` (enum dsmt_src_reason); name: string id or 0.
 * SOURCE is recorded even while paused (a hand-over is state, not an event). */
DSMT_HIDDEN void dsmt_ev_drv_py(uint8_t op, uint8_t via, int dev, uint64_t ptr, uint64_t size, uint64_t aux,
				const void *site, int py);
DSMT_HIDDEN void dsmt_ev_source(uint8_t via, uint8_t reason, uint32_t name);
/* NVTX: rec is DSMT_REC_NVTX_*; domain/name are string ids (0 = none). */
DSMT_HIDDEN void dsmt_ev_nvtx_py(uint8_t rec, uint32_t domain, uint32_t name, uint64_t range_id, int py);

/* the same without Python frames */
static inline void dsmt_ev_mem(uint8_t rec, uint8_t api, int dev, uint64_t ptr, uint64_t size, uint64_t stream,
			       const void *site, const uint64_t *tot)
{
	dsmt_ev_mem_py(rec, api, dev, ptr, size, stream, site, tot, DSMT_PY_NONE);
}
static inline void dsmt_ev_oom(int dev, uint64_t size, uint64_t tot_alloc, uint64_t tot_reserved, const void *site)
{
	dsmt_ev_oom_py(dev, size, tot_alloc, tot_reserved, site, DSMT_PY_NONE);
}
static inline void dsmt_ev_drv(uint8_t op, uint8_t via, int dev, uint64_t ptr, uint64_t size, uint64_t aux,
			       const void *site)
{
	dsmt_ev_drv_py(op, via, dev, ptr, size, aux, site, DSMT_PY_NONE);
}
static inline void dsmt_ev_nvtx(uint8_t rec, uint32_t domain, uint32_t name, uint64_t range_id)
{
	dsmt_ev_nvtx_py(rec, domain, name, range_id, DSMT_PY_NONE);
}

/* Pause/resume (process-wide).  While paused, hooks only forward. */
DSMT_HIDDEN extern _Atomic int dsmt_paused;
DSMT_HIDDEN void dsmt_pause(void);
DSMT_HIDDEN void dsmt_resume(void);
/* Latest allocator totals per device, kept even while paused. */
DSMT_HIDDEN void dsmt_note_totals(int dev, uint64_t tot_alloc, uint64_t tot_reserved);
/* Async-signal-safe: asks for a pause/resume toggle (DSMEMTRACE_TOGGLE_SIGNAL). */
DSMT_HIDDEN void dsmt_toggle_request(void);
/* Writer thread: carries out the toggles asked for since its last wake-up. */
DSMT_HIDDEN void dsmt_toggle_apply(void);

/* Interns a string for the calling thread; returns its id (>0), 0 on failure. */
DSMT_HIDDEN uint32_t dsmt_intern(const char *s, size_t n);

/* native stacks (unwind.c) */
DSMT_HIDDEN int dsmt_unwind_init(void); /* 0 if available; writer thread only */
DSMT_HIDDEN extern _Atomic int dsmt_unwind_ready;
DSMT_HIDDEN int dsmt_backtrace(void **ips, int max);
/* the Python interpreter's text (0, 0: none found), known once unwind is ready */
DSMT_HIDDEN extern uintptr_t dsmt_interp_lo, dsmt_interp_hi;

/* nvml.c, writer thread only: one call of emit per visible device */
DSMT_HIDDEN void dsmt_nvml_sample(void (*emit)(int dev, unsigned flags, uint64_t proc, uint64_t used,
					       uint64_t total));

/* writer.c */
/* Called at exit before the writer's last drain, on the exiting thread,
 * while CUDA is still up (the writer's atexit handler was registered after
 * cuInit): CUPTI delivers the activity records it still holds. */
DSMT_HIDDEN extern void (*dsmt_before_final_drain)(void);
DSMT_HIDDEN void dsmt_writer_start(void);
DSMT_HIDDEN void dsmt_writer_wake(void);
/* a HOST sample at the writer's next cycle, which this wakes (step boundaries) */
DSMT_HIDDEN void dsmt_host_sample_soon(void);
DSMT_HIDDEN void dsmt_writer_stop(void);
DSMT_HIDDEN int dsmt_writer_started(void);
/* Async-signal-safe: asks the writer to write out everything recorded so far
 * and waits for it at most timeout_ms; 0 when done. */
DSMT_HIDDEN int dsmt_writer_flush_sync(int timeout_ms);
DSMT_HIDDEN int dsmt_is_writer_thread(void);

/* signals.c: flush on fatal signals, chained to the previous handlers */
DSMT_HIDDEN void dsmt_signals_install(void);
DSMT_HIDDEN void dsmt_toggle_signal_install(void);

#endif
