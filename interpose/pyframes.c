/* Python frames per event, without the GIL and without the Python C API on
 * the hot path (DESIGN.md, "the GIL is never held"; MECHANICS.md 4.3 option 2).
 *
 * The allocator hook runs inside torch's allocator mutex with the GIL
 * released, often on threads that run no Python.  Taking the GIL there can
 * deadlock, and the public frame API needs it.  So the hooked thread reads
 * its own interpreter frames directly:
 *
 *   PyGILState_GetThisThreadState()          (reads a TLS key; no GIL needed)
 *     -> tstate->cframe->current_frame       (_PyInterpreterFrame *)
 *     -> follow ->previous, per frame f_code and prev_instr
 *
 * The thread is the owner of the chain: while it is inside a foreign call
 * (ctypes, torch ops: GIL released) or inside an NVTX handler (GIL held), no
 * one else links or unlinks its frames, and each frame holds a reference to
 * its code object.  Frames owned by the C stack (3.12 entry frames, owner 3)
 * and incomplete frames (prev_instr before co_code_adaptive +
 * _co_firsttraceable, as _PyFrame_IsIncomplete says) are skipped, as the
 * public API skips them.  instr = (prev_instr - co_code_adaptive) / 2: the
 * last instruction as an index of 16-bit code units (PyFrame_GetLasti / 2).
 *
 * Layouts are hard-coded per CPython minor version (3.11, 3.12; see
 * `layouts` below for where the numbers come from); any other version (or a
 * debug build, or PyPy) turns Python frames off with one line on stderr.
 * Nothing is walked until the layout has been checked against the public API
 * at a point where this thread holds the GIL (verify_here): a pending call
 * (Py_AddPendingCall, scheduled at the first event; it runs on the main
 * thread at its next eval-breaker check) and, the first time an NVTX handler
 * runs with the GIL held, the NVTX path.  A mismatch turns Python frames off
 * for the rest of the process with one line on stderr.  What is checked:
 *   - the raw walk and PyThreadState_GetFrame/PyFrame_GetBack yield the same
 *     code objects in the same order, the same number of frames;
 *   - per frame 2*instr == PyFrame_GetLasti, and instr < the code's size;
 *   - per code object: co_filename and co_qualname as we read them (compact
 *     unicode) equal PyUnicode_AsUTF8 of the attributes, co_firstlineno and
 *     the co_linetable bytes equal the attributes, 0 <= _co_firsttraceable
 *     <= its size.
 * That covers every offset the hot path uses.  DSMEMTRACE_PY_SELFTEST_FAIL=1
 * reads co_filename 8 bytes off (co_name: a valid str, so nothing unsafe is
 * dereferenced) to prove that a wrong layout is caught.
 *
 * Every pointer is checked cheaply before it is followed: non-NULL, 8-byte
 * aligned, above the first page; a code object must have ob_type ==
 * &PyCode_Type; a frame owner must be in range; the walk stops after a fixed
 * number of steps.  Before a walk Py_IsInitialized() must be true: during
 * finalisation the thread states of daemon threads are freed while those
 * threads may still run (a thread that was in a foreign call when
 * finalisation began reads its own, possibly freed, thread state only if it
 * passed that check first: a window of a few instructions, see README).
 *
 * Interning: code objects -> PYCODE records, once per process, through a
 * lock-free table keyed by the code object's address and validated with a
 * fingerprint: its co_filename/co_qualname pointers, co_firstlineno, and the
 * length and first and last 8 bytes of co_qualname (pymalloc hands a freed
 * code object's address, and its strings' addresses, to the next code object
 * of the same shape: pointers alone let exec'd functions dyn_2, dyn_4...
 * inherit dyn_0's id, as the test's `reuse` scenario showed on 3.11).  A
 * reused address re-interns; the record goes into the ring of the thread that saw the
 * code first, so another thread's event may reach the trace before the
 * definition (the decoder allows that).  Stacks of (code_id, instr) ->
 * PYSTACK records, interned per thread like native stacks (tracer.c). */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/types.h>

