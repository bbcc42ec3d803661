/* NVTX injection.  The constructor sets NVTX_INJECTION64_PATH to this
 * library; every NVTX instance in the process (torch's, NCCL's, the `nvtx`
 * Python package's, a C program's) then dlopens us at its first call and
 * calls InitializeInjectionNvtx2, where we fill its function table.
 * Domains and registered strings are implemented, or their names are lost.
 * Handlers run with the caller's locks (and, from Python, the GIL) held:
 * they only intern the name and append one record. */
#define NVTX_NO_IMPL
#include <nvtx3/nvToolsExt.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

#include "format.h"
#include "preload.h"

/* Our definitions of the handles NVTX treats as opaque. */
struct nvtxDomainRegistration_st {
	uint32_t name_id;
	char name[];
};
struct nvtxStringRegistration_st {
	uint32_t id;
	char text[];
};

static __thread int depth DSMT_TLS; /* push/pop nesting on this thread */
static _Atomic uint64_t next_range_id = 1;

/* Step boundaries take a host-memory sample (tracer/writer.c): the push and
 * the matching pop of a range named like the decoder's default step marker
 * (train_step..., dsmemtrace:...) and a dsmemtrace:... mark.  The name
 * helpers below note whether the name they interned is one (is_step); push,
 * pop and mark act on it. */
static __thread int is_step DSMT_TLS;
static __thread int step_depth DSMT_TLS; /* depth + 1 of the open step range, 0: none */

static int step_name(const char *s)
{
	return s && (!strncmp(s, "train_step", 10) || !strncmp(s, "dsmemtrace:", 11));
}

static uint32_t intern_c(const char *s)
{
	is_step = step_name(s);
	return s ? dsmt_intern(s, strnlen(s, 1000)) : 0;
}

static uint32_t intern_w(const wchar_t *w)
{
	char buf[1001];
	size_t n = 0;
	for (; w && w[n] && n < 1000; n++)
		buf[n] = (w[n] > 0 && w[n] < 128) ? (char)w[n] : '?';
	buf[n] = 0;
	is_step = w && step_name(buf);
	return w ? dsmt_intern(buf, n) : 0;
}

static uint32_t domain_id(nvtxDomainHandle_t d) { return d ? d->name_id : 0; }

static uint32_t attr_name(const nvtxEventAttributes_t *a)
{
	if (!a || a->size < offsetof(nvtxEventAttributes_t, message) + sizeof(a->message))
		return 0;
	switch (a->messageType) {
	case NVTX_MESSAGE_TYPE_ASCII:
		return intern_c(a->message.ascii);
	case NVTX_MESSAGE_TYPE_UNICODE:
		return intern_w(a->message.unicode);
	case NVTX_MESSAGE_TYPE_REGISTERED:
		is_step = a->message.registered && step_name(a->message.registered->text);
		return a->message.registered ? a->message.registered->id : 0;
	default:
		return 0;
	}
}

/* Each handler guards against re-entry like the allocation hooks. */
#define GUARDED(expr) DSMT_RECORD(expr)

/* Push, start and mark: from torch.cuda.nvtx the GIL is held here, so the
 * first such event checks the frame layout against the public API
 * (pyframes.c).  They carry the caller's Python frames only with
 * DSMEMTRACE_NVTX_FRAMES=1: no report reads them, and the walk made a push
 * cost 567 ns instead of ~150 inside DeepSpeed ZeRO-3 (docs/decisions.md). */
static void ev(uint8_t rec, uint32_t dom, uint32_t name, uint64_t id)
{
	int py = rec == DSMT_REC_NVTX_PUSH || rec == DSMT_REC_NVTX_START || rec == DSMT_REC_NVTX_MARK
			 ? (dsmt_cfg.nvtx_frames ? DSMT_PY_GIL : DSMT_PY_GIL_CHECK)
			 : DSMT_PY_NONE;
	dsmt_ev_nvtx_py(rec, dom, name, id, py);
}

/* ---- CORE ---- */
static void mark(uint32_t dom, uint32_t name)
{
	int step = name && is_step;
	GUARDED(ev(DSMT_REC_NVTX_MARK, dom, name, 0));
	if (step)
		dsmt_host_sample_soon();
}
static void h_MarkEx(const nvtxEventAttributes_t *a) { mark(0, dsmt_in_hook ? 0 : attr_name(a)); }
static void h_MarkA(const char *m) { mark(0, dsmt_in_hook ? 0 : intern_c(m)); }
static void h_MarkW(const wchar_t *m) { mark(0, dsmt_in_hook ? 0 : intern_w(m)); }

