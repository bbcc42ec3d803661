/* Native symbols (elfutils libdw, optional) and CPython location tables.
 * The API and its conventions are described in symbol.h. */
#include "symbol.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hashmap.h"

#ifdef DSMT_HAVE_LIBDW
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwelf.h>
#include <elfutils/libdwfl.h>
#include <gelf.h>
#include <libelf.h>
#endif

enum mstate {
	M_NEW,      /* file not opened yet */
	M_OK,       /* opened, build-id matches (or none recorded) */
	M_MISSING,  /* cannot be opened */
	M_MISMATCH, /* build-id differs from the trace's */
	M_UNUSABLE, /* not a regular file, not ELF, unreadable by libdw */
	M_NOLIBDW,  /* built without libdw: module + offset only */
};

struct mod {
	uint64_t base, lo, hi;
	char *path;
	uint8_t *bid;
	size_t bidlen;
	uint64_t key; /* dedupe key (hash of the fields) */
	int state;
	int counted;       /* counted in stats.opened */
	uint64_t last_use; /* t->clock at the last lookup */
#ifdef DSMT_HAVE_LIBDW
	Dwfl *dwfl;
	Dwfl_Module *dm;
#endif
};

/* strings made here (joined source paths), kept until free */
struct istr {
	struct istr *next;
	char s[];
};

struct ix {
	uint64_t lo, hi;
	size_t i; /* index into mods: larger = added later */
};

struct ent {
	struct dsmt_sym s;
	int rc;
};

struct dsmt_symtab {
	struct mod *mods;
	size_t nmods, capmods;
	struct ix *idx; /* active modules, sorted by lo, disjoint */
	size_t nidx;
	size_t nopen, max_open; /* modules holding open files (libdw), and the bound */
	uint64_t clock;         /* for least-recently-used eviction */
	int dirty;   /* modules added since idx was built */
	struct dsmt_hmap dedupe; /* key -> module index + 1 */
	struct dsmt_hmap cache;  /* ip -> ents index */
	struct ent *ents;
	size_t nents, capents;
	char *sysroot;
	struct dsmt_hmap strs; /* hash -> struct istr chain */
	struct dsmt_symstats st;
};

int dsmt_symbol_have_libdw(void)
{
#ifdef DSMT_HAVE_LIBDW
	return 1;
#else
	return 0;
#endif
}

struct dsmt_symtab *dsmt_symtab_new(void)
{
	struct dsmt_symtab *t = calloc(1, sizeof *t);
	if (!t)
		return NULL;
	dsmt_hmap_init(&t->dedupe);
	dsmt_hmap_init(&t->cache);
	dsmt_hmap_init(&t->strs);
	/* each open module holds up to 2 descriptors (its file, a debug file) */
	struct rlimit rl;
	rlim_t cur = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY ? rl.rlim_cur : 1024;
	t->max_open = cur > 96 ? (size_t)(cur - 64) / 2 : 16;
	if (t->max_open > 4096)
		t->max_open = 4096;
	return t;
}

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
	const uint8_t *b = p;
	for (size_t i = 0; i < n; i++) {
		h ^= b[i];
		h *= 0x100000001b3ULL;
	}
	return h;
}

static int same_mod(const struct mod *m, uint64_t base, uint64_t lo, uint64_t hi, const char *path,
		    const uint8_t *bid, size_t bidlen)
{
	return m->base == base && m->lo == lo && m->hi == hi && !strcmp(m->path, path) && m->bidlen == bidlen &&
	       (!bidlen || !memcmp(m->bid, bid, bidlen));
}

