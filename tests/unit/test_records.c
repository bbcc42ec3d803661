/* Record framing (u8 type, uleb128 len, payload) over well-formed and
 * malformed streams. */
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "encode.h"
#include "format.h"
#include "reader.h"

int main(void)
{
	uint8_t stream[4096];
	size_t n = 0;
	struct dsmt_recbuf r;
	/* THREAD 42 "main" */
	dsmt_rb_reset(&r);
	dsmt_rb_u(&r, 42);
	dsmt_rb_str(&r, "main", 4);
	n += dsmt_rec_finish(stream + n, DSMT_REC_THREAD, &r);
	/* ALLOC with tot fields */
	dsmt_rb_reset(&r);
	for (int i = 0; i < 11; i++)
		dsmt_rb_u(&r, (uint64_t)i * 1000);
	n += dsmt_rec_finish(stream + n, DSMT_REC_ALLOC, &r);
	/* a 300-byte record of an unknown type (2-byte length) */
	dsmt_rb_reset(&r);
	memset(r.p, 0xab, 300);
	r.n = 300;
	n += dsmt_rec_finish(stream + n, 0x7e, &r);
	/* empty payload */
	dsmt_rb_reset(&r);
	n += dsmt_rec_finish(stream + n, DSMT_REC_FLUSH, &r);

	const uint8_t *p = stream, *end = stream + n, *pl;
	unsigned type;
	size_t len;
	CHECK(dsmt_next_record(&p, end, &type, &pl, &len) == 1);
	CHECK(type == DSMT_REC_THREAD && len == 6);
	struct dsmt_cur c;
	dsmt_cur_init(&c, pl, len);
	CHECK(dsmt_cur_u(&c) == 42);
	size_t sl;
	const uint8_t *s = dsmt_cur_str(&c, &sl);
	CHECK(sl == 4 && !memcmp(s, "main", 4));

	CHECK(dsmt_next_record(&p, end, &type, &pl, &len) == 1);
	CHECK(type == DSMT_REC_ALLOC);
	dsmt_cur_init(&c, pl, len);
	for (int i = 0; i < 11; i++)
		CHECK(dsmt_cur_u(&c) == (uint64_t)i * 1000);
	CHECK(c.p == c.end && !c.bad);

	CHECK(dsmt_next_record(&p, end, &type, &pl, &len) == 1);
	CHECK(type == 0x7e && len == 300 && pl[0] == 0xab && pl[299] == 0xab);
	CHECK(dsmt_next_record(&p, end, &type, &pl, &len) == 1);
	CHECK(type == DSMT_REC_FLUSH && len == 0);
	dsmt_cur_init(&c, pl, len);
	CHECK(dsmt_cur_u(&c) == 0 && dsmt_cur_u(&c) == 0 && !c.bad); /* fields absent: 0 */
	CHECK(dsmt_next_record(&p, end, &type, &pl, &len) == 0);

	/* every cut inside the stream: either a clean record boundary or malformed */
	for (size_t cut = 0; cut <= n; cut++) {
		p = stream;
		end = stream + cut;
		int r2, count = 0;
		while ((r2 = dsmt_next_record(&p, end, &type, &pl, &len)) == 1) {
			CHECK(pl + len <= end);
			count++;
		}
		CHECK(r2 == 0 || r2 == -1);
		CHECK(r2 == -1 || p == end);
	}
	/* length beyond the end */
	uint8_t big[] = {DSMT_REC_ALLOC, 0xff, 0xff, 0xff, 0xff, 0x0f, 1, 2};
	p = big;
	CHECK(dsmt_next_record(&p, big + sizeof(big), &type, &pl, &len) == -1);
	/* overlong length varint */
	uint8_t over[14] = {DSMT_REC_ALLOC};
	memset(over + 1, 0x80, 12);
	p = over;
	CHECK(dsmt_next_record(&p, over + sizeof(over), &type, &pl, &len) == -1);
	/* type byte only */
	p = big;
	CHECK(dsmt_next_record(&p, big + 1, &type, &pl, &len) == -1);
	return CHECK_DONE();
}
