/* dsmt_symbolize against a library built with -O0 -g (libsymtarget.so) and
 * its objcopy'd copies, loaded into this process:
 *   test_symbol LIB [NODEBUG STRIPPED DEBUGFILE LINKED]
 * LIB: the library; NODEBUG: --strip-debug; STRIPPED: --strip-all;
 * DEBUGFILE: --only-keep-debug; LINKED: --strip-debug with a .gnu_debuglink
 * to DEBUGFILE's name.  The copies are reported at the addresses of the
 * loaded LIB (objcopy keeps the segments), as a trace from another machine
 * would be.  Without libdw (dsmt_symbol_have_libdw() == 0) every case
 * expects module + offset only.  Also: hostile module paths (missing,
 * directory, FIFO, devices, empty, text, truncated ELF), ips outside every
 * module, overlapping and repeated modules, no file descriptor left open. */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "symbol.h"

static int have;

struct modinfo {
	uint64_t base, lo, hi;
	uint8_t bid[64];
	size_t bidlen;
	int found;
	const char *want; /* realpath of the wanted module; NULL: the main program */
};

/* what the tracer records for a module (tracer/writer.c module_cb) */
static int phdr_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	struct modinfo *mi = arg;
	if (mi->found)
		return 0;
	if (mi->want) {
		char rp[PATH_MAX];
		if (!info->dlpi_name || !*info->dlpi_name || !realpath(info->dlpi_name, rp) || strcmp(rp, mi->want))
			return 0;
	} else if (info->dlpi_name && *info->dlpi_name) {
		return 0;
	}
	uint64_t lo = ~0ull, hi = 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type == PT_LOAD) {
			uint64_t a = info->dlpi_addr + ph->p_vaddr;
			lo = a < lo ? a : lo;
			hi = a + ph->p_memsz > hi ? a + ph->p_memsz : hi;
		} else if (ph->p_type == PT_NOTE && !mi->bidlen) {
			const uint8_t *n = (const uint8_t *)(info->dlpi_addr + ph->p_vaddr);
			const uint8_t *end = n + ph->p_memsz;
			while (n + 12 <= end) {
				uint32_t namesz, descsz, type;
				memcpy(&namesz, n, 4);
				memcpy(&descsz, n + 4, 4);
				memcpy(&type, n + 8, 4);
				const uint8_t *name = n + 12;
				const uint8_t *desc = name + ((namesz + 3) & ~3u);
				if (desc + descsz > end)
					break;
				if (type == 3 && namesz == 4 && !memcmp(name, "GNU", 4) && descsz <= sizeof mi->bid) {
					memcpy(mi->bid, desc, descsz);
					mi->bidlen = descsz;
					break;
				}
				n = desc + ((descsz + 3) & ~3u);
			}
		}
	}
	mi->base = info->dlpi_addr;
	mi->lo = lo;
	mi->hi = hi;
	mi->found = 1;
	return 1;
}

static int ends_with(const char *s, const char *suf)
{
	if (!s)
		return 0;
	size_t a = strlen(s), b = strlen(suf);
	return a >= b && !strcmp(s + a - b, suf);
}

static int streq(const char *a, const char *b) { return a && b && !strcmp(a, b); }

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	if (!d)
		return -1;
	int n = 0;
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

static int copy_file(const char *from, const char *to, long limit)
{
	FILE *in = fopen(from, "rb");
	if (!in)
		return -1;
	FILE *out = fopen(to, "wb");
	if (!out) {
		fclose(in);
		return -1;
	}
	char buf[65536];
	long done = 0;
	size_t n;
	while ((limit < 0 || done < limit) && (n = fread(buf, 1, sizeof buf, in)) > 0) {
		if (limit >= 0 && done + (long)n > limit)
			n = (size_t)(limit - done);
		fwrite(buf, 1, n, out);
		done += (long)n;
	}
	fclose(in);
	return fclose(out);
}