int dsmt_symtab_add_module(struct dsmt_symtab *t, uint64_t base, uint64_t lo, uint64_t hi, const char *path,
			   const uint8_t *build_id, size_t build_id_len)
{
	if (!t || lo >= hi)
		return -1;
	if (!path)
		path = "";
	if (!build_id)
		build_id_len = 0;
	uint64_t key = 0xcbf29ce484222325ULL;
	key = fnv(key, &base, sizeof base);
	key = fnv(key, &lo, sizeof lo);
	key = fnv(key, &hi, sizeof hi);
	key = fnv(key, path, strlen(path));
	key = fnv(key, build_id, build_id_len);
	key |= 1; /* never 0 */
	struct dsmt_hent *e = dsmt_hmap_get(&t->dedupe, key);
	if (e && e->v && e->v <= t->nmods) {
		const struct mod *m = &t->mods[e->v - 1];
		if (same_mod(m, base, lo, hi, path, build_id, build_id_len))
			return 0; /* reported again */
	}
	if (t->nmods == t->capmods) {
		size_t c = t->capmods ? t->capmods * 2 : 16;
		struct mod *n = realloc(t->mods, c * sizeof *n);
		if (!n)
			return -1;
		t->mods = n;
		t->capmods = c;
	}
	struct mod m = {0};
	m.base = base;
	m.lo = lo;
	m.hi = hi;
	m.key = key;
	m.path = strdup(path);
	if (!m.path)
		return -1;
	if (build_id_len) {
		m.bid = malloc(build_id_len);
		if (!m.bid) {
			free(m.path);
			return -1;
		}
		memcpy(m.bid, build_id, build_id_len);
		m.bidlen = build_id_len;
	}
	m.state = dsmt_symbol_have_libdw() ? M_NEW : M_NOLIBDW;
	t->mods[t->nmods++] = m;
	if (!e) {
		int created;
		e = dsmt_hmap_put(&t->dedupe, key, &created);
		if (e)
			e->v = t->nmods;
	}
	t->st.modules++;
	t->dirty = 1;
	return 0;
}

void dsmt_symtab_set_max_open(struct dsmt_symtab *t, size_t n)
{
	if (t)
		t->max_open = n ? n : 1;
}

int dsmt_symtab_set_sysroot(struct dsmt_symtab *t, const char *dir)
{
	if (!t)
		return -1;
	free(t->sysroot);
	t->sysroot = NULL;
	if (dir && *dir) {
		t->sysroot = strdup(dir);
		if (!t->sysroot)
			return -1;
	}
	return 0;
}

/* --- module index: newer modules win where ranges overlap --- */

static int by_lo(const void *a, const void *b)
{
	const struct ix *x = a, *y = b;
	if (x->lo != y->lo)
		return x->lo < y->lo ? -1 : 1;
	return x->i < y->i ? -1 : x->i > y->i;
}

static int rebuild(struct dsmt_symtab *t)
{
	struct ix *idx = realloc(t->idx, (t->nmods ? t->nmods : 1) * sizeof *idx);
	if (!idx)
		return -1;
	t->idx = idx;
	for (size_t i = 0; i < t->nmods; i++)
		idx[i] = (struct ix){t->mods[i].lo, t->mods[i].hi, i};
	qsort(idx, t->nmods, sizeof *idx, by_lo);
	/* sweep: kept ranges are disjoint and sorted, so a range (processed in lo
	 * order) can overlap only the last kept one; the one added later stays */
	size_t n = 0;
	for (size_t k = 0; k < t->nmods; k++) {
		if (n && idx[n - 1].hi > idx[k].lo) {
			if (idx[n - 1].i > idx[k].i)
				continue;
			n--;
		}
		idx[n++] = idx[k];
	}
	t->nidx = n;
	t->dirty = 0;
	/* results looked up before may now belong to another module */
	dsmt_hmap_free(&t->cache);
	dsmt_hmap_init(&t->cache);
	t->nents = 0;
	return 0;
}

static struct mod *find_mod(struct dsmt_symtab *t, uint64_t ip)
{
	size_t lo = 0, hi = t->nidx;
	while (lo < hi) { /* first index with mods.lo > ip */
		size_t mid = lo + (hi - lo) / 2;
		if (t->idx[mid].lo <= ip)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo)
		return NULL;
	return ip < t->idx[lo - 1].hi ? &t->mods[t->idx[lo - 1].i] : NULL;
}

