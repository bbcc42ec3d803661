/* Hash map against a brute-force model: random puts and deletes, key 0,
 * backward-shift deletion keeping every remaining key reachable. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "hashmap.h"

#define NK 5000

int main(void)
{
	struct dsmt_hmap m;
	dsmt_hmap_init(&m);
	CHECK(dsmt_hmap_get(&m, 1) == NULL);
	CHECK(dsmt_hmap_get(&m, 0) == NULL);
	CHECK(!dsmt_hmap_del(&m, 5, NULL));

	static uint64_t keys[NK], vals[NK];
	static int live[NK];
	uint64_t x = 12345;
	for (int i = 0; i < NK; i++) {
		/* pointer-like keys: aligned, clustered, plus 0 */
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		keys[i] = i == 0 ? 0 : (i % 2 ? 0x7f0000000000ULL + (uint64_t)i * 512 : x & ~0xfffULL);
	}
	for (int round = 0; round < 200000; round++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		int i = (int)(x % NK);
		int op = (int)((x >> 20) % 3);
		if (op < 2) {
			int created;
			struct dsmt_hent *e = dsmt_hmap_put(&m, keys[i], &created);
			CHECK(e != NULL);
			CHECK(created == !live[i]);
			e->v = x;
			e->aux = (uint32_t)i;
			vals[i] = x;
			live[i] = 1;
		} else {
			struct dsmt_hent old;
			int r = dsmt_hmap_del(&m, keys[i], &old);
			CHECK(r == live[i]);
			if (r)
				CHECK(old.v == vals[i] && old.aux == (uint32_t)i);
			live[i] = 0;
		}
		if (round % 20000 == 0) {
			size_t nlive = 0;
			for (int k = 0; k < NK; k++) {
				struct dsmt_hent *e = dsmt_hmap_get(&m, keys[k]);
				CHECK(!!e == live[k]);
				if (e)
					CHECK(e->v == vals[k]);
				nlive += (size_t)live[k];
			}
			CHECK(dsmt_hmap_size(&m) == nlive);
		}
	}
	/* iteration visits each live entry once */
	size_t it = 0, seen = 0, nlive = 0;
	struct dsmt_hent *e;
	while ((e = dsmt_hmap_next(&m, &it))) {
		CHECK(live[e->aux] && keys[e->aux] == e->key);
		seen++;
	}
	for (int k = 0; k < NK; k++)
		nlive += (size_t)live[k];
	CHECK(seen == nlive);
	dsmt_hmap_free(&m);
	CHECK(dsmt_hmap_get(&m, 7) == NULL);
	return CHECK_DONE();
}
