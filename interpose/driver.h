/* The driver level: one description of every memory API (drvops.c), fed by
 * two mechanisms — CUPTI driver callbacks (cupti.c) and our wrappers of the
 * driver entry points (driver.c) — that hand a call's parameters over as the
 * CUPTI parameter structs of generated_cuda_meta.h, so both record exactly
 * the same event.
 *
 * Exactly-once: a call that passes through one of our wrappers is recorded
 * by CUPTI's callback if CUPTI is ours and sees it, else by the wrapper (the
 * thread-local call context below says which did).  A call that bypasses the
 * wrappers is seen by CUPTI alone. */
#ifndef DSMT_DRIVER_H
#define DSMT_DRIVER_H

#include <stdatomic.h>
#include <stdint.h>

#include "tracer.h"

/* Per-thread context of the hooked call in progress. */
struct dsmt_cc {
	const void *site; /* caller of the outermost hooked call (runtime or driver) */
	uint16_t rt;      /* > 0: inside a hooked runtime call (cudaMalloc ...) */
	uint8_t in_drv;   /* inside one of our driver wrappers */
	uint8_t done;     /* that wrapper's call has been recorded */
};
DSMT_HIDDEN extern __thread struct dsmt_cc dsmt_cc DSMT_TLS;

/* Runtime hooks bracket the real call with these (cudart.c). */
#define DSMT_RT_ENTER(site_)                                  \
	const void *rt_site_saved_ = dsmt_cc.site;            \
	if (!dsmt_cc.site)                                    \
		dsmt_cc.site = (site_);                       \
	dsmt_cc.rt++
#define DSMT_RT_LEAVE()                \
	do {                           \
		dsmt_cc.rt--;          \
		dsmt_cc.site = rt_site_saved_; \
	} while (0)

/* Is the call recorded at API enter (frees, releases, unmaps: before the
 * address can be reused) rather than at exit?  -1: not a call we record. */
DSMT_HIDDEN int dsmt_drv_at_enter(unsigned cbid);

/* Records the memory event of driver call `cbid` with CUPTI parameter struct
 * `params`.  dev: the device of the calling context, or -2 to ask the driver
 * (only when the op needs it).  Returns 1 when an event was written. */
DSMT_HIDDEN int dsmt_drv_record(unsigned cbid, const void *params, uint8_t via, int dev);

/* Driver-level mechanisms */
DSMT_HIDDEN extern _Atomic int dsmt_cupti_live; /* our CUPTI callbacks are enabled */
DSMT_HIDDEN extern int dsmt_no_dlsym;           /* DSMEMTRACE_NO_DLSYM=1 */
DSMT_HIDDEN extern int dsmt_no_cupti;           /* DSMEMTRACE_CUPTI=0 */
DSMT_HIDDEN void dsmt_driver_config(void);      /* constructor */
DSMT_HIDDEN void dsmt_cupti_lazy_init(void);    /* first driver call without injection */
/* the real dlsym (glibc's), for our own lookups */
DSMT_HIDDEN void *dsmt_real_dlsym(void *h, const char *s);
/* a function of the loaded libcuda (no wrapper), NULL if none */
DSMT_HIDDEN void *dsmt_cuda_sym(const char *name);
/* Hand-over: driver-level recording now comes from `via`. */
DSMT_HIDDEN void dsmt_source(uint8_t via, uint8_t reason, const char *name);

#endif
