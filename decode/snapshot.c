/* --torch-snapshot: a process's allocator state at the end of its trace, as
 * the dict torch.cuda.memory._snapshot() returns ('segments' with their
 * blocks, 'device_traces', 'allocator_settings'), written as a pickle
 * (protocol 2) by a small writer of our own: dicts, lists, str, int, bool,
 * None, a 2-tuple, and the memo (a stack's frames and every key are written
 * once, then referenced). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "decode.h"

/* ---- pickle protocol 2 ---- */

struct pk {
	FILE *f;
	uint32_t memo; /* next memo index */
};

static void pk_u32(struct pk *w, uint32_t v)
{
	unsigned char b[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16),
			      (unsigned char)(v >> 24)};
	fwrite(b, 1, 4, w->f);
}

static void pk_op(struct pk *w, int op) { fputc(op, w->f); }

/* the object just written goes into the memo; returns its index */
static uint32_t pk_put(struct pk *w)
{
	uint32_t i = w->memo++;
	if (i < 256) {
		pk_op(w, 'q'); /* BINPUT */
		fputc((int)i, w->f);
	} else {
		pk_op(w, 'r'); /* LONG_BINPUT */
		pk_u32(w, i);
	}
	return i;
}

static void pk_get(struct pk *w, uint32_t i)
{
	if (i < 256) {
		pk_op(w, 'h'); /* BINGET */
		fputc((int)i, w->f);
	} else {
		pk_op(w, 'j'); /* LONG_BINGET */
		pk_u32(w, i);
	}
}

static void pk_int(struct pk *w, int64_t v)
{
	if (v >= 0 && v < 256) {
		pk_op(w, 'K'); /* BININT1 */
		fputc((int)v, w->f);
	} else if (v >= 0 && v < 65536) {
		pk_op(w, 'M'); /* BININT2 */
		fputc((int)(v & 0xff), w->f);
		fputc((int)(v >> 8), w->f);
	} else if (v >= INT32_MIN && v <= INT32_MAX) {
		pk_op(w, 'J'); /* BININT */
		pk_u32(w, (uint32_t)(int32_t)v);
	} else {
		pk_op(w, 0x8a); /* LONG1: little-endian two's complement, as short as it goes */
		unsigned char b[8];
		int n = 0;
		for (; n < 8; n++)
			b[n] = (unsigned char)((uint64_t)v >> (8 * n));
		while (n > 1 && ((b[n - 1] == 0 && !(b[n - 2] & 0x80)) || (b[n - 1] == 0xff && (b[n - 2] & 0x80))))
			n--;
		fputc(n, w->f);
		fwrite(b, 1, (size_t)n, w->f);
	}
}

/* an unsigned value (addresses, sizes): LONG1 with a zero byte on top when
 * its top bit is set */
static void pk_uint(struct pk *w, uint64_t v)
{
	if (v <= INT64_MAX) {
		pk_int(w, (int64_t)v);
		return;
	}
	unsigned char b[9];
	for (int n = 0; n < 8; n++)
		b[n] = (unsigned char)(v >> (8 * n));
	b[8] = 0;
	pk_op(w, 0x8a);
	fputc(9, w->f);
	fwrite(b, 1, 9, w->f);
}

/* length of a valid UTF-8 sequence at s (0: invalid) */
static size_t utf8_len(const unsigned char *s)
{
	if (s[0] < 0x80)
		return 1;
	size_t n = s[0] >= 0xf0 && s[0] < 0xf5 ? 4 : s[0] >= 0xe0 ? 3 : s[0] >= 0xc2 && s[0] < 0xe0 ? 2 : 0;
	if (!n || s[0] >= 0xf5)
		return 0;
	for (size_t i = 1; i < n; i++)
		if ((s[i] & 0xc0) != 0x80)
			return 0;
	if ((n == 3 && s[0] == 0xe0 && s[1] < 0xa0) || (n == 4 && s[0] == 0xf0 && s[1] < 0x90) ||
	    (n == 4 && s[0] == 0xf4 && s[1] >= 0x90) || (n == 3 && s[0] == 0xed && s[1] >= 0xa0))
		return 0;
	return n;
}

