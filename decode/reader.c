#include "reader.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>
#include <zstd_errors.h>

#include "format.h"

static uint32_t le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint16_t le16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }

#define HDR_FIXED (8 + DSMT_MAGIC_LEN + 4) /* frame header + "DSMTRACE" + major + minor */

/* The expected first bytes of a header frame, except the 4 size bytes. */
static int header_prefix_ok(const uint8_t *p, size_t n)
{
	uint8_t m[4] = {DSMT_SKIPPABLE_MAGIC & 0xff, (DSMT_SKIPPABLE_MAGIC >> 8) & 0xff,
			(DSMT_SKIPPABLE_MAGIC >> 16) & 0xff, DSMT_SKIPPABLE_MAGIC >> 24};
	for (size_t i = 0; i < n && i < 4; i++)
		if (p[i] != m[i])
			return 0;
	for (size_t i = 8; i < n && i < 8 + DSMT_MAGIC_LEN; i++)
		if (p[i] != (uint8_t)DSMT_MAGIC[i - 8])
			return 0;
	return 1;
}

/* META zstd_prefix_bytes of the header (format.h, History): the history a
 * reader keeps.  Absent or 0: data frames are independent.  0 or -1 (not a
 * decimal number, or more than DSMT_FRAME_MAX: r->msg says so).  A header
 * whose records are malformed is left to the record walker to report. */
static int header_prefix_bytes(struct dsmt_reader *r)
{
	static const char key[] = "zstd_prefix_bytes";
	const uint8_t *p = r->hdr, *end = r->hdr + r->hdr_len, *pl;
	unsigned type;
	size_t pn;
	r->prefix_max = 0;
	while (dsmt_next_record(&p, end, &type, &pl, &pn) == 1) {
		if (type != DSMT_REC_META)
			continue;
		struct dsmt_cur cu;
		dsmt_cur_init(&cu, pl, pn);
		size_t kn, vn;
		const uint8_t *k = dsmt_cur_str(&cu, &kn);
		const uint8_t *v = dsmt_cur_str(&cu, &vn);
		if (cu.bad || kn != sizeof(key) - 1 || memcmp(k, key, kn))
			continue;
		uint64_t x = 0;
		int ok = vn > 0 && vn <= 20;
		for (size_t i = 0; ok && i < vn; i++) {
			ok = v[i] >= '0' && v[i] <= '9' && x <= (UINT64_MAX - 9) / 10;
			x = x * 10 + (uint64_t)(v[i] - '0');
		}
		if (!ok || x > DSMT_FRAME_MAX) {
			snprintf(r->msg, sizeof(r->msg), "malformed header (META zstd_prefix_bytes \"%.*s\")",
				 (int)(vn > 32 ? 32 : vn), (const char *)v);
			return -1;
		}
		r->prefix_max = (size_t)x; /* the last one counts, like every META key */
	}
	return 0;
}