static void mkdirs(const char *path)
{
	char b[PATH_MAX];
	snprintf(b, sizeof b, "%s", path);
	for (char *p = b + 1; *p; p++)
		if (*p == '/') {
			*p = 0;
			mkdir(b, 0755);
			*p = '/';
		}
	mkdir(b, 0755);
}

typedef void *(*call_fn)(int *);
typedef void *(*static_fn)(int *, void **);

struct target {
	struct modinfo mi;
	void *ip_call, *ip_static, *ip_inl, *static_fn;
	void *leaf;
	int line_call, line_static, line_inl;
};

static const char *the_lib;

/* expect: full = function, file and line; names = function names only */
enum { FULL, NAMES, EXPORTED, NOTHING };

static void check_target(struct dsmt_symtab *t, const struct target *g, const char *path, int level)
{
	struct dsmt_sym s;
	CHECK(dsmt_symbolize(t, (uint64_t)(uintptr_t)g->ip_call, &s) == 0);
	CHECK(streq(s.module, path));
	CHECK(s.offset == (uint64_t)(uintptr_t)g->ip_call - g->mi.base);
	if (!have)
		level = NOTHING;
	if (level == NOTHING) {
		CHECK(s.func == NULL && s.file == NULL && s.line == 0);
	} else {
		CHECK(streq(s.func, "st_call"));
		CHECK(streq(s.symbol, "st_call"));
		CHECK(!s.inlined);
	}
	if (level == FULL) {
		CHECK(ends_with(s.file, "/tests/symbol/symtarget.c"));
		CHECK(s.file && s.file[0] == '/' && !strstr(s.file, "/../") && !strstr(s.file, "/./"));
		CHECK(s.line == g->line_call);
		if (s.line != g->line_call)
			fprintf(stderr, "  st_call: line %d, expected %d (%s)\n", s.line, g->line_call, path);
	} else {
		CHECK(s.file == NULL);
	}

	CHECK(dsmt_symbolize(t, (uint64_t)(uintptr_t)g->ip_static, &s) == 0);
	if (level == FULL || level == NAMES)
		CHECK(streq(s.func, "st_static_call"));
	else
		CHECK(s.func == NULL); /* static: not in .dynsym, and never a neighbour's name */
	if (level == FULL) {
		CHECK(s.line == g->line_static);
		CHECK(ends_with(s.file, "/symtarget.c"));
	}

	CHECK(dsmt_symbolize(t, (uint64_t)(uintptr_t)g->ip_inl, &s) == 0);
	printf("%s: inlined call: %s%s%s at %s:%d (+0x%" PRIx64 ")\n", path, s.func ? s.func : "?",
	       s.inlined ? " inlined in " : "", s.inlined ? s.symbol : "", s.file ? s.file : "?", s.line, s.offset);
	if (level == FULL) {
		CHECK(streq(s.func, "st_inl"));
		CHECK(s.inlined == 1);
		CHECK(streq(s.symbol, "st_outer"));
		CHECK(s.line == g->line_inl);
		if (s.line != g->line_inl || !streq(s.func, "st_inl"))
			fprintf(stderr, "  st_inl: %s line %d, expected st_inl line %d\n", s.func ? s.func : "(null)",
				s.line, g->line_inl);
	} else if (level == NAMES || level == EXPORTED) {
		CHECK(streq(s.func, "st_outer")); /* the ELF symbol: inlining needs DWARF */
		CHECK(!s.inlined);
	} else {
		CHECK(s.func == NULL);
	}

	/* a function's own address (not a return address): pass ip + 1 */
	CHECK(dsmt_symbolize(t, (uint64_t)(uintptr_t)g->leaf + 1, &s) == 0);
	if (level != NOTHING)
		CHECK(streq(s.func, "st_leaf"));
}