#ifdef DSMT_HAVE_LIBDW

/* the string s (n bytes) kept in t; NULL when memory runs out */
static const char *intern(struct dsmt_symtab *t, const char *s, size_t n)
{
	uint64_t k = fnv(0xcbf29ce484222325ULL, s, n) | 1;
	int created;
	struct dsmt_hent *h = dsmt_hmap_put(&t->strs, k, &created);
	if (!h)
		return NULL;
	for (struct istr *x = (struct istr *)(uintptr_t)h->v; x; x = x->next)
		if (!strncmp(x->s, s, n) && !x->s[n])
			return x->s;
	struct istr *x = malloc(sizeof *x + n + 1);
	if (!x)
		return NULL;
	memcpy(x->s, s, n);
	x->s[n] = 0;
	x->next = (struct istr *)(uintptr_t)h->v;
	h->v = (uint64_t)(uintptr_t)x;
	return x->s;
}

/* DIR/FILE with "." and "name/.." segments removed (lexically), kept in t */
static const char *join_path(struct dsmt_symtab *t, const char *dir, const char *file)
{
	size_t dl = strlen(dir), fl = strlen(file), n = dl + 1 + fl;
	if (n > 65536)
		return NULL;
	char *b = malloc(2 * (n + 2));
	size_t *seg = malloc((n + 2) * sizeof *seg); /* start, length pairs */
	const char *r = NULL;
	if (!b || !seg)
		goto out;
	memcpy(b, dir, dl);
	b[dl] = '/';
	memcpy(b + dl + 1, file, fl);
	int abs = b[0] == '/';
	size_t ns = 0;
	for (size_t i = 0; i < n;) {
		while (i < n && b[i] == '/')
			i++;
		size_t s0 = i;
		while (i < n && b[i] != '/')
			i++;
		size_t len = i - s0;
		if (!len || (len == 1 && b[s0] == '.'))
			continue;
		if (len == 2 && b[s0] == '.' && b[s0 + 1] == '.') {
			if (ns && !(seg[2 * ns - 1] == 2 && !memcmp(b + seg[2 * ns - 2], "..", 2))) {
				ns--; /* "name/.." */
				continue;
			}
			if (abs)
				continue; /* "/.." is "/" */
		}
		seg[2 * ns] = s0;
		seg[2 * ns + 1] = len;
		ns++;
	}
	char *o = b + n + 2;
	size_t ol = 0;
	if (abs)
		o[ol++] = '/';
	for (size_t k = 0; k < ns; k++) {
		if (k)
			o[ol++] = '/';
		memcpy(o + ol, b + seg[2 * k], seg[2 * k + 1]);
		ol += seg[2 * k + 1];
	}
	if (!ol)
		o[ol++] = '.';
	r = intern(t, o, ol);
out:
	free(b);
	free(seg);
	return r;
}

/* --- libdw --- */


/* Open PATH read-only without blocking (FIFOs, devices) and keep it only when
 * it is a regular file of at least MINSIZE bytes.  -1: errno ENOENT-like
 * (missing) or EINVAL (not a regular file / too small). */
static int open_regular(const char *path, off_t minsize)
{
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return -1;
	struct stat sb;
	if (fstat(fd, &sb) || !S_ISREG(sb.st_mode) || sb.st_size < minsize) {
		close(fd);
		errno = EINVAL;
		return -1;
	}
	return fd;
}

static int no_find_elf(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base, char **file_name,
		       Elf **elfp)
{
	(void)mod, (void)userdata, (void)modname, (void)base, (void)file_name, (void)elfp;
	return -1;
}

static int bid_matches(int fd, const uint8_t *bid, int bidlen)
{
	if (bidlen <= 0)
		return 1;
	Elf *e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!e)
		return 0;
	const void *id = NULL;
	ssize_t n = elf_kind(e) == ELF_K_ELF ? dwelf_elf_gnu_build_id(e, &id) : -1;
	int ok = n == bidlen && !memcmp(id, bid, (size_t)n);
	elf_end(e);
	return ok;
}