int dsmt_reader_open(struct dsmt_reader *r, const char *path)
{
	memset(r, 0, sizeof(*r));
	r->path = path;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		snprintf(r->msg, sizeof(r->msg), "cannot open: %s", strerror(errno));
		return DSMT_OPEN_IO;
	}
	struct stat st;
	if (fstat(fd, &st) < 0) {
		snprintf(r->msg, sizeof(r->msg), "cannot stat: %s", strerror(errno));
		close(fd);
		return DSMT_OPEN_IO;
	}
	if (!S_ISREG(st.st_mode)) {
		snprintf(r->msg, sizeof(r->msg), "not a regular file");
		close(fd);
		return DSMT_OPEN_IO;
	}
	if (st.st_size == 0) {
		snprintf(r->msg, sizeof(r->msg), "empty file");
		close(fd);
		return DSMT_OPEN_EMPTY;
	}
	void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	if (m == MAP_FAILED) {
		snprintf(r->msg, sizeof(r->msg), "cannot map: %s", strerror(errno));
		close(fd);
		return DSMT_OPEN_IO;
	}
	close(fd);
	madvise(m, (size_t)st.st_size, MADV_SEQUENTIAL);
	r->data = m;
	r->size = (size_t)st.st_size;
	r->mapped = 1;

	const uint8_t *d = r->data;
	if (!header_prefix_ok(d, r->size)) {
		snprintf(r->msg, sizeof(r->msg), "not a dsmemtrace trace (bad magic)");
		return DSMT_OPEN_MAGIC;
	}
	if (r->size < HDR_FIXED) {
		snprintf(r->msg, sizeof(r->msg), "truncated inside the header (%zu bytes)", r->size);
		return DSMT_OPEN_HEADER;
	}
	uint32_t fsz = le32(d + 4);
	if (fsz < DSMT_MAGIC_LEN + 4) {
		snprintf(r->msg, sizeof(r->msg), "malformed header frame (payload of %u bytes)", fsz);
		return DSMT_OPEN_HEADER;
	}
	r->major = le16(d + 8 + DSMT_MAGIC_LEN);
	r->minor = le16(d + 8 + DSMT_MAGIC_LEN + 2);
	if (r->major > DSMT_FORMAT_MAJOR) {
		snprintf(r->msg, sizeof(r->msg),
			 "format version %u.%u is newer than this decoder (reads up to %d.*)", r->major,
			 r->minor, DSMT_FORMAT_MAJOR);
		return DSMT_OPEN_VERSION;
	}
	if (r->major < 1) {
		snprintf(r->msg, sizeof(r->msg), "format version %u.%u is not supported", r->major,
			 r->minor);
		return DSMT_OPEN_VERSION;
	}
	if ((uint64_t)fsz > r->size - 8) {
		snprintf(r->msg, sizeof(r->msg),
			 "truncated inside the header (frame of %u bytes, file of %zu bytes)", fsz + 8,
			 r->size);
		return DSMT_OPEN_HEADER;
	}
	r->hdr_len = fsz - (DSMT_MAGIC_LEN + 4);
	r->hdr = calloc(1, r->hdr_len + DSMT_FRAME_PAD);
	if (!r->hdr) {
		snprintf(r->msg, sizeof(r->msg), "out of memory");
		return DSMT_OPEN_IO;
	}
	memcpy(r->hdr, d + HDR_FIXED, r->hdr_len);
	if (header_prefix_bytes(r))
		return DSMT_OPEN_HEADER;
	r->off = 8 + (size_t)fsz;
	r->frame_off = 0;
	r->frame_idx = 0;
	r->last_good = 0;
	r->guess = (size_t)1 << 20;
	r->dctx = ZSTD_createDCtx();
	if (!r->dctx) {
		snprintf(r->msg, sizeof(r->msg), "out of memory");
		return DSMT_OPEN_IO;
	}
	return DSMT_OPEN_OK;
}

#define DROP_STEP ((size_t)4 << 20)

void dsmt_reader_rewind(struct dsmt_reader *r)
{
	r->off = 8 + (size_t)le32(r->data + 4);
	r->dropped = 0;
	r->frame_idx = 0;
	r->last_good = 0;
	r->frame_off = 0;
	r->fail_off = 0;
	r->win_used = 0;
	r->hist_len = 0;
	r->msg[0] = 0;
}

static int trunc_at(struct dsmt_reader *r, size_t off)
{
	r->fail_off = off;
	snprintf(r->msg, sizeof(r->msg), "truncated after frame %u, byte offset %zu", r->last_good, off);
	return DSMT_NEXT_TRUNC;
}

static int damaged_at(struct dsmt_reader *r, size_t off, const char *why)
{
	r->fail_off = off;
	snprintf(r->msg, sizeof(r->msg), "damaged at byte offset %zu (frame %u: %s)", off,
		 r->frame_idx + 1, why);
	return DSMT_NEXT_DAMAGED;
}

/* Make room for `need` bytes of output (plus padding) right after the
 * history: slide the history to the start of the window, after growing the
 * window to a few times what one frame and its history need, so that it
 * slides only every few frames.  0 or -1 (no memory). */
static int win_room(struct dsmt_reader *r, size_t need)
{
	size_t keep = r->hist_len;
	if (!r->prefix_max)
		r->win_used = 0; /* no history: every frame at the start */
	if (r->win && r->win_used + need + DSMT_FRAME_PAD <= r->win_cap)
		return 0;
	size_t want = keep + need + DSMT_FRAME_PAD;
	size_t target = want <= ((size_t)16 << 20) ? 4 * want : want <= ((size_t)64 << 20) ? 2 * want : want;
	if (!r->win || r->win_cap < target) {
		uint8_t *nw = realloc(r->win, target);
		if (!nw)
			return -1;
		r->win = nw;
		r->win_cap = target;
	}
	if (keep && r->win_used > keep)
		memmove(r->win, r->win + r->win_used - keep, keep);
	r->win_used = keep;
	return 0;
}

