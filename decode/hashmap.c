#include "hashmap.h"

#include <stdlib.h>
#include <string.h>

static inline size_t hslot(uint64_t key, size_t mask)
{
	key ^= key >> 33;
	key *= 0xff51afd7ed558ccdULL;
	key ^= key >> 33;
	return (size_t)key & mask;
}

void dsmt_hmap_init(struct dsmt_hmap *m) { memset(m, 0, sizeof(*m)); }

void dsmt_hmap_free(struct dsmt_hmap *m)
{
	free(m->t);
	memset(m, 0, sizeof(*m));
}

struct dsmt_hent *dsmt_hmap_get(struct dsmt_hmap *m, uint64_t key)
{
	if (key == 0)
		return m->has_zero ? &m->zero : NULL;
	if (!m->t)
		return NULL;
	size_t i = hslot(key, m->mask);
	for (;;) {
		struct dsmt_hent *e = &m->t[i];
		if (e->key == key)
			return e;
		if (e->key == 0)
			return NULL;
		i = (i + 1) & m->mask;
	}
}

static int grow(struct dsmt_hmap *m)
{
	size_t ncap = m->t ? (m->mask + 1) * 2 : 64;
	struct dsmt_hent *nt = calloc(ncap, sizeof(*nt));
	if (!nt)
		return -1;
	size_t nmask = ncap - 1;
	if (m->t) {
		for (size_t i = 0; i <= m->mask; i++) {
			struct dsmt_hent *e = &m->t[i];
			if (!e->key)
				continue;
			size_t j = hslot(e->key, nmask);
			while (nt[j].key)
				j = (j + 1) & nmask;
			nt[j] = *e;
		}
		free(m->t);
	}
	m->t = nt;
	m->mask = nmask;
	return 0;
}

struct dsmt_hent *dsmt_hmap_put(struct dsmt_hmap *m, uint64_t key, int *created)
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
	/* keep the load factor under 1/2 */
	if (!m->t || (m->count + 1) * 2 > m->mask + 1) {
		if (grow(m))
			return NULL;
	}
	size_t i = hslot(key, m->mask);
	for (;;) {
		struct dsmt_hent *e = &m->t[i];
		if (e->key == key)
			return e;
		if (e->key == 0) {
			e->key = key;
			e->v = 0;
			e->aux = 0;
			m->count++;
			*created = 1;
			return e;
		}
		i = (i + 1) & m->mask;
	}
}

int dsmt_hmap_del(struct dsmt_hmap *m, uint64_t key, struct dsmt_hent *out)
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
	size_t i = hslot(key, mask);
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
		size_t home = hslot(m->t[j].key, mask);
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

struct dsmt_hent *dsmt_hmap_next(struct dsmt_hmap *m, size_t *i)
{
	if (*i == 0) {
		*i = 1;
		if (m->has_zero)
			return &m->zero;
	}
	if (!m->t)
		return NULL;
	while (*i - 1 <= m->mask) {
		struct dsmt_hent *e = &m->t[*i - 1];
		(*i)++;
		if (e->key)
			return e;
	}
	return NULL;
}