static int try_debug(const char *path, const char *main_file, const uint8_t *bid, int bidlen, char **out_name)
{
	if (main_file && !strcmp(path, main_file))
		return -1;
	int fd = open_regular(path, 64);
	if (fd < 0)
		return -1;
	if (!bid_matches(fd, bid, bidlen)) {
		close(fd);
		return -1;
	}
	*out_name = strdup(path);
	return fd;
}

/* Separate debug files, found locally only (no debuginfod): by build-id under
 * SYSROOT/usr/lib/debug/.build-id/, then the .gnu_debuglink name next to the
 * file, in its .debug/ and under SYSROOT/usr/lib/debug/DIR/.  A candidate
 * must carry the module's build-id (when it has one). */
static int local_find_debuginfo(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base,
				const char *file_name, const char *debuglink_file, GElf_Word debuglink_crc,
				char **debuginfo_file_name)
{
	(void)modname, (void)base, (void)debuglink_crc;
	const struct dsmt_symtab *t = userdata ? *userdata : NULL;
	const char *root = t && t->sysroot ? t->sysroot : "";
	const unsigned char *bits = NULL;
	GElf_Addr vaddr;
	int bl = dwfl_module_build_id(mod, &bits, &vaddr);
	char buf[PATH_MAX];
	int fd = -1;
	if (bl > 1 && bl <= 64) {
		int o = snprintf(buf, sizeof buf, "%s/usr/lib/debug/.build-id/%02x/", root, bits[0]);
		for (int i = 1; i < bl && o > 0 && (size_t)o + 3 < sizeof buf; i++)
			o += snprintf(buf + o, sizeof buf - (size_t)o, "%02x", bits[i]);
		if (o > 0 && (size_t)o + 7 < sizeof buf) {
			memcpy(buf + o, ".debug", 7);
			fd = try_debug(buf, file_name, bits, bl, debuginfo_file_name);
		}
	}
	if (fd < 0 && debuglink_file && *debuglink_file && !strchr(debuglink_file, '/') && file_name) {
		const char *slash = strrchr(file_name, '/');
		int dl = slash ? (int)(slash - file_name) : 0;
		const char *dir = slash ? file_name : "";
		/* file_name already carries the sysroot; strip it for /usr/lib/debug/DIR */
		size_t rl = strlen(root);
		const char *rdir = dir;
		int rdl = dl;
		if (rl && dl >= (int)rl && !strncmp(dir, root, rl)) {
			rdir = dir + rl;
			rdl = dl - (int)rl;
		}
		const char *fmts[3] = {"%.*s/%s", "%.*s/.debug/%s", NULL};
		for (int k = 0; k < 2 && fd < 0; k++) {
			int o = snprintf(buf, sizeof buf, fmts[k], dl, dir, debuglink_file);
			if (o > 0 && (size_t)o < sizeof buf)
				fd = try_debug(buf, file_name, bits, bl, debuginfo_file_name);
		}
		if (fd < 0) {
			int o = snprintf(buf, sizeof buf, "%s/usr/lib/debug%.*s/%s", root, rdl, rdir, debuglink_file);
			if (o > 0 && (size_t)o < sizeof buf)
				fd = try_debug(buf, file_name, bits, bl, debuginfo_file_name);
		}
	}
	if (fd < 0)
		errno = 0; /* nothing found is not an error */
	return fd;
}

static char *no_debuginfo_path = NULL;
static const Dwfl_Callbacks callbacks = {
	.find_elf = no_find_elf,
	.find_debuginfo = local_find_debuginfo,
	.section_address = dwfl_offline_section_address,
	.debuginfo_path = &no_debuginfo_path,
};