int dsmt_reader_next(struct dsmt_reader *r, const uint8_t **buf, size_t *len)
{
	for (;;) {
		size_t off = r->off;
		if (off >= r->size)
			return DSMT_NEXT_END;
		size_t rem = r->size - off;
		const uint8_t *p = r->data + off;
		if (rem < 4)
			return trunc_at(r, off);
		uint32_t magic = le32(p);
		if ((magic & 0xFFFFFFF0U) == ZSTD_MAGIC_SKIPPABLE_START) {
			if (rem < 8)
				return trunc_at(r, off);
			uint32_t fsz = le32(p + 4);
			if ((uint64_t)fsz > rem - 8)
				return trunc_at(r, off);
			r->off = off + 8 + fsz;
			continue; /* skippable frames after the header are ignored (not counted) */
		}
		if (magic != ZSTD_MAGICNUMBER) {
			char why[64];
			snprintf(why, sizeof(why), "unknown frame magic 0x%08x", magic);
			return damaged_at(r, off, why);
		}
		size_t csz = ZSTD_findFrameCompressedSize(p, rem);
		if (ZSTD_isError(csz)) {
			if (ZSTD_getErrorCode(csz) == ZSTD_error_srcSize_wrong)
				return trunc_at(r, off);
			return damaged_at(r, off, ZSTD_getErrorName(csz));
		}
		unsigned long long content = ZSTD_getFrameContentSize(p, csz);
		if (content == ZSTD_CONTENTSIZE_ERROR)
			return damaged_at(r, off, "bad frame header");
		if (content != ZSTD_CONTENTSIZE_UNKNOWN && content > DSMT_FRAME_MAX)
			return damaged_at(r, off, "frame larger than 256 MiB");
		int known = content != ZSTD_CONTENTSIZE_UNKNOWN;
		size_t need = known ? (size_t)content : r->guess;
		uint8_t *dst;
		size_t n;
		for (;;) {
			if (win_room(r, need))
				return damaged_at(r, off, "out of memory");
			dst = r->win + r->win_used;
			size_t cap = r->win_cap - r->win_used - DSMT_FRAME_PAD;
			ZSTD_DCtx *dctx = r->dctx;
			ZSTD_DCtx_reset(dctx, ZSTD_reset_session_only);
			if (r->prefix_max) { /* applies to this frame only */
				size_t e = ZSTD_DCtx_refPrefix(dctx, dst - r->hist_len, r->hist_len);
				if (ZSTD_isError(e))
					return damaged_at(r, off, ZSTD_getErrorName(e));
			}
			n = ZSTD_decompressDCtx(dctx, dst, cap, p, csz); /* checks the checksum */
			if (!ZSTD_isError(n))
				break;
			if (!known && ZSTD_getErrorCode(n) == ZSTD_error_dstSize_tooSmall && cap < DSMT_FRAME_MAX) {
				need = cap * 2 < DSMT_FRAME_MAX ? cap * 2 : DSMT_FRAME_MAX; /* try again, larger */
				continue;
			}
			if (!known && ZSTD_getErrorCode(n) == ZSTD_error_dstSize_tooSmall)
				return damaged_at(r, off, "frame larger than 256 MiB");
			return damaged_at(r, off, ZSTD_getErrorName(n));
		}
		memset(dst + n, 0, DSMT_FRAME_PAD);
		r->win_used += n;
		r->hist_len = r->hist_len + n < r->prefix_max ? r->hist_len + n : r->prefix_max;
		if (!known && n > r->guess)
			r->guess = n;
		r->frame_off = off;
		r->off = off + csz;
		/* the mapped file behind us is read: give its pages back in 4 MiB
		 * steps, so resident memory does not grow with the file (a second
		 * pass reads them from the file again) */
		if (r->mapped && r->off >= r->dropped + 2 * DROP_STEP) {
			size_t upto = (r->off - DROP_STEP) & ~(size_t)(DROP_STEP - 1);
			madvise((void *)(r->data + r->dropped), upto - r->dropped, MADV_DONTNEED);
			r->dropped = upto;
		}
		r->frame_idx++;
		r->last_good = r->frame_idx;
		*buf = dst;
		*len = n;
		return DSMT_NEXT_FRAME;
	}
}

void dsmt_reader_close(struct dsmt_reader *r)
{
	if (r->dctx)
		ZSTD_freeDCtx(r->dctx);
	free(r->win);
	free(r->hdr);
	if (r->mapped)
		munmap((void *)r->data, r->size);
	memset(r, 0, sizeof(*r));
}