static struct dsmt_symtab *one(const struct target *g, const char *path, const uint8_t *bid, size_t bidlen)
{
	struct dsmt_symtab *t = dsmt_symtab_new();
	CHECK(t != NULL);
	CHECK(dsmt_symtab_add_module(t, g->mi.base, g->mi.lo, g->mi.hi, path, bid, bidlen) == 0);
	return t;
}

__attribute__((noinline)) static void *self_ret(void) { return __builtin_return_address(0); }

static void test_main_program(void)
{
	struct modinfo mi = {0};
	dl_iterate_phdr(phdr_cb, &mi);
	CHECK(mi.found);
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
	CHECK(n > 0);
	exe[n > 0 ? n : 0] = 0;
	struct dsmt_symtab *t = dsmt_symtab_new();
	CHECK(dsmt_symtab_add_module(t, mi.base, mi.lo, mi.hi, exe, mi.bid, mi.bidlen) == 0);
	int line = __LINE__ + 1;
	void *ip = self_ret();
	struct dsmt_sym s;
	CHECK(dsmt_symbolize(t, (uint64_t)(uintptr_t)ip, &s) == 0);
	CHECK(streq(s.module, exe));
	if (have) {
		CHECK(streq(s.func, "test_main_program"));
		CHECK(ends_with(s.file, "/test_symbol.c"));
		CHECK(s.line == line);
	}
	dsmt_symtab_free(t);
}

static void test_lookups_and_cache(const struct target *g)
{
	struct dsmt_symtab *t = one(g, the_lib, g->mi.bid, g->mi.bidlen);
	check_target(t, g, the_lib, FULL);
	struct dsmt_symstats st;
	dsmt_symtab_get_stats(t, &st);
	size_t ips = st.ips;
	struct dsmt_sym a, b;
	CHECK(dsmt_symbolize(t, (uint64_t)(uintptr_t)g->ip_call, &a) == 0);
	CHECK(dsmt_symbolize(t, (uint64_t)(uintptr_t)g->ip_call, &b) == 0);
	CHECK(a.func == b.func && a.file == b.file && a.line == b.line && a.module == b.module);
	dsmt_symtab_get_stats(t, &st);
	CHECK(st.ips == ips); /* cached */
	CHECK(st.modules == 1);
	CHECK(st.opened == (size_t)have);
	CHECK(st.mismatched == 0 && st.missing == 0 && st.unusable == 0);
	/* the first byte of the module: ip - 1 would leave it, ip is used */
	CHECK(dsmt_symbolize(t, g->mi.lo, &a) == 0);
	CHECK(a.offset == g->mi.lo - g->mi.base);
	CHECK(dsmt_symbolize(t, g->mi.hi - 1, &a) == 0);
	CHECK(dsmt_symbolize(t, g->mi.hi, &a) == -1);
	CHECK(a.module == NULL && a.func == NULL);
	CHECK(dsmt_symbolize(t, g->mi.lo - 1, &a) == -1);
	CHECK(dsmt_symbolize(t, 0, &a) == -1);
	CHECK(dsmt_symbolize(t, UINT64_MAX, &a) == -1);
	CHECK(dsmt_symbolize(t, 0, NULL) == -1);
	dsmt_symtab_stats(t, stdout);
	dsmt_symtab_free(t);

	/* no build-id recorded: no check */
	t = one(g, the_lib, NULL, 0);
	check_target(t, g, the_lib, FULL);
	dsmt_symtab_free(t);
}

int main(int argc, char **argv);

/* at most one module file open: modules are closed and reopened as lookups
 * alternate, earlier results' strings stay valid, descriptors stay bounded */