static void open_mod(struct dsmt_symtab *t, struct mod *m)
{
	char buf[PATH_MAX];
	const char *p = m->path;
	if (t->sysroot) {
		int o = snprintf(buf, sizeof buf, "%s%s%s", t->sysroot, m->path[0] == '/' ? "" : "/", m->path);
		if (o < 0 || (size_t)o >= sizeof buf) {
			m->state = M_MISSING;
			t->st.missing++;
			return;
		}
		p = buf;
	}
	if (!*p) {
		m->state = M_MISSING;
		t->st.missing++;
		return;
	}
	int fd = open_regular(p, 64); /* 64: an ELF64 header */
	if (fd < 0) {
		if (errno == EINVAL) {
			m->state = M_UNUSABLE;
			t->st.unusable++;
		} else {
			m->state = M_MISSING;
			t->st.missing++;
		}
		return;
	}
	unsigned char magic[4];
	if (pread(fd, magic, 4, 0) != 4 || memcmp(magic, ELFMAG, SELFMAG)) {
		close(fd);
		m->state = M_UNUSABLE;
		t->st.unusable++;
		return;
	}
	Dwfl *d = dwfl_begin(&callbacks);
	if (!d) {
		close(fd);
		m->state = M_UNUSABLE;
		t->st.unusable++;
		return;
	}
	dwfl_report_begin(d);
	/* add_p_vaddr: base is the load bias (dlpi_addr), added to p_vaddr;
	 * on success the fd belongs to libdwfl */
	Dwfl_Module *dm = dwfl_report_elf(d, p, p, fd, m->base, true);
	if (!dm) {
		close(fd);
		dwfl_end(d);
		m->state = M_UNUSABLE;
		t->st.unusable++;
		return;
	}
	dwfl_report_end(d, NULL, NULL);
	if (m->bidlen) {
		const unsigned char *bits = NULL;
		GElf_Addr vaddr;
		int n = dwfl_module_build_id(dm, &bits, &vaddr);
		if (n <= 0 || (size_t)n != m->bidlen || memcmp(bits, m->bid, m->bidlen)) {
			dwfl_end(d);
			m->state = M_MISMATCH;
			if (!m->counted)
				t->st.mismatched++;
			m->counted = 1;
			return;
		}
	}
	void **ud = NULL;
	dwfl_module_info(dm, &ud, NULL, NULL, NULL, NULL, NULL, NULL);
	if (ud)
		*ud = t; /* for local_find_debuginfo */
	m->dwfl = d;
	m->dm = dm;
	m->state = M_OK;
	t->nopen++;
	if (!m->counted) {
		m->counted = 1;
		t->st.opened++;
	}
}

/* Close the least recently used open module (reopened when needed again):
 * every open module holds a file descriptor or two. */
static void evict(struct dsmt_symtab *t, const struct mod *keep)
{
	struct mod *lru = NULL;
	for (size_t i = 0; i < t->nmods; i++) {
		struct mod *m = &t->mods[i];
		if (m->dwfl && m != keep && (!lru || m->last_use < lru->last_use))
			lru = m;
	}
	if (!lru)
		return;
	dwfl_end(lru->dwfl);
	lru->dwfl = NULL;
	lru->dm = NULL;
	lru->state = M_NEW;
	t->nopen--;
}

static const char *die_func_name(Dwarf_Die *die)
{
	Dwarf_Attribute a;
	const char *s = NULL;
	if (dwarf_attr_integrate(die, DW_AT_linkage_name, &a) || dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &a))
		s = dwarf_formstring(&a);
	if (!s)
		s = dwarf_diename(die);
	return s && *s ? s : NULL;
}