static nvtxRangeId_t start(uint32_t dom, uint32_t name)
{
	nvtxRangeId_t id = atomic_fetch_add_explicit(&next_range_id, 1, memory_order_relaxed);
	GUARDED(ev(DSMT_REC_NVTX_START, dom, name, id));
	return id;
}
static nvtxRangeId_t h_RangeStartEx(const nvtxEventAttributes_t *a) { return start(0, dsmt_in_hook ? 0 : attr_name(a)); }
static nvtxRangeId_t h_RangeStartA(const char *m) { return start(0, dsmt_in_hook ? 0 : intern_c(m)); }
static nvtxRangeId_t h_RangeStartW(const wchar_t *m) { return start(0, dsmt_in_hook ? 0 : intern_w(m)); }
static void h_RangeEnd(nvtxRangeId_t id) { GUARDED(ev(DSMT_REC_NVTX_END, 0, 0, id)); }

static int push(uint32_t dom, uint32_t name)
{
	GUARDED(ev(DSMT_REC_NVTX_PUSH, dom, name, 0));
	if (name && is_step && !step_depth) {
		step_depth = depth + 1;
		dsmt_host_sample_soon();
	}
	return depth++;
}
static int pop(uint32_t dom)
{
	if (depth <= 0)
		return -1; /* NVTX: negative when there is no range to pop */
	GUARDED(ev(DSMT_REC_NVTX_POP, dom, 0, 0));
	if (step_depth == depth) {
		step_depth = 0;
		dsmt_host_sample_soon();
	}
	return --depth;
}
static int h_RangePushEx(const nvtxEventAttributes_t *a) { return push(0, dsmt_in_hook ? 0 : attr_name(a)); }
/* DSMEMTRACE_SELFTIME: the whole handler (interning the name included) for
 * the two calls torch.cuda.nvtx makes */
static int h_RangePushA(const char *m)
{
	uint64_t t0 = dsmt_cfg.selftime ? dsmt_now_ns() : 0;
	int r = push(0, dsmt_in_hook ? 0 : intern_c(m));
	if (t0)
		dsmt_selftime_nvtx(t0);
	return r;
}
static int h_RangePushW(const wchar_t *m) { return push(0, dsmt_in_hook ? 0 : intern_w(m)); }
static int h_RangePop(void)
{
	uint64_t t0 = dsmt_cfg.selftime ? dsmt_now_ns() : 0;
	int r = pop(0);
	if (t0)
		dsmt_selftime_nvtx(t0);
	return r;
}

/* ---- CORE2 (domains) ---- */
static void h_DomainMarkEx(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a)
{
	mark(domain_id(d), dsmt_in_hook ? 0 : attr_name(a));
}
static nvtxRangeId_t h_DomainRangeStartEx(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a)
{
	return start(domain_id(d), dsmt_in_hook ? 0 : attr_name(a));
}
static void h_DomainRangeEnd(nvtxDomainHandle_t d, nvtxRangeId_t id)
{
	(void)d;
	h_RangeEnd(id);
}
static int h_DomainRangePushEx(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a)
{
	return push(domain_id(d), dsmt_in_hook ? 0 : attr_name(a));
}
static int h_DomainRangePop(nvtxDomainHandle_t d) { return pop(domain_id(d)); }

static nvtxDomainHandle_t make_domain(const char *name)
{
	size_t n = strnlen(name, 1000);
	nvtxDomainHandle_t d = calloc(1, sizeof *d + n + 1);
	if (!d)
		return NULL;
	memcpy(d->name, name, n);
	int saved = dsmt_in_hook;
	dsmt_in_hook = 0;
	d->name_id = dsmt_intern(d->name, n);
	dsmt_in_hook = saved;
	return d;
}
static nvtxDomainHandle_t h_DomainCreateA(const char *name) { return name ? make_domain(name) : NULL; }
static nvtxDomainHandle_t h_DomainCreateW(const wchar_t *name)
{
	char buf[1001];
	size_t n = 0;
	for (; name && name[n] && n < 1000; n++)
		buf[n] = (name[n] > 0 && name[n] < 128) ? (char)name[n] : '?';
	buf[n] = 0;
	return name ? make_domain(buf) : NULL;
}
/* Handles stay valid for the life of the process: other threads may still
 * hold them, and events refer to their names by id. */
