/* The fuzz target's records mode ('R' inputs, tests/fuzz/fuzz_decode.c):
 * a trace file built around record streams.  Input after the 'R':
 * uvar hdr_len, header records, then frames as uvar len + records.  Output:
 * a valid header frame and each frame compressed (zstd level 1, checksum,
 * no prefix).  Shared by the target and trace2rec --to-trace (which turns a
 * crashing 'R' input into the trace file kept under
 * tests/decode/fuzz-regressions/).  Included once per program. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "format.h"
#include "varint.h"

static uint8_t *dsmt_rec_built;
static size_t dsmt_rec_cap;
static ZSTD_CCtx *rec_cctx;

static int rec_reserve(size_t n, size_t len)
{
	if (n + len <= dsmt_rec_cap)
		return 0;
	size_t c = dsmt_rec_cap ? dsmt_rec_cap : 65536;
	while (c < n + len)
		c *= 2;
	uint8_t *b = realloc(dsmt_rec_built, c);
	if (!b)
		return -1;
	dsmt_rec_built = b;
	dsmt_rec_cap = c;
	return 0;
}

static int rec_put(size_t *n, const void *p, size_t len)
{
	if (rec_reserve(*n, len))
		return -1;
	memcpy(dsmt_rec_built + *n, p, len);
	*n += len;
	return 0;
}

static size_t rec_take(const uint8_t **p, const uint8_t *end)
{
	uint64_t v = 0;
	if (dsmt_get_uvar(p, end, &v) != DSMT_VAR_OK)
		*p = end;
	size_t left = (size_t)(end - *p);
	return v > left ? left : (size_t)v;
}

static size_t dsmt_rec_build(const uint8_t *p, const uint8_t *end)
{
	if (!rec_cctx) {
		rec_cctx = ZSTD_createCCtx();
		if (!rec_cctx || ZSTD_isError(ZSTD_CCtx_setParameter(rec_cctx, ZSTD_c_compressionLevel, 1)) ||
		    ZSTD_isError(ZSTD_CCtx_setParameter(rec_cctx, ZSTD_c_checksumFlag, 1)))
			abort();
	}
	size_t n = 0, hl = rec_take(&p, end);
	uint32_t magic = DSMT_SKIPPABLE_MAGIC, fsz = (uint32_t)(DSMT_MAGIC_LEN + 4 + hl);
	uint16_t major = DSMT_FORMAT_MAJOR, minor = DSMT_FORMAT_MINOR;
	if (rec_put(&n, &magic, 4) || rec_put(&n, &fsz, 4) || rec_put(&n, DSMT_MAGIC, DSMT_MAGIC_LEN) || rec_put(&n, &major, 2) ||
	    rec_put(&n, &minor, 2) || rec_put(&n, p, hl))
		abort();
	p += hl;
	while (p < end) {
		size_t fl = rec_take(&p, end);
		size_t bound = ZSTD_compressBound(fl);
		if (rec_reserve(n, bound))
			abort();
		size_t z = ZSTD_compress2(rec_cctx, dsmt_rec_built + n, dsmt_rec_cap - n, p, fl);
		if (ZSTD_isError(z))
			abort();
		n += z;
		p += fl;
	}
	return n;
}