#include "driver.h" /* dsmt_real_dlsym */
#include "preload.h"
#include "pyframes.h"

#define MAX_DEPTH 128 /* DSMEMTRACE_PY_DEPTH upper bound (writer.c: PYSTACK) */
#define DEFAULT_DEPTH 32
#define NAME_MAX_BYTES 1000 /* file and qualname, as other strings */
#define LINETABLE_MAX 16384 /* longer tables are cut at an entry boundary */

/* Offsets (bytes) into CPython's structures, from the real headers: a
 * throwaway program compiled with -DPy_BUILD_CORE against
 * /usr/include/python3.11 (+ internal/; Debian 3.11.2, identical for pyenv
 * 3.11.7) and /root/.pyenv/versions/3.12.1/include/python3.12 (+ internal/)
 * printing offsetof() of each field and sizeof() of the unicode headers
 * (x86-64 and any LP64 target; release builds, no Py_DEBUG). */
struct layout {
	unsigned ver;                      /* major * 100 + minor */
	unsigned ts_cframe;                /* PyThreadState.cframe */
	unsigned cf_current;               /* _PyCFrame.current_frame */
	unsigned fr_code, fr_previous;     /* _PyInterpreterFrame.f_code, .previous */
	unsigned fr_prev_instr, fr_owner;  /* .prev_instr, .owner (char) */
	unsigned owner_max, owner_cstack;  /* largest owner value; FRAME_OWNED_BY_CSTACK (none: 255) */
	unsigned co_filename, co_qualname; /* PyCodeObject.co_filename, .co_qualname */
	unsigned co_firstlineno;           /* int */
	unsigned co_linetable;             /* bytes */
	unsigned co_firsttraceable;        /* int _co_firsttraceable */
	unsigned co_code;                  /* co_code_adaptive (16-bit code units) */
	unsigned u_ascii_data;             /* sizeof(PyASCIIObject): compact ASCII data */
	unsigned u_compact_data;           /* sizeof(PyCompactUnicodeObject): other compact data */
};
/* common to both: PyObject.ob_type 8, PyVarObject.ob_size 16 (code objects:
 * code units; bytes: length), PyASCIIObject.length 16, .state 32 (bits:
 * interned 0-1, kind 2-4, compact 5, ascii 6), PyBytesObject.ob_sval 32,
 * FRAME_OWNED_BY_GENERATOR 1 */
static const struct layout layouts[] = {
	{.ver = 311, .ts_cframe = 56, .cf_current = 8, .fr_code = 32, .fr_previous = 48, .fr_prev_instr = 56,
	 .fr_owner = 69, .owner_max = 2, .owner_cstack = 255, .co_filename = 112, .co_qualname = 128,
	 .co_firstlineno = 72, .co_linetable = 136, .co_firsttraceable = 168, .co_code = 184, .u_ascii_data = 48,
	 .u_compact_data = 72},
	{.ver = 312, .ts_cframe = 56, .cf_current = 0, .fr_code = 0, .fr_previous = 8, .fr_prev_instr = 56,
	 .fr_owner = 70, .owner_max = 3, .owner_cstack = 3, .co_filename = 112, .co_qualname = 128,
	 .co_firstlineno = 68, .co_linetable = 136, .co_firsttraceable = 176, .co_code = 192, .u_ascii_data = 40,
	 .u_compact_data = 56},
};
#define OB_TYPE 8
#define OB_SIZE 16
#define U_LENGTH 16
#define U_STATE 32
#define B_SVAL 32
#define OWNED_BY_GENERATOR 1

enum { PY_INIT, PY_OFF, PY_CHECK, PY_ON };
static _Atomic int py_state = PY_INIT;
static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static struct layout L;
static unsigned depth_max;
static char version[32]; /* "3.12.1" */
static const void *code_type, *unicode_type, *bytes_type;
static _Atomic int pending_armed, gil_checked;

/* the C API: resolved once, called only on the cold paths, apart from the
 * first two */
