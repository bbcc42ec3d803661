/* Trace file reader: maps the file, checks the header frame and hands out the
 * decompressed record stream of each data frame in file order.  Data frames
 * are decompressed against the history of the ones before them (format.h,
 * META zstd_prefix_bytes): each frame is decompressed right behind the last
 * zstd_prefix_bytes of earlier content in one window buffer, which is slid
 * back to its start when full. */
#ifndef DSMT_DEC_READER_H
#define DSMT_DEC_READER_H

#include <stddef.h>
#include <stdint.h>

#include "varint.h"

#define DSMT_FRAME_MAX ((size_t)256 << 20) /* largest decompressed frame accepted */
/* Record streams handed out (header and frames) are followed by this many
 * readable zero bytes, so record parsers may over-read a little. */
#define DSMT_FRAME_PAD 128

/* dsmt_reader_open results */
enum dsmt_open_err {
	DSMT_OPEN_OK = 0,
	DSMT_OPEN_IO,      /* missing, unreadable, not a regular file */
	DSMT_OPEN_EMPTY,   /* zero bytes */
	DSMT_OPEN_MAGIC,   /* not a dsmemtrace trace */
	DSMT_OPEN_VERSION, /* newer major version */
	DSMT_OPEN_HEADER,  /* header cut short or malformed */
};

/* dsmt_reader_next results */
enum dsmt_next {
	DSMT_NEXT_FRAME = 1, /* a data frame's records are in *buf (valid until the next call) */
	DSMT_NEXT_END = 0,   /* clean end of file */
	DSMT_NEXT_TRUNC = -1,   /* last frame incomplete: msg/fail_off say where */
	DSMT_NEXT_DAMAGED = -2, /* bad data: msg/fail_off say where */
};

struct dsmt_reader {
	const char *path;
	const uint8_t *data;
	size_t size;
	int mapped;
	unsigned major, minor;
	uint8_t *hdr; /* header record stream (META records), a padded copy */
	size_t hdr_len;
	size_t prefix_max;   /* META zstd_prefix_bytes (0: independent frames) */
	size_t off;          /* offset of the next frame */
	size_t dropped;      /* mapped bytes before this were given back (madvise) */
	size_t frame_off;    /* offset of the frame last returned */
	unsigned frame_idx;  /* data frames returned so far = number of the last one (1..) */
	unsigned last_good;  /* number of the last complete data frame (0: none) */
	size_t fail_off;     /* where truncation/damage begins */
	void *dctx;
	uint8_t *win;        /* history, then the frame last returned, then padding */
	size_t win_cap;      /* bytes allocated (padding included) */
	size_t win_used;     /* end of the frame last returned */
	size_t hist_len;     /* bytes of history before win + win_used: min(prefix_max, total) */
	size_t guess;        /* room tried first for a frame of unknown content size */
	char msg[256];
};

int dsmt_reader_open(struct dsmt_reader *r, const char *path);
/* Rewind to the first data frame (for a second pass). */
void dsmt_reader_rewind(struct dsmt_reader *r);
int dsmt_reader_next(struct dsmt_reader *r, const uint8_t **buf, size_t *len);
void dsmt_reader_close(struct dsmt_reader *r);

/* Record framing: u8 type, uleb128 len, payload.  Returns 1 (record), 0 (end
 * of stream) or -1 (malformed: bad varint or len past the end). */
static inline int dsmt_next_record(const uint8_t **p, const uint8_t *end, unsigned *type,
				   const uint8_t **payload, size_t *len)
{
	const uint8_t *q = *p;
	if (q >= end)
		return 0;
	*type = *q++;
	uint64_t n;
	if (dsmt_get_uvar(&q, end, &n) != DSMT_VAR_OK)
		return -1;
	if (n > (uint64_t)(end - q))
		return -1;
	*payload = q;
	*len = (size_t)n;
	*p = q + n;
	return 1;
}

#endif
