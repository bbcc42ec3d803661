/* dsmt_meta_int: the one parse of integer META values (rank, world_size)
 * that --summary, diff and --what-if share: whole decimal numbers only;
 * absent, empty, partly numeric or out-of-range values are "unknown" and
 * leave the output untouched. */
#include <string.h>

#include "check.h"
#include "decode.h"

int main(void)
{
	struct dsmt_meta m[] = {
		{"rank", "3", 1},         {"world_size", "", 0},          {"local_rank", "1x", 2},
		{"pid", "-42", 3},        {"big", "99999999999999999999", 20}, {"max", "9223372036854775807", 19},
	};
	struct dsmt_process p;
	memset(&p, 0, sizeof p);
	p.meta = m;
	p.nmeta = sizeof m / sizeof m[0];
	long long v = 77;
	CHECK(dsmt_meta_int(&p, "rank", &v) == 1 && v == 3);
	v = 77;
	CHECK(dsmt_meta_int(&p, "world_size", &v) == 0 && v == 77); /* empty */
	CHECK(dsmt_meta_int(&p, "local_rank", &v) == 0 && v == 77); /* trailing text */
	CHECK(dsmt_meta_int(&p, "absent", &v) == 0 && v == 77);
	CHECK(dsmt_meta_int(&p, "big", &v) == 0 && v == 77); /* out of range */
	CHECK(dsmt_meta_int(&p, "pid", &v) == 1 && v == -42);
	CHECK(dsmt_meta_int(&p, "max", &v) == 1 && v == 9223372036854775807LL);
	return CHECK_DONE();
}