static void test_eviction(const struct target *g)
{
	struct modinfo mi = {0};
	dl_iterate_phdr(phdr_cb, &mi);
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
	exe[n > 0 ? n : 0] = 0;
	int fds = count_fds();
	struct dsmt_symtab *t = dsmt_symtab_new();
	dsmt_symtab_set_max_open(t, 1);
	CHECK(dsmt_symtab_add_module(t, mi.base, mi.lo, mi.hi, exe, mi.bid, mi.bidlen) == 0);
	CHECK(dsmt_symtab_add_module(t, g->mi.base, g->mi.lo, g->mi.hi, the_lib, g->mi.bid, g->mi.bidlen) == 0);
	struct dsmt_sym first, s;
	CHECK(dsmt_symbolize(t, (uint64_t)(uintptr_t)g->ip_call, &first) == 0);
	uint64_t exe_ips[3] = {(uint64_t)(uintptr_t)main + 1, (uint64_t)(uintptr_t)test_eviction + 1,
			       (uint64_t)(uintptr_t)count_fds + 1};
	const char *exe_f[3] = {"main", "test_eviction", "count_fds"};
	uint64_t lib_ips[3] = {(uint64_t)(uintptr_t)g->ip_static, (uint64_t)(uintptr_t)g->ip_inl,
			       (uint64_t)(uintptr_t)g->leaf + 1};
	const char *lib_f[3] = {"st_static_call", "st_inl", "st_leaf"};
	for (int i = 0; i < 3; i++) {
		CHECK(dsmt_symbolize(t, exe_ips[i], &s) == 0);
		if (have)
			CHECK(streq(s.func, exe_f[i]));
		CHECK(count_fds() - fds <= 2);
		CHECK(dsmt_symbolize(t, lib_ips[i], &s) == 0);
		if (have)
			CHECK(streq(s.func, lib_f[i]));
		CHECK(count_fds() - fds <= 2);
	}
	if (have) {
		CHECK(streq(first.func, "st_call"));
		CHECK(ends_with(first.file, "/symtarget.c"));
	}
	struct dsmt_symstats st;
	dsmt_symtab_get_stats(t, &st);
	CHECK(st.opened == 2 * (size_t)have); /* reopening is not counted again */
	dsmt_symtab_free(t);
	CHECK(count_fds() == fds);
}

static void test_build_id_mismatch(const struct target *g)
{
	if (!g->mi.bidlen) {
		fprintf(stderr, "the library has no build-id: mismatch test skipped\n");
		return;
	}
	uint8_t bad[64];
	memcpy(bad, g->mi.bid, g->mi.bidlen);
	bad[0] ^= 0x5a;
	struct dsmt_symtab *t = one(g, the_lib, bad, g->mi.bidlen);
	check_target(t, g, the_lib, NOTHING);
	struct dsmt_symstats st;
	dsmt_symtab_get_stats(t, &st);
	CHECK(st.mismatched == (size_t)have);
	CHECK(st.opened == 0);
	dsmt_symtab_stats(t, stdout);
	dsmt_symtab_free(t);
	/* a shorter one (a different hash) */
	t = one(g, the_lib, g->mi.bid, g->mi.bidlen - 4);
	check_target(t, g, the_lib, NOTHING);
	dsmt_symtab_get_stats(t, &st);
	CHECK(st.mismatched == (size_t)have);
	dsmt_symtab_free(t);
}