static int (*py_is_initialized)(void);
static void *(*py_this_tstate)(void);  /* PyGILState_GetThisThreadState */
static void *(*py_current_tstate)(void); /* _PyThreadState_UncheckedGet: non-NULL when attached */
static int (*py_add_pending)(int (*)(void *), void *);
static void *(*py_tstate_frame)(void *);
static void *(*py_frame_back)(void *);
static void *(*py_frame_code)(void *);
static int (*py_frame_lasti)(void *);
static void (*py_decref)(void *);
static void *(*py_getattr)(void *, const char *);
static const char *(*py_utf8)(void *, ssize_t *);
static long (*py_long)(void *);
static int (*py_bytes)(void *, char **, ssize_t *);
static void (*py_err_fetch)(void **, void **, void **);
static void (*py_err_restore)(void *, void *, void *);

/* ---- cheap validation ---- */

static inline int ok_ptr(const void *p) { return (uintptr_t)p >= 4096 && ((uintptr_t)p & 7) == 0; }
static inline const char *ld_ptr(const char *base, unsigned off)
{
	const char *p;
	memcpy(&p, base + off, sizeof p);
	return p;
}
static inline int32_t ld_i32(const char *base, unsigned off)
{
	int32_t v;
	memcpy(&v, base + off, sizeof v);
	return v;
}
static inline int64_t ld_i64(const char *base, unsigned off)
{
	int64_t v;
	memcpy(&v, base + off, sizeof v);
	return v;
}

/* ---- the walk ---- */

struct pyframe {
	const char *code;
	uint32_t instr;
	uint64_t fp; /* fingerprint() */
};

static inline uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	x ^= x >> 33;
	return x;
}

/* What a str holds, cheaply: its address, length and the first and last 8
 * bytes of its data, read as if it were compact ASCII (any other compact
 * string gives bytes of its own header or data: constant but for its utf8
 * cache, which may be filled once: one more definition, no harm).  Reading
 * 8 bytes from the ASCII data start stays inside any compact str's
 * allocation: sizeof(PyASCIIObject) + 8 <= the header plus the NUL, rounded
 * up to pymalloc's 16-byte blocks (48 -> 64, 40 -> 48); strings shorter
 * than 8 bytes contribute their block's padding, constant while they live. */
static inline uint64_t str_fp(const char *s, unsigned data)
{
	if (!ok_ptr(s))
		return 0;
	int64_t n = ld_i64(s, U_LENGTH);
	uint64_t h = (uintptr_t)s ^ ((uint64_t)n << 44);
	if (!(ld_i32(s, U_STATE) & (1 << 5)) || n < 0)
		return h; /* not compact: the address and length only */
	const char *d = s + data;
	uint64_t a, b;
	memcpy(&a, d, 8);
	memcpy(&b, d + (n >= 8 ? n - 8 : 0), 8);
	return h ^ a ^ (b * 0x9e3779b97f4a7c15ull); /* compared whole, never an index */
}

/* Up to max frames of the thread whose state is ts, innermost first.  The
 * offsets are copied to locals: stores to out[] could alias the global. */
static unsigned walk(const char *ts, struct pyframe *out, unsigned max)
{
	const unsigned o_code = L.fr_code, o_prev = L.fr_previous, o_pi = L.fr_prev_instr, o_owner = L.fr_owner,
		       owner_max = L.owner_max, cstack = L.owner_cstack, o_co = L.co_code,
		       o_first = L.co_firsttraceable;
	const void *ctype = code_type;
	const char *cf = ld_ptr(ts, L.ts_cframe);
	if (!ok_ptr(cf))
		return 0;
	const char *f = ld_ptr(cf, L.cf_current);
	unsigned n = 0;
	for (unsigned steps = 4 * max + 64; f && n < max && steps; steps--) {
		if (!ok_ptr(f))
			break;
		const char *co = ld_ptr(f, o_code);
		const char *pi = ld_ptr(f, o_pi);
		unsigned owner = *(const uint8_t *)(f + o_owner);
		const char *prev = ld_ptr(f, o_prev);
		if (!ok_ptr(co) || ld_ptr(co, OB_TYPE) != ctype || owner > owner_max)
			break;
		const char *c0 = co + o_co;
		if (owner != cstack && pi >= c0 &&
		    (owner == OWNED_BY_GENERATOR || pi >= c0 + 2 * (int64_t)ld_i32(co, o_first))) {
			out[n].code = co;
			out[n].instr = (uint32_t)((uintptr_t)(pi - c0) / 2);
			n++;
		}
		f = prev;
	}
	return n;
}