static void lookup(struct dsmt_symtab *t, struct mod *m, uint64_t ip, struct dsmt_sym *out)
{
	/* return addresses: the call instruction ends at ip */
	Dwarf_Addr a = ip > m->lo ? ip - 1 : ip;
	GElf_Off off = 0;
	GElf_Sym sym;
	memset(&sym, 0, sizeof sym);
	const char *name = dwfl_module_addrinfo(m->dm, a, &off, &sym, NULL, NULL, NULL);
	if (name && (!*name || (sym.st_size && off >= sym.st_size)))
		name = NULL;

	const char *inl = NULL, *sub = NULL;
	Dwarf_Addr bias = 0;
	Dwarf_Die *cu = dwfl_module_addrdie(m->dm, a, &bias);
	if (cu) {
		Dwarf_Die *scopes = NULL;
		int n = dwarf_getscopes(cu, a - bias, &scopes);
		for (int i = 0; i < n; i++) {
			int tag = dwarf_tag(&scopes[i]);
			if (tag == DW_TAG_inlined_subroutine && !inl && !sub) {
				inl = die_func_name(&scopes[i]);
				if (!inl)
					inl = "?";
			} else if (tag == DW_TAG_subprogram) {
				sub = die_func_name(&scopes[i]);
				break;
			}
		}
		free(scopes);
		Dwfl_Line *l = dwfl_module_getsrc(m->dm, a);
		if (l) {
			int line = 0;
			const char *f = dwfl_lineinfo(l, NULL, &line, NULL, NULL, NULL);
			if (f && *f && line > 0) {
				/* relative names are relative to the compilation directory */
				const char *cd = f[0] != '/' ? dwfl_line_comp_dir(l) : NULL;
				const char *j = cd && cd[0] == '/' ? join_path(t, cd, f) : NULL; /* interned */
				out->file = j ? j : f;
				out->line = line;
			}
		}
	}
	/* copies: the module may be closed (evict) before the symtab is freed */
	/* symbol versions ("dlopen@GLIBC_2.2.5") are left out */
	out->symbol = name ? intern(t, name, strcspn(name, "@")) : sub ? intern(t, sub, strlen(sub)) : NULL;
	if (out->file)
		out->file = intern(t, out->file, strlen(out->file));
	if (inl) {
		out->func = intern(t, inl, strlen(inl));
		out->inlined = 1;
	} else {
		out->func = out->symbol;
	}
}

#endif /* DSMT_HAVE_LIBDW */

static void resolve(struct dsmt_symtab *t, uint64_t ip, struct ent *e)
{
	memset(e, 0, sizeof *e);
	struct mod *m = find_mod(t, ip);
	if (!m) {
		e->rc = -1;
		t->st.outside++;
		return;
	}
	e->s.module = m->path;
	e->s.offset = ip - m->base;
#ifdef DSMT_HAVE_LIBDW
	m->last_use = ++t->clock;
	if (m->state == M_NEW) {
		if (t->nopen >= t->max_open)
			evict(t, m);
		open_mod(t, m);
	}
	if (m->state == M_OK)
		lookup(t, m, ip, &e->s);
#endif
	if (e->s.func)
		t->st.with_func++;
	if (e->s.file)
		t->st.with_line++;
}

int dsmt_symbolize(struct dsmt_symtab *t, uint64_t ip, struct dsmt_sym *out)
{
	struct dsmt_sym dummy;
	if (!out)
		out = &dummy;
	memset(out, 0, sizeof *out);
	if (!t)
		return -1;
	if (t->dirty && rebuild(t))
		return -1;
	struct dsmt_hent *h = dsmt_hmap_get(&t->cache, ip);
	if (h) {
		*out = t->ents[h->v].s;
		return t->ents[h->v].rc;
	}
	t->st.ips++;
	struct ent e;
	resolve(t, ip, &e);
	*out = e.s;
	/* cache it (when memory allows) */
	if (t->nents == t->capents) {
		size_t c = t->capents ? t->capents * 2 : 256;
		struct ent *n = realloc(t->ents, c * sizeof *n);
		if (!n)
			return e.rc;
		t->ents = n;
		t->capents = c;
	}
	int created;
	h = dsmt_hmap_put(&t->cache, ip, &created);
	if (h) {
		t->ents[t->nents] = e;
		h->v = t->nents++;
	}
	return e.rc;
}

