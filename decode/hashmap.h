/* Open-addressing hash map keyed by a 64-bit value (pointers, ids), linear
 * probing, backward-shift deletion (no tombstones).  Values: one u64 and one
 * u32.  Key 0 is stored in a side slot so that 0 can mark empty buckets.
 * Each entry keeps its key's hash, so deletion and growth never hash again. */
#ifndef DSMT_DEC_HASHMAP_H
#define DSMT_DEC_HASHMAP_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

struct dsmt_hent {
	uint64_t key; /* 0 = empty */
	uint64_t v;
	uint32_t aux;
	uint32_t hash; /* the map's own (low bits of the mixed key): do not change */
};

struct dsmt_hmap {
	struct dsmt_hent *t;
	size_t mask;  /* capacity - 1 (capacity is a power of two), 0 when empty */
	size_t count; /* entries in t (not counting the zero-key slot) */
	size_t limit; /* count that makes it grow (0 when empty) */
	int has_zero;
	struct dsmt_hent zero;
};

void dsmt_hmap_init(struct dsmt_hmap *m);
void dsmt_hmap_free(struct dsmt_hmap *m);
/* Double the table (out of line).  0 or -1 (no memory). */
int dsmt_hmap_grow(struct dsmt_hmap *m);
static inline size_t dsmt_hmap_size(const struct dsmt_hmap *m) { return m->count + (size_t)m->has_zero; }
/* Iterate: start with *i = 0; returns the next entry or NULL at the end.
 * The map must not change during iteration. */
struct dsmt_hent *dsmt_hmap_next(struct dsmt_hmap *m, size_t *i);

#define DSMT_HMAP_MAX_CAP ((size_t)1 << 31) /* the slot comes from a 32-bit hash */

static inline uint32_t dsmt_hash(uint64_t key)
{
	key ^= key >> 33;
	key *= 0xff51afd7ed558ccdULL;
	key ^= key >> 33;
	return (uint32_t)key;
}

static inline size_t dsmt_hslot(uint64_t key, size_t mask) { return dsmt_hash(key) & mask; }

/* Entry for key, or NULL. */
static inline struct dsmt_hent *dsmt_hmap_get(struct dsmt_hmap *m, uint64_t key)
{
	if (key == 0)
		return m->has_zero ? &m->zero : NULL;
	if (!m->t)
		return NULL;
	size_t i = dsmt_hslot(key, m->mask);
	for (;;) {
		struct dsmt_hent *e = &m->t[i];
		if (e->key == key)
			return e;
		if (e->key == 0)
			return NULL;
		i = (i + 1) & m->mask;
	}
}

/* Entry for key, inserted zeroed when absent (*created = 1).  NULL only when
 * memory runs out. */
static inline struct dsmt_hent *dsmt_hmap_put(struct dsmt_hmap *m, uint64_t key, int *created)
{
	*created = 0;
	if (key == 0) {
		if (!m->has_zero) {
			m->has_zero = 1;
			memset(&m->zero, 0, sizeof(m->zero));
			*created = 1;
		}
		return &m->zero;
	}
	if (m->count + 1 > m->limit) { /* see dsmt_hmap_grow */
		if (dsmt_hmap_grow(m))
			return NULL;
	}
	uint32_t hash = dsmt_hash(key);
	size_t i = hash & m->mask;
	for (;;) {
		struct dsmt_hent *e = &m->t[i];
		if (e->key == key)
			return e;
		if (e->key == 0) {
			e->key = key;
			e->v = 0;
			e->aux = 0;
			e->hash = hash;
			m->count++;
			*created = 1;
			return e;
		}
		i = (i + 1) & m->mask;
	}
}

/* Remove key; returns 1 and copies the entry to *out (if non-NULL) when found. */
static inline int dsmt_hmap_del(struct dsmt_hmap *m, uint64_t key, struct dsmt_hent *out)
{
	if (key == 0) {
		if (!m->has_zero)
			return 0;
		if (out)
			*out = m->zero;
		m->has_zero = 0;
		return 1;
	}
	if (!m->t)
		return 0;
	size_t mask = m->mask;
	size_t i = dsmt_hslot(key, mask);
	for (;;) {
		if (m->t[i].key == key)
			break;
		if (m->t[i].key == 0)
			return 0;
		i = (i + 1) & mask;
	}
	if (out)
		*out = m->t[i];
	/* backward-shift deletion */
	size_t j = i;
	for (;;) {
		j = (j + 1) & mask;
		if (m->t[j].key == 0)
			break;
		size_t home = m->t[j].hash & mask;
		/* can the entry at j move to the hole at i?  yes unless its home
		 * lies cyclically in (i, j] */
		int in_range = (i <= j) ? (home > i && home <= j) : (home > i || home <= j);
		if (!in_range) {
			m->t[i] = m->t[j];
			i = j;
		}
	}
	m->t[i].key = 0;
	m->count--;
	return 1;
}

#endif