static void test_copies(const struct target *g, char **argv, int argc, const char *tmp)
{
	if (argc < 6) {
		fprintf(stderr, "no objcopy: stripped copies not tested\n");
		return;
	}
	const char *nodebug = argv[2], *stripped = argv[3], *debugfile = argv[4], *linked = argv[5];
	struct dsmt_symtab *t = one(g, nodebug, g->mi.bid, g->mi.bidlen);
	check_target(t, g, nodebug, NAMES);
	dsmt_symtab_free(t);
	t = one(g, stripped, g->mi.bid, g->mi.bidlen);
	check_target(t, g, stripped, EXPORTED);
	dsmt_symtab_free(t);

	/* a separate debug file by build-id, under a sysroot */
	char root[PATH_MAX], p[PATH_MAX + 64];
	if (g->mi.bidlen > 1) {
		snprintf(root, sizeof root, "%s/root1", tmp);
		snprintf(p, sizeof p, "%s/opt/lib", root);
		mkdirs(p);
		snprintf(p, sizeof p, "%s/opt/lib/libx.so", root);
		CHECK(copy_file(nodebug, p, -1) == 0);
		int o = snprintf(p, sizeof p, "%s/usr/lib/debug/.build-id/%02x", root, g->mi.bid[0]);
		mkdirs(p);
		p[o++] = '/';
		for (size_t i = 1; i < g->mi.bidlen; i++)
			o += snprintf(p + o, sizeof p - (size_t)o, "%02x", g->mi.bid[i]);
		snprintf(p + o, sizeof p - (size_t)o, ".debug");
		CHECK(copy_file(debugfile, p, -1) == 0);
		t = dsmt_symtab_new();
		CHECK(dsmt_symtab_set_sysroot(t, root) == 0);
		CHECK(dsmt_symtab_add_module(t, g->mi.base, g->mi.lo, g->mi.hi, "/opt/lib/libx.so", g->mi.bid,
					     g->mi.bidlen) == 0);
		check_target(t, g, "/opt/lib/libx.so", FULL);
		dsmt_symtab_free(t);
		/* the same, the debug file of another build (its build-id differs): names only */
		snprintf(p, sizeof p, "%s/opt/lib/liby.so", root);
		CHECK(copy_file(nodebug, p, -1) == 0);
	}

	/* .gnu_debuglink, in .debug/ next to the file */
	snprintf(root, sizeof root, "%s/root2", tmp);
	snprintf(p, sizeof p, "%s/opt/lib/.debug", root);
	mkdirs(p);
	snprintf(p, sizeof p, "%s/opt/lib/liblinked.so", root);
	CHECK(copy_file(linked, p, -1) == 0);
	const char *base = strrchr(debugfile, '/');
	snprintf(p, sizeof p, "%s/opt/lib/.debug/%s", root, base ? base + 1 : debugfile);
	CHECK(copy_file(debugfile, p, -1) == 0);
	t = dsmt_symtab_new();
	CHECK(dsmt_symtab_set_sysroot(t, root) == 0);
	CHECK(dsmt_symtab_add_module(t, g->mi.base, g->mi.lo, g->mi.hi, "/opt/lib/liblinked.so", g->mi.bid,
				     g->mi.bidlen) == 0);
	check_target(t, g, "/opt/lib/liblinked.so", FULL);
	dsmt_symtab_free(t);
	/* the debuglink's file missing: names from .symtab */
	snprintf(root, sizeof root, "%s/root3", tmp);
	snprintf(p, sizeof p, "%s/opt/lib", root);
	mkdirs(p);
	snprintf(p, sizeof p, "%s/opt/lib/liblinked.so", root);
	CHECK(copy_file(linked, p, -1) == 0);
	t = dsmt_symtab_new();
	CHECK(dsmt_symtab_set_sysroot(t, root) == 0);
	CHECK(dsmt_symtab_add_module(t, g->mi.base, g->mi.lo, g->mi.hi, "/opt/lib/liblinked.so", g->mi.bid,
				     g->mi.bidlen) == 0);
	check_target(t, g, "/opt/lib/liblinked.so", NAMES);
	dsmt_symtab_free(t);
}