/* Fingerprints each frame's code object (co_filename's address,
 * co_firstlineno, str_fp of co_qualname: the file name's bytes too would
 * cost every frame of every event, and a reused code address whose
 * qualname, firstlineno and file name address are all equal but whose file
 * name is another is left undetected) and returns the stack's hash: one
 * multiply per frame on the dependency chain. */
static uint64_t fingerprint(struct pyframe *fr, unsigned n)
{
	const unsigned o_file = L.co_filename, o_qual = L.co_qualname, o_fl = L.co_firstlineno,
		       data = L.u_ascii_data;
	uint64_t h = 0x9e3779b97f4a7c15ull ^ n;
	for (unsigned i = 0; i < n; i++) {
		const char *co = fr[i].code;
		uint64_t fp = ((uintptr_t)ld_ptr(co, o_file) * 0xff51afd7ed558ccdull) ^ str_fp(ld_ptr(co, o_qual), data) ^
			      ((uint64_t)(uint32_t)ld_i32(co, o_fl) << 20);
		fr[i].fp = fp;
		h = (h ^ ((uintptr_t)co * 0xc4ceb9fe1a85ec53ull) ^ ((uint64_t)fr[i].instr << 40) ^ fp) * 0x100000001b3ull;
		h ^= h >> 29;
	}
	return h;
}

/* ---- reading str and bytes objects (compact unicode only) ---- */

/* UTF-8 of a str object into buf (at most cap bytes); "?" for strings that
 * are not compact; -1 when o is not a str at all. */
static int read_str(const char *o, char *buf, size_t cap, size_t *len)
{
	*len = 0;
	if (!ok_ptr(o) || ld_ptr(o, OB_TYPE) != unicode_type)
		return -1;
	uint32_t state = (uint32_t)ld_i32(o, U_STATE);
	int64_t n = ld_i64(o, U_LENGTH);
	unsigned kind = (state >> 2) & 7;
	if (!(state & (1u << 5)) || n < 0) {
		buf[0] = '?';
		*len = 1;
		return 0;
	}
	if (state & (1u << 6)) { /* compact ASCII */
		size_t m = (uint64_t)n < cap ? (size_t)n : cap;
		memcpy(buf, o + L.u_ascii_data, m);
		*len = m;
		return 0;
	}
	if (kind != 1 && kind != 2 && kind != 4) {
		buf[0] = '?';
		*len = 1;
		return 0;
	}
	const uint8_t *d = (const uint8_t *)o + L.u_compact_data;
	size_t w = 0;
	for (int64_t i = 0; i < n; i++) {
		uint32_t c;
		if (kind == 1)
			c = d[i];
		else if (kind == 2) {
			uint16_t c16;
			memcpy(&c16, d + 2 * i, 2);
			c = c16;
		} else
			memcpy(&c, d + 4 * i, 4);
		uint8_t u[4];
		size_t k;
		if (c < 0x80)
			u[0] = (uint8_t)c, k = 1;
		else if (c < 0x800)
			u[0] = (uint8_t)(0xc0 | c >> 6), u[1] = (uint8_t)(0x80 | (c & 0x3f)), k = 2;
		else if ((c >= 0xd800 && c < 0xe000) || c > 0x10ffff)
			u[0] = '?', k = 1; /* lone surrogate: not UTF-8 */
		else if (c < 0x10000)
			u[0] = (uint8_t)(0xe0 | c >> 12), u[1] = (uint8_t)(0x80 | ((c >> 6) & 0x3f)),
			u[2] = (uint8_t)(0x80 | (c & 0x3f)), k = 3;
		else
			u[0] = (uint8_t)(0xf0 | c >> 18), u[1] = (uint8_t)(0x80 | ((c >> 12) & 0x3f)),
			u[2] = (uint8_t)(0x80 | ((c >> 6) & 0x3f)), u[3] = (uint8_t)(0x80 | (c & 0x3f)), k = 4;
		if (w + k > cap)
			break;
		memcpy(buf + w, u, k);
		w += k;
	}
	*len = w;
	return 0;
}

