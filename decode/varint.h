/* Bounded varint decoding for the reader.  Every read checks the end of the
 * buffer; a varint longer than 10 bytes or overflowing 64 bits is an error. */
#ifndef DSMT_DEC_VARINT_H
#define DSMT_DEC_VARINT_H

#include <stddef.h>
#include <stdint.h>

/* Status of a varint read. */
enum { DSMT_VAR_OK = 0, DSMT_VAR_END = 1, DSMT_VAR_BAD = 2 };

#define DSMT_VARINT_MAX_LEN 10

/* Read a ULEB128 from [*p, end).  On success advances *p and returns OK.
 * Returns END when *p == end (nothing to read; *v = 0) and BAD when the
 * varint runs past `end`, is longer than 10 bytes or overflows 64 bits. */
static inline int dsmt_get_uvar(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
	const uint8_t *q = *p;
	if (q >= end) {
		*v = 0;
		return DSMT_VAR_END;
	}
	uint64_t b = *q++;
	if (b < 0x80) { /* fast path: one byte */
		*v = b;
		*p = q;
		return DSMT_VAR_OK;
	}
	uint64_t r = b & 0x7f;
	unsigned shift = 7;
	for (;;) {
		if (q >= end) {
			*v = 0;
			return DSMT_VAR_BAD;
		}
		b = *q++;
		if (shift == 63) {
			/* 10th byte: only the lowest bit may be set, no continuation */
			if (b > 1) {
				*v = 0;
				return DSMT_VAR_BAD;
			}
			r |= b << 63;
			break;
		}
		r |= (b & 0x7f) << shift;
		if (b < 0x80)
			break;
		shift += 7;
	}
	*v = r;
	*p = q;
	return DSMT_VAR_OK;
}

static inline int64_t dsmt_dec_unzigzag(uint64_t v)
{
	return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}

/* A cursor over one record payload.  Fields past the end read as 0 (a payload
 * written by an older minor version); a malformed varint sets `bad`. */
struct dsmt_cur {
	const uint8_t *p, *end;
	int bad;
	int short_; /* a field was missing (payload ended early) */
};

static inline void dsmt_cur_init(struct dsmt_cur *c, const uint8_t *p, size_t n)
{
	c->p = p;
	c->end = p + n;
	c->bad = 0;
	c->short_ = 0;
}

static inline uint64_t dsmt_cur_u_slow(struct dsmt_cur *c)
{
	uint64_t v;
	int st = dsmt_get_uvar(&c->p, c->end, &v);
	if (st != DSMT_VAR_OK) {
		if (st == DSMT_VAR_BAD) {
			c->bad = 1;
			c->p = c->end;
		} else {
			c->short_ = 1;
		}
		return 0;
	}
	return v;
}

static inline uint64_t dsmt_cur_u(struct dsmt_cur *c)
{
	const uint8_t *p = c->p;
	if (__builtin_expect(c->end - p >= DSMT_VARINT_MAX_LEN, 1)) {
		/* at least 10 bytes left: no end checks inside the varint */
		uint64_t b = p[0];
		if (b < 0x80) {
			c->p = p + 1;
			return b;
		}
		uint64_t r = b & 0x7f;
		for (unsigned i = 1; i < 9; i++) {
			b = p[i];
			r |= (b & 0x7f) << (7 * i);
			if (b < 0x80) {
				c->p = p + i + 1;
				return r;
			}
		}
		b = p[9];
		if (b > 1) {
			c->bad = 1;
			c->p = c->end;
			return 0;
		}
		c->p = p + 10;
		return r | b << 63;
	}
	return dsmt_cur_u_slow(c);
}

static inline int64_t dsmt_cur_s(struct dsmt_cur *c) { return dsmt_dec_unzigzag(dsmt_cur_u(c)); }

/* A string field: returns its bytes (not NUL-terminated) and length; a length
 * beyond the payload end is malformed. */
static inline const uint8_t *dsmt_cur_str(struct dsmt_cur *c, size_t *len)
{
	uint64_t n = dsmt_cur_u(c);
	if (c->bad || n > (uint64_t)(c->end - c->p)) {
		if (!c->bad && n)
			c->bad = 1;
		c->p = c->end;
		*len = 0;
		return (const uint8_t *)"";
	}
	const uint8_t *s = c->p;
	c->p += n;
	*len = (size_t)n;
	return s;
}

#endif
