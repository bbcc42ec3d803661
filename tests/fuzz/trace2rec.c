/* trace2rec TRACE OUT: writes a trace's record streams in the fuzz target's
 * 'R' input form (tests/fuzz/fuzz_decode.c): 'R', uvar hdr_len, the header's
 * META records, then each data frame as uvar len + its decompressed records.
 * Makes seeds for the records mode from real traces.  Exit 0, or 2 when the
 * trace does not read to its end cleanly (nothing useful written).
 *
 * trace2rec --to-trace INPUT OUT: the other way: the trace file the fuzz
 * target decodes for a fuzzer input (an 'R' input is built into a trace as
 * the target does; any other input is the file itself).  Turns a crashing
 * input into a file for tests/decode/fuzz-regressions/. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "encode.h"
#include "reader.h"
#include "recbuild.h"

static void uvar(FILE *f, uint64_t v)
{
	uint8_t b[DSMT_VARINT_MAX];
	fwrite(b, 1, dsmt_put_uvar(b, v), f);
}

static int to_trace(const char *in, const char *out)
{
	FILE *f = fopen(in, "rb");
	if (!f) {
		perror(in);
		return 1;
	}
	size_t cap = 1 << 16, n = 0;
	uint8_t *b = malloc(cap);
	size_t k;
	while (b && (k = fread(b + n, 1, cap - n, f)) > 0)
		if ((n += k) == cap && !(b = realloc(b, cap *= 2)))
			break;
	fclose(f);
	if (!b) {
		fputs("trace2rec: out of memory\n", stderr);
		return 1;
	}
	const uint8_t *data = b;
	if (n > 0 && b[0] == 'R') {
		n = dsmt_rec_build(b + 1, b + n);
		data = dsmt_rec_built;
	}
	FILE *o = fopen(out, "wb");
	if (!o || fwrite(data, 1, n, o) != n || fclose(o)) {
		perror(out);
		return 1;
	}
	free(b);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 4 && !strcmp(argv[1], "--to-trace"))
		return to_trace(argv[2], argv[3]);
	if (argc != 3) {
		fputs("usage: trace2rec TRACE OUT | trace2rec --to-trace INPUT OUT\n", stderr);
		return 1;
	}
	struct dsmt_reader r;
	if (dsmt_reader_open(&r, argv[1]) != DSMT_OPEN_OK) {
		fprintf(stderr, "trace2rec: %s: cannot read the trace\n", argv[1]);
		return 2;
	}
	FILE *f = fopen(argv[2], "wb");
	if (!f) {
		perror(argv[2]);
		return 1;
	}
	fputc('R', f);
	uvar(f, r.hdr_len);
	fwrite(r.hdr, 1, r.hdr_len, f);
	const uint8_t *buf;
	size_t len;
	int rc;
	while ((rc = dsmt_reader_next(&r, &buf, &len)) == DSMT_NEXT_FRAME) {
		uvar(f, len);
		fwrite(buf, 1, len, f);
	}
	dsmt_reader_close(&r);
	if (fclose(f) || rc != DSMT_NEXT_END) {
		fprintf(stderr, "trace2rec: %s: %s\n", argv[1], rc != DSMT_NEXT_END ? "damaged or truncated" : "write error");
		return 2;
	}
	return 0;
}