static void test_hostile(const struct target *g, const char *tmp)
{
	static char paths[64][PATH_MAX + 256];
	int np = 0;
	int expect[64]; /* 0: missing, 1: unusable, 2: either/any */
#define ADD(kind, ...) (snprintf(paths[np], sizeof paths[0], __VA_ARGS__), expect[np++] = (kind))
	ADD(0, "%s/does-not-exist.so", tmp);
	ADD(0, "%s/no-such-dir/lib.so", tmp);
	ADD(0, "relative/missing.so");
	ADD(0, "%s", "");
	ADD(1, "/");
	ADD(1, "%s", tmp);
	ADD(1, "/dev/null");
	ADD(1, "/dev/zero");
	ADD(1, "/proc/self/maps"); /* regular, size 0 */
	ADD(1, "/proc/self/mem");
	char fifo[PATH_MAX];
	snprintf(fifo, sizeof fifo, "%s/fifo", tmp);
	CHECK(mkfifo(fifo, 0600) == 0);
	ADD(1, "%s", fifo);
	char p[PATH_MAX + 64];
	snprintf(p, sizeof p, "%s/empty.so", tmp);
	fclose(fopen(p, "w"));
	ADD(1, "%s", p);
	snprintf(p, sizeof p, "%s/text.so", tmp);
	FILE *f = fopen(p, "w");
	for (int i = 0; i < 100; i++)
		fputs("this is not an ELF file\n", f);
	fclose(f);
	ADD(1, "%s", p);
	snprintf(p, sizeof p, "%s/loop-a", tmp);
	char q[PATH_MAX + 64];
	snprintf(q, sizeof q, "%s/loop-b", tmp);
	CHECK(symlink(q, p) == 0 && symlink(p, q) == 0);
	ADD(0, "%s", p);
	/* a long path */
	char longp[PATH_MAX + 100];
	memset(longp, 'x', sizeof longp - 1);
	longp[0] = '/';
	longp[sizeof longp - 1] = 0;
	/* truncated copies of the real library */
	struct stat sb;
	CHECK(stat(the_lib, &sb) == 0);
	long cuts[] = {4, 16, 52, 63, 64, 65, 100, 200, 512, 1000, 4096, 8192, sb.st_size / 3, sb.st_size / 2,
		       sb.st_size - 64, sb.st_size - 1};
	for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
		if (cuts[i] <= 0 || cuts[i] >= sb.st_size)
			continue;
		snprintf(p, sizeof p, "%s/trunc-%ld.so", tmp, cuts[i]);
		CHECK(copy_file(the_lib, p, cuts[i]) == 0);
		ADD(cuts[i] < 64 ? 1 : 2, "%s", p);
	}
	/* the library with bytes overwritten in its headers and tables */
	uint64_t x = 0x9e3779b97f4a7c15ULL;
	for (int k = 0; k < 12 && np < 64; k++) {
		snprintf(p, sizeof p, "%s/mangled-%d.so", tmp, k);
		CHECK(copy_file(the_lib, p, -1) == 0);
		int fd = open(p, O_RDWR);
		for (int j = 0; j < 8 + 4 * k; j++) {
			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			/* the ELF header and program headers first, then anywhere */
			off_t at = (off_t)(j < 4 ? 16 + x % 48 : x % (uint64_t)sb.st_size);
			uint8_t v = (uint8_t)(x >> 32);
			CHECK(pwrite(fd, &v, 1, at) == 1);
		}
		close(fd);
		ADD(2, "%s", p);
	}

	int fds = count_fds();
	struct dsmt_symtab *t = dsmt_symtab_new();
	uint64_t span = g->mi.hi - g->mi.lo;
	for (int i = 0; i < np; i++) {
		uint64_t at = 0x100000000000ULL + (uint64_t)i * 0x100000000ULL;
		/* half of them with the real build-id, half with none */
		CHECK(dsmt_symtab_add_module(t, at - (g->mi.lo - g->mi.base), at, at + span, paths[i],
					     i % 2 ? g->mi.bid : NULL, i % 2 ? g->mi.bidlen : 0) == 0);
	}
	CHECK(dsmt_symtab_add_module(t, 0x7f0000000000ULL, 0x7f0000000000ULL, 0x7f0000100000ULL, longp, NULL, 0) ==
	      0);
	for (int i = 0; i < np; i++) {
		uint64_t at = 0x100000000000ULL + (uint64_t)i * 0x100000000ULL;
		uint64_t bias = at - (g->mi.lo - g->mi.base);
		uint64_t ips[] = {at, at + 1, bias + ((uint64_t)(uintptr_t)g->ip_call - g->mi.base),
				  bias + ((uint64_t)(uintptr_t)g->ip_inl - g->mi.base), at + span - 1};
		for (size_t k = 0; k < sizeof ips / sizeof ips[0]; k++) {
			struct dsmt_sym s;
			CHECK(dsmt_symbolize(t, ips[k], &s) == 0);
			CHECK(streq(s.module, paths[i]));
			CHECK(s.offset == ips[k] - bias);
			if (expect[i] != 2)
				CHECK(s.func == NULL && s.file == NULL);
		}
	}
	struct dsmt_sym s;
	CHECK(dsmt_symbolize(t, 0x7f0000000010ULL, &s) == 0);
	CHECK(streq(s.module, longp) && s.func == NULL);
	struct dsmt_symstats st;
	dsmt_symtab_get_stats(t, &st);
	int n_missing = 1, n_unusable = 0;
	for (int i = 0; i < np; i++)
		n_missing += expect[i] == 0, n_unusable += expect[i] == 1;
	if (have) {
		CHECK(st.missing >= (size_t)n_missing);
		CHECK(st.unusable >= (size_t)n_unusable);
		CHECK(st.missing + st.unusable + st.opened + st.mismatched == (size_t)np + 1);
	} else {
		CHECK(st.missing == 0 && st.unusable == 0 && st.opened == 0);
	}
	dsmt_symtab_stats(t, stdout);
	dsmt_symtab_free(t);
	CHECK(count_fds() == fds);
