/* Record encoding helpers (see format.h for the layout).  Pure functions over
 * a caller-owned buffer; used by the writer thread and by test tools that
 * synthesise traces.  Never used on a hook's hot path. */
#ifndef DSMT_ENCODE_H
#define DSMT_ENCODE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define DSMT_VARINT_MAX 10

static inline size_t dsmt_put_uvar(uint8_t *p, uint64_t v)
{
	size_t n = 0;
	while (v >= 0x80) {
		p[n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	p[n++] = (uint8_t)v;
	return n;
}

static inline uint64_t dsmt_zigzag(int64_t v)
{
	return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

static inline int64_t dsmt_unzigzag(uint64_t v)
{
	return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}

/* A record under construction: payload is built in `p`, then framed by
 * dsmt_rec_finish into `out`. */
struct dsmt_recbuf {
	uint8_t p[1024 + 64 * 2 * DSMT_VARINT_MAX];
	size_t n;
};

static inline void dsmt_rb_reset(struct dsmt_recbuf *r) { r->n = 0; }
static inline void dsmt_rb_u(struct dsmt_recbuf *r, uint64_t v) { r->n += dsmt_put_uvar(r->p + r->n, v); }
static inline void dsmt_rb_s(struct dsmt_recbuf *r, int64_t v) { r->n += dsmt_put_uvar(r->p + r->n, dsmt_zigzag(v)); }
/* strings longer than the room left are truncated (callers cap at 1000) */
static inline void dsmt_rb_str(struct dsmt_recbuf *r, const void *s, size_t len)
{
	size_t room = sizeof(r->p) - r->n - DSMT_VARINT_MAX;
	if (len > room)
		len = room;
	dsmt_rb_u(r, len);
	memcpy(r->p + r->n, s, len);
	r->n += len;
}

/* Bytes needed to frame a payload of r->n bytes. */
static inline size_t dsmt_rec_size(const struct dsmt_recbuf *r) { return 1 + DSMT_VARINT_MAX + r->n; }

/* Frame the record into out; returns bytes written (out needs dsmt_rec_size). */
static inline size_t dsmt_rec_finish(uint8_t *out, uint8_t type, const struct dsmt_recbuf *r)
{
	size_t n = 0;
	out[n++] = type;
	n += dsmt_put_uvar(out + n, r->n);
	memcpy(out + n, r->p, r->n);
	return n + r->n;
}

#endif
