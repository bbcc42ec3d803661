/* varint / zigzag round trips and malformed input (decode/varint.h against
 * tracer/encode.h). */
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "encode.h"
#include "varint.h"

static void roundtrip(uint64_t v)
{
	uint8_t b[DSMT_VARINT_MAX + 2];
	size_t n = dsmt_put_uvar(b, v);
	const uint8_t *p = b;
	uint64_t got = 1234;
	CHECK(dsmt_get_uvar(&p, b + n, &got) == DSMT_VAR_OK);
	CHECK(got == v);
	CHECK(p == b + n);
	/* every shorter prefix is malformed (runs past the end) */
	for (size_t k = 1; k < n; k++) {
		p = b;
		CHECK(dsmt_get_uvar(&p, b + k, &got) == DSMT_VAR_BAD);
		CHECK(p == b);
	}
}

int main(void)
{
	uint64_t vals[] = {0, 1, 127, 128, 255, 300, 16383, 16384, (1ULL << 32) - 1, 1ULL << 32,
			   (1ULL << 63) - 1, 1ULL << 63, UINT64_MAX};
	for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++)
		roundtrip(vals[i]);
	for (uint64_t v = 1; v; v <<= 1) {
		roundtrip(v);
		roundtrip(v - 1);
		roundtrip(v + 1);
	}
	/* lengths */
	uint8_t b[16];
	CHECK(dsmt_put_uvar(b, 127) == 1);
	CHECK(dsmt_put_uvar(b, 128) == 2);
	CHECK(dsmt_put_uvar(b, UINT64_MAX) == 10);

	/* empty input: END, value 0 */
	const uint8_t *p = b;
	uint64_t v = 9;
	CHECK(dsmt_get_uvar(&p, b, &v) == DSMT_VAR_END && v == 0);

	/* 11-byte varint: overflow */
	memset(b, 0x80, 11);
	b[11] = 0;
	p = b;
	CHECK(dsmt_get_uvar(&p, b + 12, &v) == DSMT_VAR_BAD);
	/* 10th byte with more than the top bit: overflow */
	memset(b, 0xff, 9);
	b[9] = 0x02;
	p = b;
	CHECK(dsmt_get_uvar(&p, b + 10, &v) == DSMT_VAR_BAD);
	b[9] = 0x01;
	p = b;
	CHECK(dsmt_get_uvar(&p, b + 10, &v) == DSMT_VAR_OK && v == UINT64_MAX);

	/* zigzag */
	int64_t sv[] = {0, 1, -1, 2, -2, 63, -64, INT64_MAX, INT64_MIN, 123456789, -987654321};
	for (size_t i = 0; i < sizeof(sv) / sizeof(sv[0]); i++) {
		CHECK(dsmt_dec_unzigzag(dsmt_zigzag(sv[i])) == sv[i]);
		CHECK(dsmt_unzigzag(dsmt_zigzag(sv[i])) == sv[i]);
	}
	CHECK(dsmt_zigzag(0) == 0 && dsmt_zigzag(-1) == 1 && dsmt_zigzag(1) == 2 && dsmt_zigzag(-2) == 3);

	/* cursor: missing trailing fields read as 0, malformed ones set bad */
	struct dsmt_recbuf r;
	dsmt_rb_reset(&r);
	dsmt_rb_u(&r, 5);
	dsmt_rb_s(&r, -3);
	dsmt_rb_str(&r, "abc", 3);
	struct dsmt_cur c;
	dsmt_cur_init(&c, r.p, r.n);
	CHECK(dsmt_cur_u(&c) == 5);
	CHECK(dsmt_cur_s(&c) == -3);
	size_t sl;
	const uint8_t *s = dsmt_cur_str(&c, &sl);
	CHECK(sl == 3 && memcmp(s, "abc", 3) == 0);
	CHECK(!c.short_);
	CHECK(dsmt_cur_u(&c) == 0 && c.short_ && !c.bad);
	/* string length beyond the payload */
	uint8_t bad[] = {5, 'a', 'b'};
	dsmt_cur_init(&c, bad, sizeof(bad));
	s = dsmt_cur_str(&c, &sl);
	CHECK(c.bad && sl == 0);
	/* truncated varint inside a payload */
	uint8_t bad2[] = {0x81};
	dsmt_cur_init(&c, bad2, 1);
	CHECK(dsmt_cur_u(&c) == 0 && c.bad);
	return CHECK_DONE();
}
