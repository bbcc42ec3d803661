/* A decoded event, as held in the reorder buffer (64 bytes). */
#ifndef DSMT_DEC_EVENT_H
#define DSMT_DEC_EVENT_H

#include <stdint.h>

enum {
	DSMT_EVF_TOT = 1, /* a torch ALLOC/FREE: `tot` is the allocator's tot_alloc */
	DSMT_EVF_RES = 2, /* a torch ALLOC/FREE in the replay: `res` is its tot_reserved */
};

#define DSMT_EV_DRV_API 0x80 /* event.api of DRV records: 0x80 | op */

struct dsmt_event {
	uint64_t ts;
	uint64_t ptr;  /* ALLOC/FREE/DRV: ptr; NVTX: domain id; SOURCE: via */
	uint64_t size; /* ALLOC/FREE/OOM/DRV: size; NVTX START/END: range_id; LOST: count; SOURCE: reason */
	uint64_t x;    /* ALLOC/FREE/OOM: site; DRV: site; PAUSE/RESUME: tot_reserved; NVTX
			* PUSH/START/MARK, SOURCE: name id */
	uint64_t tot;  /* torch ALLOC/FREE, OOM, PAUSE/RESUME: tot_alloc; DRV: aux */
	uint64_t res;  /* torch ALLOC/FREE with DSMT_EVF_RES: tot_reserved */
	uint32_t stack;   /* ALLOC/FREE/OOM/DRV: STACK id (clamped: UINT32_MAX = too large) */
	uint32_t pystack; /* the trailing pystack field (format 1.2; 0: none; clamped) */
	uint32_t tidx; /* index of the thread (file-wide thread table) */
	uint8_t type;  /* record type; 0 = empty slot */
	uint8_t api;   /* ALLOC/FREE: api (clamped to 255); DRV: DSMT_EV_DRV_API | op (op > 126: 0x7f),
			* never DSMT_API_TORCH (the replay's fast-path test) */
	uint8_t flags; /* DRV: via (clamped to 255) */
	uint8_t dev1;  /* device + 1, clamped: 255 = out of range */
};

#endif