/* BINUNICODE; a byte that is not UTF-8 becomes '?' (paths are bytes) */
static void pk_str(struct pk *w, const char *s)
{
	const unsigned char *p = (const unsigned char *)(s ? s : "");
	size_t len = strlen((const char *)p);
	pk_op(w, 'X');
	pk_u32(w, (uint32_t)len);
	for (size_t i = 0; i < len;) {
		size_t n = utf8_len(p + i);
		if (!n) {
			fputc('?', w->f);
			i++;
			continue;
		}
		fwrite(p + i, 1, n, w->f);
		i += n;
	}
}

/* dictionary keys: each written once, then taken from the memo */
enum { K_SEGMENTS, K_DEVICE_TRACES, K_ALLOC_SETTINGS, K_DEVICE, K_ADDRESS, K_TOTAL_SIZE, K_ALLOCATED_SIZE,
       K_ACTIVE_SIZE, K_REQUESTED_SIZE, K_STREAM, K_SEGMENT_TYPE, K_POOL_ID, K_IS_EXPANDABLE, K_FRAMES, K_BLOCKS,
       K_SIZE, K_STATE, K_FILENAME, K_LINE, K_NAME, K_ACTION, K_ADDR, K_TIME_US, K_DEVICE_FREE,
       /* values */
       V_ALLOC, V_FREE_REQUESTED, V_FREE_COMPLETED, V_SEGMENT_ALLOC, V_SEGMENT_FREE, V_OOM, V_LARGE, V_SMALL,
       V_ACTIVE_ALLOCATED, V_INACTIVE, NKEYS };
static const char *const key_text[NKEYS] = {
	"segments", "device_traces", "allocator_settings", "device", "address", "total_size", "allocated_size",
	"active_size", "requested_size", "stream", "segment_type", "segment_pool_id", "is_expandable", "frames",
	"blocks", "size", "state", "filename", "line", "name", "action", "addr", "time_us", "device_free",
	"alloc", "free_requested", "free_completed", "segment_alloc", "segment_free", "oom", "large", "small",
	"active_allocated", "inactive",
};

struct snapw {
	struct pk w;
	uint32_t key_memo[NKEYS]; /* 1 + memo index (0: not written yet) */
	uint32_t *stack_memo;     /* per stack: 1 + memo index of its frames list */
	const struct dsmt_tsnap *s;
};

static void key(struct snapw *o, int k)
{
	if (o->key_memo[k]) {
		pk_get(&o->w, o->key_memo[k] - 1);
		return;
	}
	pk_str(&o->w, key_text[k]);
	o->key_memo[k] = pk_put(&o->w) + 1;
}

static void kv_uint(struct snapw *o, int k, uint64_t v)
{
	key(o, k);
	pk_uint(&o->w, v);
}

/* a stack's frames: [{'filename': .., 'line': .., 'name': ..}, ...] */
static void frames(struct snapw *o, uint32_t stack)
{
	key(o, K_FRAMES);
	if (stack >= o->s->nstacks) {
		pk_op(&o->w, ']'); /* EMPTY_LIST */
		return;
	}
	if (o->stack_memo[stack]) {
		pk_get(&o->w, o->stack_memo[stack] - 1);
		return;
	}
	const struct dsmt_tstack *t = &o->s->stacks[stack];
	pk_op(&o->w, ']');
	o->stack_memo[stack] = pk_put(&o->w) + 1;
	if (!t->n)
		return;
	pk_op(&o->w, '('); /* MARK */
	for (size_t i = 0; i < t->n; i++) {
		pk_op(&o->w, '}');
		pk_op(&o->w, '(');
		key(o, K_FILENAME);
		pk_str(&o->w, t->f[i].file);
		kv_uint(o, K_LINE, (uint64_t)(t->f[i].line > 0 ? t->f[i].line : 0));
		key(o, K_NAME);
		pk_str(&o->w, t->f[i].name);
		pk_op(&o->w, 'u'); /* SETITEMS */
	}
	pk_op(&o->w, 'e'); /* APPENDS */
}

