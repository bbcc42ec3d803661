/* Per-thread single-producer/single-consumer byte rings.
 *
 * Ring record layout (host order, 8-byte aligned):
 *   u32 kind | u32 len | payload[len] | pad to 8
 * The producer (the hooked thread) reserves, fills and publishes with one
 * release store of `head`; the consumer (the writer thread) reads up to an
 * acquire load of `head` and releases space by storing `tail`. */
#ifndef DSMT_RING_H
#define DSMT_RING_H

#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>

#include "tracer.h"

enum dsmt_rkind {
	DSMT_R_PAD = 0,    /* skip to the end of the buffer */
	DSMT_R_TID = 1,    /* u32 tid: the thread that owns the ring from here on */
	DSMT_R_EVENT = 2,  /* struct dsmt_ev */
	DSMT_R_STRING = 3, /* u32 id, bytes */
	DSMT_R_STACK = 4,  /* u32 id, u32 n, u64 ip[n] */
	DSMT_R_PYCODE = 5, /* u32 id, firstlineno, pyver, file_len, qual_len, lt_len, then the bytes */
	DSMT_R_PYSTACK = 6, /* u32 id, u32 n, n x (u32 code_id, u32 instr) */
};

struct dsmt_rhdr {
	uint32_t kind, len;
};

/* A fixed-size event as a hook writes it; the writer encodes it (format.h). */
struct dsmt_ev {
	uint8_t rec;  /* DSMT_REC_* */
	uint8_t api;  /* DSMT_API_* */
	int16_t dev;  /* -1 unknown */
	uint32_t stack;
	uint64_t seq, ts; /* ts: CLOCK_MONOTONIC ns */
	uint64_t ptr, size, stream, site;
	uint64_t a, b; /* tot_alloc/tot_reserved, or domain/name for NVTX */
	uint64_t c;    /* NVTX range id, LOST count */
	uint8_t has_tot;
	uint32_t pystack; /* PYSTACK id, 0 = none (fits the tail padding: 88 bytes either way) */
};

enum { DSMT_RING_FREE = 0, DSMT_RING_LIVE = 1, DSMT_RING_RETIRED = 2 };

/* One buffer of a ring.  When it is full the producer does not wait for the
 * writer and does not drop: it links a segment twice the size (up to
 * DSMEMTRACE_MAX_BUFFER_MB in all) and goes on there; the writer frees a
 * drained segment once a successor exists. */
struct dsmt_seg {
	uint8_t *buf;
	uint64_t cap; /* power of two */
	_Atomic uint64_t head, tail;
	struct dsmt_seg *_Atomic next; /* set by the producer after its last commit here */
};

struct stack_chk { /* DSMEMTRACE_STACK_CHECK: the frames behind each stack cache slot */
	void *ips[1024][DSMT_MAX_DEPTH];
	uint8_t n[1024];
};

struct dsmt_ring {
	struct dsmt_ring *next; /* global list, append-only */
	_Atomic int state;
	struct dsmt_seg *prod;          /* producer's segment */
	struct dsmt_seg *_Atomic cons;  /* consumer's segment */
	uint64_t lost; /* producer only: events dropped since the last LOST record */
	_Atomic int wake_sent;
	/* producer-side intern caches (direct mapped) */
	uint64_t str_hash[256];
	uint32_t str_id[256];
	uint64_t stk_hash[1024];
	uint32_t stk_id[1024];
	uint64_t pys_hash[512]; /* Python stacks (interpose/pyframes.c) */
	uint32_t pys_id[512];
	/* native stack cache (tracer.c stack_id): key (site, Python stack, stack
	 * position) -> the hash and id of the stack last unwound for it */
	uint64_t nat_key[1024], nat_hash[1024];
	uint32_t nat_id[1024], nat_hits[1024];
	struct stack_chk *chk; /* DSMEMTRACE_STACK_CHECK only */
	/* consumer-side */
	uint32_t tid;
};

DSMT_HIDDEN extern struct dsmt_ring *_Atomic dsmt_rings;
DSMT_HIDDEN extern _Atomic uint64_t dsmt_buffer_bytes; /* all segments */
DSMT_HIDDEN void dsmt_seg_free(struct dsmt_seg *s);
DSMT_HIDDEN extern _Atomic uint64_t dsmt_seq;

#endif