void dsmt_symtab_get_stats(const struct dsmt_symtab *t, struct dsmt_symstats *s)
{
	if (!s)
		return;
	if (!t) {
		memset(s, 0, sizeof *s);
		return;
	}
	*s = t->st;
}

void dsmt_symtab_stats(const struct dsmt_symtab *t, FILE *f)
{
	struct dsmt_symstats s;
	dsmt_symtab_get_stats(t, &s);
	fprintf(f,
		"symbols: %zu modules, %zu ips (%zu in no module), %zu with function, %zu with file:line; "
		"module files: %zu opened, %zu build-id mismatches, %zu missing, %zu unusable%s\n",
		s.modules, s.ips, s.outside, s.with_func, s.with_line, s.opened, s.mismatched, s.missing, s.unusable,
		dsmt_symbol_have_libdw() ? "" : " (built without libdw: module+offset only)");
}

void dsmt_symtab_free(struct dsmt_symtab *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->nmods; i++) {
#ifdef DSMT_HAVE_LIBDW
		if (t->mods[i].dwfl)
			dwfl_end(t->mods[i].dwfl);
#endif
		free(t->mods[i].path);
		free(t->mods[i].bid);
	}
	free(t->mods);
	free(t->idx);
	free(t->ents);
	free(t->sysroot);
	dsmt_hmap_free(&t->dedupe);
	dsmt_hmap_free(&t->cache);
	size_t it = 0;
	struct dsmt_hent *h;
	while ((h = dsmt_hmap_next(&t->strs, &it))) {
		for (struct istr *x = (struct istr *)(uintptr_t)h->v, *nx; x; x = nx) {
			nx = x->next;
			free(x);
		}
	}
	dsmt_hmap_free(&t->strs);
	free(t);
}

/* --- CPython location tables (3.11, 3.12; Objects/locations.md) ---
 * Each entry: a first byte with bit 7 set, code = bits 3-6, length = bits
 * 0-2 + 1 code units, then code-specific bytes (bit 7 clear).  The line
 * starts at co_firstlineno; codes 0-9 (short) keep it, 10-12 add code-10,
 * 13 (no columns) and 14 (long) add a signed varint, 15 has no line (and
 * keeps the running line).  Varints: 6-bit chunks, least significant first,
 * bit 6 = more follow; signed: value >> 1, negated when bit 0 is set. */

static int py_varint(const uint8_t *p, size_t n, size_t *i, uint64_t *out)
{
	uint64_t v = 0;
	for (unsigned shift = 0;; shift += 6) {
		if (*i >= n || shift > 42)
			return -1;
		uint8_t b = p[(*i)++];
		if (b & 0x80) /* the next entry starts: truncated */
			return -1;
		v |= (uint64_t)(b & 63) << shift;
		if (!(b & 64))
			break;
	}
	*out = v;
	return 0;
}

int dsmt_py_line(const uint8_t *linetable, size_t n, int firstlineno, unsigned instr)
{
	if (!linetable)
		return -1;
	int64_t line = firstlineno;
	uint64_t start = 0;
	size_t i = 0;
	while (i < n) {
		uint8_t b = linetable[i];
		if (!(b & 0x80))
			return -1;
		int code = (b >> 3) & 15;
		unsigned len = (b & 7) + 1u;
		size_t j = i + 1;
		int64_t delta = 0;
		if (code == 13 || code == 14) {
			uint64_t v;
			if (py_varint(linetable, n, &j, &v))
				return -1;
			delta = (v & 1) ? -(int64_t)(v >> 1) : (int64_t)(v >> 1);
		} else if (code >= 10 && code <= 12) {
			delta = code - 10;
		}
		line += delta;
		if (line < INT_MIN || line > INT_MAX)
			return -1;
		if ((uint64_t)instr < start + len)
			return code == 15 || line < 0 ? -1 : (int)line;
		start += len;
		for (i++; i < n && !(linetable[i] & 0x80); i++)
			;
	}
	return -1;
}