/* one block of a segment: {'address', 'size', 'requested_size', 'state', 'frames'} */
static void block(struct snapw *o, uint64_t addr, uint64_t size, int active, uint32_t stack)
{
	pk_op(&o->w, '}');
	pk_op(&o->w, '(');
	kv_uint(o, K_ADDRESS, addr);
	kv_uint(o, K_SIZE, size);
	kv_uint(o, K_REQUESTED_SIZE, active ? size : 0); /* the trace has the block's size only */
	key(o, K_STATE);
	key(o, active ? V_ACTIVE_ALLOCATED : V_INACTIVE);
	frames(o, active ? stack : UINT32_MAX);
	pk_op(&o->w, 'u');
}

static int cmp_block(const void *a, const void *b)
{
	const struct dsmt_tblock *x = a, *y = b;
	if (x->device != y->device)
		return x->device < y->device ? -1 : 1;
	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/* one segment dict; blocks[0..nb) are the live blocks inside it, by address */
static void segment(struct snapw *o, const struct dsmt_tseg *sg, const struct dsmt_tblock *b, size_t nb)
{
	uint64_t used = 0, largest = 0;
	for (size_t i = 0; i < nb; i++) {
		used += b[i].size;
		if (b[i].size > largest)
			largest = b[i].size;
	}
	pk_op(&o->w, '}');
	pk_op(&o->w, '(');
	key(o, K_DEVICE);
	pk_int(&o->w, sg->device);
	kv_uint(o, K_ADDRESS, sg->addr);
	kv_uint(o, K_TOTAL_SIZE, sg->size);
	kv_uint(o, K_ALLOCATED_SIZE, used);
	kv_uint(o, K_ACTIVE_SIZE, used);
	kv_uint(o, K_REQUESTED_SIZE, used);
	kv_uint(o, K_STREAM, 0); /* the trace does not record streams */
	key(o, K_SEGMENT_TYPE);
	/* torch's small pool: 2 MiB segments of blocks up to 1 MiB */
	key(o, sg->size <= (2u << 20) && largest <= (1u << 20) && !sg->expandable ? V_SMALL : V_LARGE);
	key(o, K_POOL_ID);
	pk_int(&o->w, 0);
	pk_int(&o->w, 0);
	pk_op(&o->w, 0x86); /* TUPLE2 */
	key(o, K_IS_EXPANDABLE);
	pk_op(&o->w, sg->expandable ? 0x88 : 0x89); /* NEWTRUE / NEWFALSE */
	key(o, K_FRAMES);
	pk_op(&o->w, ']');
	pk_op(&o->w, 'u');
	key(o, K_BLOCKS); /* every byte of the segment: the live blocks and the gaps between them */
	pk_op(&o->w, ']');
	pk_op(&o->w, '(');
	uint64_t at = sg->addr, end = sg->addr + sg->size;
	for (size_t i = 0; i < nb; i++) {
		if (b[i].addr > at)
			block(o, at, b[i].addr - at, 0, UINT32_MAX);
		block(o, b[i].addr, b[i].size, 1, b[i].stack);
		at = b[i].addr + b[i].size;
	}
	if (at < end)
		block(o, at, end - at, 0, UINT32_MAX);
	pk_op(&o->w, 'e');
	pk_op(&o->w, 's'); /* SETITEM: blocks */
}

static void trace_entry(struct snapw *o, const struct dsmt_tev *t, int action)
{
	pk_op(&o->w, '}');
	pk_op(&o->w, '(');
	key(o, K_ACTION);
	key(o, action);
	if (action == V_OOM) {
		kv_uint(o, K_DEVICE_FREE, 0); /* not in the trace */
	} else {
		kv_uint(o, K_ADDR, t->addr);
	}
	kv_uint(o, K_SIZE, t->size);
	kv_uint(o, K_STREAM, 0);
	kv_uint(o, K_TIME_US, t->ts_ns / 1000);
	frames(o, t->stack);
	pk_op(&o->w, 'u');
}

void dsmt_write_torch_snapshot(FILE *f, const struct dsmt_process *p)
{
	static const struct dsmt_tsnap none = {.maxdev = -1};
	const struct dsmt_tsnap *s = p->tsnap ? p->tsnap : &none;
	struct snapw o;
	memset(&o, 0, sizeof(o));
	o.w.f = f;
	o.s = s;
	o.stack_memo = calloc(s->nstacks ? s->nstacks : 1, sizeof(*o.stack_memo));
	struct dsmt_tblock *b = malloc((s->nblocks ? s->nblocks : 1) * sizeof(*b));
	char *placed = calloc(s->nblocks ? s->nblocks : 1, 1);
	if (!o.stack_memo || !b || !placed) {
		free(o.stack_memo);
		free(b);
		free(placed);
		fputs("dsmemdecode: out of memory\n", stderr);
		return;
	}
	if (s->nblocks)
		memcpy(b, s->blocks, s->nblocks * sizeof(*b));
	qsort(b, s->nblocks, sizeof(*b), cmp_block);

	pk_op(&o.w, 0x80); /* PROTO 2 */
	fputc(2, f);
	pk_op(&o.w, '}');
	pk_op(&o.w, '(');
	key(&o, K_SEGMENTS);
	pk_op(&o.w, ']');
	pk_op(&o.w, '(');
	/* segments (sorted by device and address) with the blocks inside them */
	size_t j = 0;
	for (size_t i = 0; i < s->nsegs; i++) {
		const struct dsmt_tseg *sg = &s->segs[i];
		while (j < s->nblocks && (b[j].device < sg->device || (b[j].device == sg->device && b[j].addr < sg->addr)))
			j++;
		size_t k = j;
		while (k < s->nblocks && b[k].device == sg->device && b[k].addr + b[k].size <= sg->addr + sg->size &&
		       (k == j || b[k].addr >= b[k - 1].addr + b[k - 1].size))
			k++;
		segment(&o, sg, b + j, k - j);
		memset(placed + j, 1, k - j);
		j = k;
	}
	/* a block outside every known segment (its segment predates the trace
	 * or its driver level): a segment of its own */
	for (size_t i = 0; i < s->nblocks; i++) {
		if (placed[i])
			continue;
		struct dsmt_tseg own = {b[i].device, 0, b[i].addr, b[i].size};
		segment(&o, &own, b + i, 1);
	}
	pk_op(&o.w, 'e');
	key(&o, K_DEVICE_TRACES); /* one list per device, events in replay order */
	pk_op(&o.w, ']');
	pk_op(&o.w, '(');
	for (int dev = 0; dev <= s->maxdev; dev++) {
		pk_op(&o.w, ']');
		int open = 0;
		for (size_t i = 0; i < s->ntrace; i++) {
			const struct dsmt_tev *t = &s->trace[i];
			if (t->device != dev)
				continue;
			if (!open) {
				pk_op(&o.w, '(');
				open = 1;
			}
			switch (t->action) {
			case DSMT_TA_ALLOC: trace_entry(&o, t, V_ALLOC); break;
			case DSMT_TA_FREE: /* torch: requested, then completed (no other stream held it) */
				trace_entry(&o, t, V_FREE_REQUESTED);
				trace_entry(&o, t, V_FREE_COMPLETED);
				break;
			case DSMT_TA_SEG_ALLOC: trace_entry(&o, t, V_SEGMENT_ALLOC); break;
			case DSMT_TA_SEG_FREE: trace_entry(&o, t, V_SEGMENT_FREE); break;
			default: trace_entry(&o, t, V_OOM); break;
			}
		}
		if (open)
			pk_op(&o.w, 'e');
	}
	pk_op(&o.w, 'e');
	key(&o, K_ALLOC_SETTINGS);
	pk_op(&o.w, '}');
	pk_op(&o.w, 'u');
	pk_op(&o.w, '.'); /* STOP */
	free(o.stack_memo);
	free(b);
	free(placed);
}