static void h_DomainDestroy(nvtxDomainHandle_t d) { (void)d; }

static nvtxStringHandle_t make_string(const char *s)
{
	size_t n = strnlen(s, 1000);
	nvtxStringHandle_t h = calloc(1, sizeof *h + n + 1);
	if (!h)
		return NULL;
	memcpy(h->text, s, n);
	h->id = dsmt_intern(h->text, n);
	return h;
}
static nvtxStringHandle_t h_DomainRegisterStringA(nvtxDomainHandle_t d, const char *s)
{
	(void)d;
	return s ? make_string(s) : NULL;
}
static nvtxStringHandle_t h_DomainRegisterStringW(nvtxDomainHandle_t d, const wchar_t *s)
{
	(void)d;
	if (!s)
		return NULL;
	char buf[1001];
	size_t n = 0;
	for (; s[n] && n < 1000; n++)
		buf[n] = (s[n] > 0 && s[n] < 128) ? (char)s[n] : '?';
	buf[n] = 0;
	return make_string(buf);
}

/* ---- injection entry point ---- */

struct slot {
	unsigned idx;
	NvtxFunctionPointer fn;
};

static void fill(const NvtxExportTableCallbacks *cb, NvtxCallbackModule m, const struct slot *s, size_t n)
{
	NvtxFunctionTable table = NULL;
	unsigned size = 0;
	if (!cb->GetModuleFunctionTable(m, &table, &size) || !table)
		return;
	for (size_t i = 0; i < n; i++)
		if (s[i].idx < size && table[s[i].idx])
			*table[s[i].idx] = s[i].fn;
}

#define F(x) ((NvtxFunctionPointer)(x))

DSMT_EXPORT int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t getExportTable)
{
	if (!getExportTable || dsmt_cfg.disabled)
		return 0;
	const NvtxExportTableCallbacks *cb = getExportTable(NVTX_ETID_CALLBACKS);
	if (!cb || cb->struct_size < sizeof *cb || !cb->GetModuleFunctionTable)
		return 0;
	static const struct slot core[] = {
		{NVTX_CBID_CORE_MarkEx, F(h_MarkEx)},
		{NVTX_CBID_CORE_MarkA, F(h_MarkA)},
		{NVTX_CBID_CORE_MarkW, F(h_MarkW)},
		{NVTX_CBID_CORE_RangeStartEx, F(h_RangeStartEx)},
		{NVTX_CBID_CORE_RangeStartA, F(h_RangeStartA)},
		{NVTX_CBID_CORE_RangeStartW, F(h_RangeStartW)},
		{NVTX_CBID_CORE_RangeEnd, F(h_RangeEnd)},
		{NVTX_CBID_CORE_RangePushEx, F(h_RangePushEx)},
		{NVTX_CBID_CORE_RangePushA, F(h_RangePushA)},
		{NVTX_CBID_CORE_RangePushW, F(h_RangePushW)},
		{NVTX_CBID_CORE_RangePop, F(h_RangePop)},
	};
	static const struct slot core2[] = {
		{NVTX_CBID_CORE2_DomainMarkEx, F(h_DomainMarkEx)},
		{NVTX_CBID_CORE2_DomainRangeStartEx, F(h_DomainRangeStartEx)},
		{NVTX_CBID_CORE2_DomainRangeEnd, F(h_DomainRangeEnd)},
		{NVTX_CBID_CORE2_DomainRangePushEx, F(h_DomainRangePushEx)},
		{NVTX_CBID_CORE2_DomainRangePop, F(h_DomainRangePop)},
		{NVTX_CBID_CORE2_DomainRegisterStringA, F(h_DomainRegisterStringA)},
		{NVTX_CBID_CORE2_DomainRegisterStringW, F(h_DomainRegisterStringW)},
		{NVTX_CBID_CORE2_DomainCreateA, F(h_DomainCreateA)},
		{NVTX_CBID_CORE2_DomainCreateW, F(h_DomainCreateW)},
		{NVTX_CBID_CORE2_DomainDestroy, F(h_DomainDestroy)},
	};
	fill(cb, NVTX_CB_MODULE_CORE, core, sizeof core / sizeof *core);
	fill(cb, NVTX_CB_MODULE_CORE2, core2, sizeof core2 / sizeof *core2);
	return 1;
}