/* The bytes of co_linetable, cut at an entry boundary (a byte with bit 7
 * set starts each entry of the 3.11+ location table) to LINETABLE_MAX. */
static const uint8_t *read_linetable(const char *co, uint32_t *len)
{
	const char *b = ld_ptr(co, L.co_linetable);
	*len = 0;
	if (!ok_ptr(b) || ld_ptr(b, OB_TYPE) != bytes_type)
		return NULL;
	int64_t n = ld_i64(b, OB_SIZE);
	const uint8_t *d = (const uint8_t *)b + B_SVAL;
	if (n < 0)
		return NULL;
	if (n > LINETABLE_MAX) {
		n = LINETABLE_MAX;
		while (n > 0 && !(d[n] & 0x80))
			n--;
	}
	*len = (uint32_t)n;
	return d;
}

/* ---- code objects: the process-wide table ---- */

/* Open addressing, 8 probes, never emptied.  id is a seqlock: 0 empty,
 * BUSY while one thread rewrites the entry; readers check it did not change
 * while they read the key.  Ids are unique, so equal means unchanged. */
#define CT_BITS 16
#define CT_MASK ((1u << CT_BITS) - 1)
#define BUSY UINT32_MAX
struct cent {
	uintptr_t key;
	uint64_t fp; /* fingerprint() */
	_Atomic uint32_t id;
};
static struct cent *ctab;
static _Atomic uint32_t next_code_id = 1;


#define RLX_LOAD(p) __atomic_load_n(p, __ATOMIC_RELAXED)
#define RLX_STORE(p, v) __atomic_store_n(p, v, __ATOMIC_RELAXED)

static int define_code(const char *co, uint32_t id)
{
	char file[NAME_MAX_BYTES], qual[NAME_MAX_BYTES];
	size_t fn, qn;
	if (read_str(ld_ptr(co, L.co_filename), file, sizeof file, &fn) < 0)
		file[0] = '?', fn = 1;
	if (read_str(ld_ptr(co, L.co_qualname), qual, sizeof qual, &qn) < 0)
		qual[0] = '?', qn = 1;
	uint32_t ltn;
	const uint8_t *lt = read_linetable(co, &ltn);
	int32_t first = ld_i32(co, L.co_firstlineno);
	return dsmt_pycode_define(id, file, (uint32_t)fn, qual, (uint32_t)qn, first > 0 ? (uint32_t)first : 0, lt,
				  ltn, L.ver);
}

static uint32_t code_id(const char *co, uint64_t fp)
{
	unsigned i = (unsigned)mix((uintptr_t)co) & CT_MASK;
	struct cent *slot = NULL;
	uint32_t slot_id = 0;
	for (unsigned k = 0; k < 8; k++) {
		struct cent *e = &ctab[(i + k) & CT_MASK];
		uint32_t v = atomic_load_explicit(&e->id, memory_order_acquire);
		if (v == 0) {
			slot = e; /* not in the table: take this empty slot */
			break;
		}
		if (v == BUSY)
			continue;
		uintptr_t key = RLX_LOAD(&e->key);
		uint64_t f = RLX_LOAD(&e->fp);
		atomic_thread_fence(memory_order_acquire);
		if (atomic_load_explicit(&e->id, memory_order_relaxed) != v || key != (uintptr_t)co)
			continue;
		if (f == fp)
			return v;
		slot = e; /* the address was reused by another code object */
		slot_id = v;
		break;
	}
	if (!slot) { /* the window is full: evict its first entry */
		slot = &ctab[i];
		slot_id = atomic_load_explicit(&slot->id, memory_order_relaxed);
	}
	uint32_t id = atomic_fetch_add_explicit(&next_code_id, 1, memory_order_relaxed);
	if (id == BUSY || define_code(co, id) != 0)
		return 0;
	/* publish unless another thread is rewriting the slot (then this id is
	 * just not cached: a second definition later, no harm) */
	if (slot_id != BUSY &&
	    atomic_compare_exchange_strong_explicit(&slot->id, &slot_id, BUSY, memory_order_acq_rel,
						    memory_order_relaxed)) {
		RLX_STORE(&slot->key, (uintptr_t)co);
		RLX_STORE(&slot->fp, fp);
		atomic_store_explicit(&slot->id, id, memory_order_release);
	}
	return id;
}

