/* rawframes TRACE: writes the decompressed record stream of every data frame
 * of a trace to stdout (frames decoded against their history, format.h),
 * for tests that read records the decoder does not print yet: per frame a
 * u32le length, then the frame's records. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#define ZSTD_STATIC_LINKING_ONLY
#include <zstd.h>
#include <zstd_errors.h>

#include "format.h"

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: rawframes TRACE\n");
		return 2;
	}
	FILE *f = fopen(argv[1], "rb");
	if (!f) {
		perror(argv[1]);
		return 1;
	}
	size_t cap = 1 << 20, n = 0;
	uint8_t *in = malloc(cap);
	for (size_t r; in && (r = fread(in + n, 1, cap - n, f)) > 0;)
		if ((n += r) == cap)
			in = realloc(in, cap *= 2);
	fclose(f);
	size_t ocap = 1 << 22, on = 0;
	uint8_t *out = malloc(ocap);
	ZSTD_DCtx *d = ZSTD_createDCtx();
	if (!in || !out || !d)
		return 1;
	for (size_t off = 0; off + 8 <= n;) {
		uint32_t magic;
		memcpy(&magic, in + off, 4);
		if ((magic & 0xFFFFFFF0U) == 0x184D2A50U) {
			uint32_t sz;
			memcpy(&sz, in + off + 4, 4);
			off += 8 + (size_t)sz;
			continue;
		}
		size_t csz = ZSTD_findFrameCompressedSize(in + off, n - off);
		if (ZSTD_isError(csz))
			break; /* cut file: stop at the last complete frame */
		for (;;) {
			size_t hist = on < DSMT_PREFIX_BYTES ? on : DSMT_PREFIX_BYTES;
			ZSTD_DCtx_reset(d, ZSTD_reset_session_only);
			ZSTD_DCtx_refPrefix(d, out + on - hist, hist);
			size_t r = ZSTD_decompressDCtx(d, out + on, ocap - on, in + off, csz);
			if (!ZSTD_isError(r)) {
				uint8_t len[4] = {(uint8_t)r, (uint8_t)(r >> 8), (uint8_t)(r >> 16), (uint8_t)(r >> 24)};
				fwrite(len, 1, 4, stdout);
				fwrite(out + on, 1, r, stdout);
				on += r;
				break;
			}
			if (ZSTD_getErrorCode(r) != ZSTD_error_dstSize_tooSmall) {
				fprintf(stderr, "rawframes: %s\n", ZSTD_getErrorName(r));
				return 1;
			}
			out = realloc(out, ocap *= 2);
			if (!out)
				return 1;
		}
		off += csz;
	}
	return 0;
}