#undef ADD
}

static void test_module_table(void)
{
	struct dsmt_symtab *t = dsmt_symtab_new();
	struct dsmt_sym s;
	CHECK(dsmt_symbolize(t, 0x1234, &s) == -1); /* empty */
	CHECK(dsmt_symtab_add_module(t, 0, 0x5000, 0x5000, "empty", NULL, 0) == -1);
	CHECK(dsmt_symtab_add_module(t, 0, 0x6000, 0x5000, "inverted", NULL, 0) == -1);
	CHECK(dsmt_symtab_add_module(NULL, 0, 0x1000, 0x2000, "x", NULL, 0) == -1);
	const uint8_t id[4] = {1, 2, 3, 4};
	CHECK(dsmt_symtab_add_module(t, 0x1000, 0x1000, 0x5000, "/nonexistent/a.so", id, 4) == 0);
	CHECK(dsmt_symtab_add_module(t, 0x1000, 0x1000, 0x5000, "/nonexistent/a.so", id, 4) == 0); /* again */
	CHECK(dsmt_symtab_add_module(t, 0x10000, 0x10000, 0x20000, NULL, NULL, 0) == 0);
	struct dsmt_symstats st;
	dsmt_symtab_get_stats(t, &st);
	CHECK(st.modules == 2);
	CHECK(dsmt_symbolize(t, 0x1800, &s) == 0 && streq(s.module, "/nonexistent/a.so") && s.offset == 0x800);
	CHECK(dsmt_symbolize(t, 0x10010, &s) == 0 && streq(s.module, "") && s.offset == 0x10);
	/* a module loaded later over the range replaces the earlier one */
	CHECK(dsmt_symbolize(t, 0x3500, &s) == 0 && streq(s.module, "/nonexistent/a.so"));
	CHECK(dsmt_symbolize(t, 0x7500, &s) == -1);
	CHECK(dsmt_symtab_add_module(t, 0x3000, 0x3000, 0x8000, "/nonexistent/b.so", NULL, 0) == 0);
	CHECK(dsmt_symbolize(t, 0x3500, &s) == 0 && streq(s.module, "/nonexistent/b.so") && s.offset == 0x500);
	CHECK(dsmt_symbolize(t, 0x7500, &s) == 0 && streq(s.module, "/nonexistent/b.so"));
	CHECK(dsmt_symbolize(t, 0x10010, &s) == 0 && streq(s.module, ""));
	/* an earlier-added module that overlaps a newer one stays replaced */
	CHECK(dsmt_symtab_add_module(t, 0x20000, 0x20000, 0x30000, "/nonexistent/c.so", NULL, 0) == 0);
	CHECK(dsmt_symbolize(t, 0x3500, &s) == 0 && streq(s.module, "/nonexistent/b.so"));
	CHECK(dsmt_symbolize(t, 0x2fff0, &s) == 0 && streq(s.module, "/nonexistent/c.so"));
	/* many modules, looked up in between */
	for (uint64_t i = 0; i < 2000; i++) {
		char name[32];
		snprintf(name, sizeof name, "/nonexistent/m%04u.so", (unsigned)i);
		uint64_t lo = 0x100000000ULL + (1999 - i) * 0x10000;
		CHECK(dsmt_symtab_add_module(t, lo, lo, lo + 0x8000, name, NULL, 0) == 0);
		if (i % 100 == 0)
			CHECK(dsmt_symbolize(t, lo + 0x10, &s) == 0 && streq(s.module, name));
	}
	for (uint64_t i = 0; i < 2000; i++) {
		char name[32];
		snprintf(name, sizeof name, "/nonexistent/m%04u.so", (unsigned)i);
		uint64_t lo = 0x100000000ULL + (1999 - i) * 0x10000;
		CHECK(dsmt_symbolize(t, lo + 0x7fff, &s) == 0 && streq(s.module, name));
		CHECK(dsmt_symbolize(t, lo + 0x8000, &s) == -1);
	}
	dsmt_symtab_stats(t, stdout);
	dsmt_symtab_free(t);
	dsmt_symtab_free(NULL);
	dsmt_symtab_stats(NULL, stdout);
}