/* ---- the layout check (GIL held, on this thread) ---- */

static const char *mismatch;

static int check_str(void *co, unsigned off, const char *attr)
{
	char buf[NAME_MAX_BYTES];
	size_t n;
	int rc = read_str(ld_ptr((const char *)co, off), buf, sizeof buf, &n);
	void *s = py_getattr(co, attr);
	ssize_t sn = -1;
	const char *u = s ? py_utf8(s, &sn) : NULL;
	int good = rc == 0 && u && sn >= 0;
	if (good && !(n == 1 && buf[0] == '?'))
		good = (size_t)sn >= n && memcmp(u, buf, n) == 0 && ((size_t)sn == n || n >= sizeof buf - 4);
	if (s)
		py_decref(s);
	if (!good)
		mismatch = attr;
	return good;
}

static int check_code(void *co, uint32_t instr)
{
	const char *c = co;
	int64_t size = ld_i64(c, OB_SIZE);
	int32_t ft = ld_i32(c, L.co_firsttraceable);
	if (ft < 0 || ft > size || (int64_t)instr >= size) {
		mismatch = "_co_firsttraceable or the instruction index";
		return 0;
	}
	if (!check_str(co, L.co_filename, "co_filename") || !check_str(co, L.co_qualname, "co_qualname"))
		return 0;
	void *o = py_getattr(co, "co_firstlineno");
	long fl = o ? py_long(o) : -1;
	if (o)
		py_decref(o);
	if (fl != ld_i32(c, L.co_firstlineno)) {
		mismatch = "co_firstlineno";
		return 0;
	}
	o = py_getattr(co, "co_linetable");
	char *b = NULL;
	ssize_t bn = -1;
	int good = o && py_bytes(o, &b, &bn) == 0;
	uint32_t ln;
	const uint8_t *lt = read_linetable(c, &ln);
	good = good && lt && (bn <= LINETABLE_MAX ? (ssize_t)ln == bn : ln <= bn) && memcmp(lt, b, ln) == 0;
	if (o)
		py_decref(o);
	if (!good)
		mismatch = "co_linetable";
	return good;
}

/* 1 the layout matches, 0 it does not (mismatch says what), -1 nothing to
 * compare (this thread does not hold the GIL, or has no frames). */
static int verify_here(void)
{
	void *ts = py_this_tstate();
	if (!ts || py_current_tstate() != ts)
		return -1;
	struct pyframe raw[64];
	unsigned n = walk(ts, raw, 64), i = 0;
	void *et, *ev, *tb;
	py_err_fetch(&et, &ev, &tb);
	int good = 1;
	void *f = py_tstate_frame(ts);
	while (f && good) {
		if (i == 64)
			break; /* both walks agree on the 64 innermost frames */
		void *co = py_frame_code(f);
		int lasti = py_frame_lasti(f);
		if (i >= n) {
			mismatch = "the number of frames";
			good = 0;
		} else if (co != raw[i].code) {
			mismatch = "the code objects";
			good = 0;
		} else if (lasti >= 0 && (uint32_t)lasti != 2 * raw[i].instr) {
			mismatch = "the instruction offsets";
			good = 0;
		} else
			good = check_code(co, raw[i].instr);
		if (co)
			py_decref(co);
		void *b = py_frame_back(f);
		py_decref(f);
		f = b;
		i++;
	}
	if (f)
		py_decref(f);
	if (good && i < 64 && i != n) {
		mismatch = "the number of frames";
		good = 0;
	}
	py_err_restore(et, ev, tb);
	return good ? (i ? 1 : -1) : 0;
}

