#include "hashmap.h"

#include <stdlib.h>
#include <string.h>

/* hslot, get, put, del are inline in hashmap.h */


void dsmt_hmap_init(struct dsmt_hmap *m) { memset(m, 0, sizeof(*m)); }

void dsmt_hmap_free(struct dsmt_hmap *m)
{
	free(m->t);
	memset(m, 0, sizeof(*m));
}


int dsmt_hmap_grow(struct dsmt_hmap *m)
{
	size_t ncap = m->t ? (m->mask + 1) * 2 : 64;
	if (ncap > DSMT_HMAP_MAX_CAP)
		return -1;
	struct dsmt_hent *nt = calloc(ncap, sizeof(*nt));
	if (!nt)
		return -1;
	size_t nmask = ncap - 1;
	if (m->t) {
		for (size_t i = 0; i <= m->mask; i++) {
			struct dsmt_hent *e = &m->t[i];
			if (!e->key)
				continue;
			size_t j = e->hash & nmask;
			while (nt[j].key)
				j = (j + 1) & nmask;
			nt[j] = *e;
		}
		free(m->t);
	}
	m->t = nt;
	m->mask = nmask;
	/* keep the load factor under 1/4 (short probes; the maps of a trace are
	 * small), under 1/2 from 1 M buckets on */
	m->limit = ncap >= ((size_t)1 << 20) ? ncap / 2 : ncap / 4;
	return 0;
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
