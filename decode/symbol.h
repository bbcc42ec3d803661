/* Symbols for native instruction pointers (STACK records, call sites) and
 * lines for Python frames (PYCODE/PYSTACK records).
 *
 * Native: one dsmt_symtab per traced process holds its MODULE records.  An ip
 * is first placed in a module (module + offset = ip - base, always available),
 * then, when the decoder was built with elfutils libdw (DSMT_HAVE_LIBDW), the
 * module's file is opened (lazily, once), its GNU build-id compared with the
 * trace's, and the ip looked up: the function from DWARF or the ELF symbol
 * table (.symtab, else .dynsym), file:line from DWARF (the module's own or a
 * separate debug file found locally: /usr/lib/debug/.build-id/, or the
 * .gnu_debuglink next to the file, in .debug/ or under /usr/lib/debug —
 * never debuginfod, never the network).  A missing file, a file that is not
 * a regular ELF file (a directory, a FIFO: opened O_NONBLOCK and checked
 * before reading), or a build-id different from the trace's gives module +
 * offset only, counted (dsmt_symtab_stats).
 *
 * Return addresses: the ips of a STACK record and call sites are return
 * addresses — the instruction after the call.  Their line is looked up at
 * ip - 1 (inside the call instruction), so a call that ends a function or a
 * line is attributed to the calling line.  `offset` is of ip itself.
 *
 * Results are cached per ip; strings are owned by the symtab and stay valid
 * until dsmt_symtab_free.  A symtab is used by one thread at a time. */
#ifndef DSMT_DEC_SYMBOL_H
#define DSMT_DEC_SYMBOL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct dsmt_symtab; /* the modules of one traced process */

struct dsmt_sym {
	const char *func;   /* function (innermost inlined one when inlined), NULL: unknown */
	const char *file;   /* source file from DWARF, NULL: unknown */
	const char *module; /* the module's path as recorded */
	int line;           /* source line, 0 when file is NULL */
	uint64_t offset;    /* ip - module base (load bias) */
	int inlined;        /* func was inlined into symbol at this ip */
	const char *symbol; /* the ELF symbol (or DWARF function) containing ip: func's
	                     * caller when inlined, else func; NULL: unknown */
};

struct dsmt_symtab *dsmt_symtab_new(void);

/* A MODULE record: base = load bias, [lo, hi) = its PT_LOAD range, path,
 * build_id raw bytes (len 0: none recorded, no check).  A module that
 * overlaps earlier ones replaces them (a library unloaded and another loaded
 * there); the same module reported twice is kept once.  0, or -1 for an
 * empty/inverted range or no memory.  Adding a module after lookups drops
 * the ip cache (returned strings stay valid). */
int dsmt_symtab_add_module(struct dsmt_symtab *t, uint64_t base, uint64_t lo, uint64_t hi, const char *path,
			   const uint8_t *build_id, size_t build_id_len);

/* Open module files under DIR (DIR + path) instead of at their recorded
 * paths, for traces decoded on another machine (build-ids still checked).
 * Call before the first dsmt_symbolize.  0, -1 on no memory. */
int dsmt_symtab_set_sysroot(struct dsmt_symtab *t, const char *dir);

/* At most N module files open at once (default: from RLIMIT_NOFILE, 2
 * descriptors each); beyond it the least recently used is closed and
 * reopened when needed.  Results are unaffected. */
void dsmt_symtab_set_max_open(struct dsmt_symtab *t, size_t n);

/* 0 and *out filled (strings owned by t, valid until free); func/file NULL
 * when unknown; module+offset always when the ip falls in a module.
 * -1: no module holds ip (*out zeroed). */
int dsmt_symbolize(struct dsmt_symtab *t, uint64_t ip, struct dsmt_sym *out);

/* One line: modules, ips looked up, with function, with file:line,
 * build-id mismatches, missing files, unusable files, and whether libdw is
 * there.  Counts are of distinct ips and modules. */
void dsmt_symtab_stats(const struct dsmt_symtab *t, FILE *f);

struct dsmt_symstats {
	size_t modules;         /* distinct modules added */
	size_t ips;             /* distinct ips looked up (in a module or not) */
	size_t outside;         /* of those: in no module */
	size_t with_func;       /* of those: with a function name */
	size_t with_line;       /* of those: with file:line */
	size_t opened;          /* module files opened and matching */
	size_t mismatched;      /* module files whose build-id differs from the trace's */
	size_t missing;         /* module files not found (or not readable) */
	size_t unusable;        /* not a regular file, not ELF, or truncated beyond use */
};
void dsmt_symtab_get_stats(const struct dsmt_symtab *t, struct dsmt_symstats *s);

void dsmt_symtab_free(struct dsmt_symtab *t);

/* 1 when built with libdw (function names and lines), 0 when module+offset only. */
int dsmt_symbol_have_libdw(void);

/* CPython 3.11/3.12 location table (co_linetable, Objects/locations.md): the
 * line of the instruction at code-unit index instr, or -1 when not found,
 * when the instruction has no line, or when the table is malformed (never
 * reads outside linetable[0..n)). */
int dsmt_py_line(const uint8_t *linetable, size_t n, int firstlineno, unsigned instr);

#endif