static void verdict(int r, const char *where)
{
	if (r > 0) {
		int expect = PY_CHECK;
		atomic_compare_exchange_strong(&py_state, &expect, PY_ON);
	} else if (r == 0 && atomic_exchange(&py_state, PY_OFF) != PY_OFF) {
		dsmt_warn("Python frames off: the frame layout check (%s) failed on CPython %s: %s not as the "
			  "public API says", where, version, mismatch ? mismatch : "?");
	}
}

static int pending_verify(void *arg)
{
	(void)arg;
	int saved = dsmt_in_hook;
	dsmt_in_hook = 1;
	if (atomic_load(&py_state) == PY_CHECK && py_is_initialized())
		verdict(verify_here(), "pending call");
	atomic_store(&pending_armed, 0); /* inconclusive: the next event asks again */
	dsmt_in_hook = saved;
	return 0;
}

/* ---- set-up ---- */

static void *sym(const char *name) { return dsmt_real_dlsym(RTLD_DEFAULT, name); }

static void init(void)
{
	int st = PY_OFF;
	long depth = DEFAULT_DEPTH;
	const char *e = secure_getenv("DSMEMTRACE_PY_DEPTH");
	if (e && *e) {
		char *end;
		errno = 0;
		long v = strtol(e, &end, 10);
		if (errno || *end || v < 0 || v > MAX_DEPTH)
			dsmt_warn("ignoring DSMEMTRACE_PY_DEPTH=%s (expected an integer in [0, %d])", e, MAX_DEPTH);
		else
			depth = v;
	}
	const char *(*get_version)(void) = (const char *(*)(void))sym("Py_GetVersion");
	if (depth == 0 || !get_version)
		goto out; /* off, or not a Python process: silently */
	const char *v = get_version();
	size_t vn = strcspn(v, " ");
	snprintf(version, sizeof version, "%.*s", (int)(vn < sizeof version ? vn : sizeof version - 1), v);
	const struct layout *l = NULL;
	if (!strstr(v, "PyPy") && !sym("_Py_RefTotal") && !sym("_Py_NegativeRefcount"))
		for (size_t i = 0; i < sizeof layouts / sizeof *layouts; i++) {
			char p[16];
			snprintf(p, sizeof p, "%u.%u.", layouts[i].ver / 100, layouts[i].ver % 100);
			if (!strncmp(v, p, strlen(p)))
				l = &layouts[i];
		}
	if (!l) {
		dsmt_warn("Python frames off: CPython %s is not supported (3.11 and 3.12 release builds are)", version);
		goto out;
	}
#define SYM(var, name) (var = (__typeof__(var))sym(name)) != NULL
	code_type = sym("PyCode_Type");
	unicode_type = sym("PyUnicode_Type");
	bytes_type = sym("PyBytes_Type");
	if (!code_type || !unicode_type || !bytes_type || !(SYM(py_is_initialized, "Py_IsInitialized")) ||
	    !(SYM(py_this_tstate, "PyGILState_GetThisThreadState")) ||
	    !(SYM(py_current_tstate, "_PyThreadState_UncheckedGet")) ||
	    !(SYM(py_add_pending, "Py_AddPendingCall")) || !(SYM(py_tstate_frame, "PyThreadState_GetFrame")) ||
	    !(SYM(py_frame_back, "PyFrame_GetBack")) || !(SYM(py_frame_code, "PyFrame_GetCode")) ||
	    !(SYM(py_frame_lasti, "PyFrame_GetLasti")) || !(SYM(py_decref, "Py_DecRef")) ||
	    !(SYM(py_getattr, "PyObject_GetAttrString")) || !(SYM(py_utf8, "PyUnicode_AsUTF8AndSize")) ||
	    !(SYM(py_long, "PyLong_AsLong")) || !(SYM(py_bytes, "PyBytes_AsStringAndSize")) ||
	    !(SYM(py_err_fetch, "PyErr_Fetch")) || !(SYM(py_err_restore, "PyErr_Restore"))) {
		dsmt_warn("Python frames off: CPython %s lacks a function or type this needs", version);
		goto out;
	}
#undef SYM
	void *t = mmap(NULL, sizeof(struct cent) << CT_BITS, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		       -1, 0);
	if (t == MAP_FAILED)
		goto out;
	ctab = t;
	L = *l;
	e = secure_getenv("DSMEMTRACE_PY_SELFTEST_FAIL");
	if (e && !strcmp(e, "1"))
		L.co_filename += 8; /* co_name: see the header comment */
	depth_max = (unsigned)depth;
	st = PY_CHECK;
out:
	atomic_store(&py_state, st);
}