int main(int argc, char **argv)
{
	alarm(100); /* a blocking open (a FIFO) fails the test instead of hanging it */
	have = dsmt_symbol_have_libdw();
	printf("libdw: %s\n", have ? "yes" : "no (module+offset only)");
	if (argc < 2) {
		fprintf(stderr, "usage: test_symbol LIB [NODEBUG STRIPPED DEBUGFILE LINKED]\n");
		return 1;
	}
	static char lib[PATH_MAX];
	if (!realpath(argv[1], lib)) {
		perror(argv[1]);
		return 1;
	}
	the_lib = lib;
	void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		fprintf(stderr, "dlopen: %s\n", dlerror());
		return 1;
	}
	struct target g = {0};
	g.mi.want = lib;
	dl_iterate_phdr(phdr_cb, &g.mi);
	CHECK(g.mi.found);
	CHECK(g.mi.bidlen >= 8);
	call_fn st_call = (call_fn)dlsym(h, "st_call");
	call_fn st_outer = (call_fn)dlsym(h, "st_outer");
	static_fn st_static = (static_fn)dlsym(h, "st_static");
	g.leaf = dlsym(h, "st_leaf");
	CHECK(st_call && st_outer && st_static && g.leaf);
	g.ip_call = st_call(&g.line_call);
	g.ip_static = st_static(&g.line_static, &g.static_fn);
	g.ip_inl = st_outer(&g.line_inl);

	char tmp[] = "/tmp/dsmt-symtest-XXXXXX";
	CHECK(mkdtemp(tmp) != NULL);

	test_module_table();
	test_main_program();
	test_lookups_and_cache(&g);
	test_build_id_mismatch(&g);
	test_eviction(&g);
	test_copies(&g, argv, argc, tmp);
	test_hostile(&g, tmp);

	char cmd[PATH_MAX + 16];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", tmp);
	return CHECK_DONE();
}
