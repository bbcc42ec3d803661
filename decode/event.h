/* A decoded event, as held in the reorder buffer (48 bytes). */
#ifndef DSMT_DEC_EVENT_H
#define DSMT_DEC_EVENT_H

#include <stdint.h>

enum {
	DSMT_EVF_TOT = 1, /* a torch ALLOC/FREE: `tot` is the allocator's tot_alloc */
	DSMT_EVF_RES = 2, /* a torch ALLOC/FREE in the replay: `x` is its tot_reserved */
};

struct dsmt_event {
	uint64_t ts;
	uint64_t ptr;  /* ALLOC/FREE: ptr; NVTX: domain id */
	uint64_t size; /* ALLOC/FREE/OOM: size; NVTX START/END: range_id; LOST: count */
	uint64_t x;    /* ALLOC/FREE/OOM: site (torch ALLOC/FREE with DSMT_EVF_RES:
			* tot_reserved); PAUSE/RESUME: tot_reserved; NVTX PUSH/START/MARK: name id */
	uint64_t tot;  /* torch ALLOC/FREE, OOM, PAUSE/RESUME: tot_alloc */
	uint32_t tidx; /* index of the thread (file-wide thread table) */
	uint8_t type;  /* record type; 0 = empty slot */
	uint8_t api;   /* ALLOC/FREE: api (clamped to 255) */
	uint8_t flags;
	uint8_t dev1;  /* device + 1, clamped: 255 = out of range */
};

#endif