/* ---- the hook ---- */

static __attribute__((noinline, cold)) int not_on(int py)
{
	pthread_once(&init_once, init);
	if (atomic_load(&py_state) != PY_CHECK || !py_is_initialized())
		return atomic_load(&py_state) == PY_ON;
	if (py == DSMT_PY_GIL) {
		void *ts = py_this_tstate();
		if (ts && py_current_tstate() == ts) {
			int r = verify_here();
			if (r >= 0)
				atomic_store(&gil_checked, 1);
			verdict(r, "NVTX");
			return atomic_load(&py_state) == PY_ON;
		}
	}
	/* a plain load first: until the check has run, every event comes here */
	if (!atomic_load_explicit(&pending_armed, memory_order_relaxed) && !atomic_exchange(&pending_armed, 1) &&
	    py_add_pending(pending_verify, NULL) != 0)
		atomic_store(&pending_armed, 0);
	return 0;
}

/* the NVTX path with the GIL, the first time after the pending call's check */
static __attribute__((noinline, cold)) int gil_check(void)
{
	void *ts = py_this_tstate();
	if (!ts || py_current_tstate() != ts)
		return atomic_load(&py_state) == PY_ON;
	int r = verify_here();
	if (r >= 0)
		atomic_store(&gil_checked, 1);
	verdict(r, "NVTX");
	return atomic_load(&py_state) == PY_ON;
}

uint32_t dsmt_py_stack(int py)
{
	int st = atomic_load_explicit(&py_state, memory_order_acquire);
	if (py == DSMT_PY_GIL_CHECK) { /* no frames: only the layout check, once */
		if (__builtin_expect(st == PY_INIT || st == PY_CHECK, 0))
			not_on(DSMT_PY_GIL);
		else if (st == PY_ON && !atomic_load_explicit(&gil_checked, memory_order_relaxed))
			gil_check();
		return 0;
	}
	if (__builtin_expect(st != PY_ON, 0) && (st == PY_OFF || !not_on(py)))
		return 0; /* off (not Python, DSMEMTRACE_PY_DEPTH=0, unsupported): one load */
	if (py == DSMT_PY_GIL && !atomic_load_explicit(&gil_checked, memory_order_relaxed) && !gil_check())
		return 0;
	if (!py_is_initialized())
		return 0;
	const char *ts = py_this_tstate();
	if (!ts)
		return 0; /* a thread Python never saw (autograd threads) */
	struct pyframe fr[MAX_DEPTH];
	unsigned n = walk(ts, fr, depth_max);
	if (!n)
		return 0;
	uint64_t h = mix(fingerprint(fr, n)) | 1; /* 0 marks an empty cache slot */
	uint32_t id = dsmt_pystack_cached(h);
	if (id)
		return id;
	uint32_t pairs[2 * MAX_DEPTH];
	for (unsigned i = 0; i < n; i++) {
		pairs[2 * i] = code_id(fr[i].code, fr[i].fp);
		pairs[2 * i + 1] = fr[i].instr;
		if (!pairs[2 * i])
			return 0;
	}
	return dsmt_pystack_define(h, pairs, n);
}

__attribute__((constructor)) static void pyframes_ctor(void) { dsmt_py_hook = dsmt_py_stack; }
