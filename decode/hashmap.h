/* Open-addressing hash map keyed by a 64-bit value (pointers, ids), linear
 * probing, backward-shift deletion (no tombstones).  Values: one u64 and one
 * u32.  Key 0 is stored in a side slot so that 0 can mark empty buckets. */
#ifndef DSMT_DEC_HASHMAP_H
#define DSMT_DEC_HASHMAP_H

#include <stddef.h>
#include <stdint.h>

struct dsmt_hent {
	uint64_t key; /* 0 = empty */
	uint64_t v;
	uint32_t aux;
};

struct dsmt_hmap {
	struct dsmt_hent *t;
	size_t mask;  /* capacity - 1 (capacity is a power of two), 0 when empty */
	size_t count; /* entries in t (not counting the zero-key slot) */
	int has_zero;
	struct dsmt_hent zero;
};

void dsmt_hmap_init(struct dsmt_hmap *m);
void dsmt_hmap_free(struct dsmt_hmap *m);
/* Entry for key, or NULL. */
struct dsmt_hent *dsmt_hmap_get(struct dsmt_hmap *m, uint64_t key);
/* Entry for key, inserted zeroed when absent (*created = 1).  NULL only when
 * memory runs out. */
struct dsmt_hent *dsmt_hmap_put(struct dsmt_hmap *m, uint64_t key, int *created);
/* Remove key; returns 1 and copies the entry to *out (if non-NULL) when found. */
int dsmt_hmap_del(struct dsmt_hmap *m, uint64_t key, struct dsmt_hent *out);
static inline size_t dsmt_hmap_size(const struct dsmt_hmap *m) { return m->count + (size_t)m->has_zero; }
/* Iterate: start with *i = 0; returns the next entry or NULL at the end.
 * The map must not change during iteration. */
struct dsmt_hent *dsmt_hmap_next(struct dsmt_hmap *m, size_t *i);

#endif
