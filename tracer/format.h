/* dsmemtrace trace format, version 1 — the single definition shared by the
 * tracer (writer) and the decoder (reader).  The prose specification with byte
 * tables is docs/trace-format.md; keep both in step.
 *
 * File layout
 *   A trace file is a concatenation of zstd frames.  Data frames reference
 *   the content before them (History, below), so decode with dsmemdecode
 *   (`--dump` prints every record); plain `zstd -d` cannot.
 *   frame 0   zstd skippable frame, magic DSMT_SKIPPABLE_MAGIC, payload:
 *               "DSMTRACE" (8 bytes)  u16le major  u16le minor  record stream
 *             (the record stream of the header holds META records only)
 *   frame 1.. ordinary zstd frames (content checksum on), each holding a
 *             record stream; each frame is ended (ZSTD_e_end) so a file cut
 *             anywhere decodes up to its last complete frame.
 *   Skippable frames with any other magic are ignored by readers.
 *
 * Record
 *   u8 type | uleb128 len | payload[len]
 *   A reader skips records whose type it does not know (len says how far).
 *   Payload fields are ULEB128 varints unless said otherwise ("s" = signed,
 *   zigzag-encoded varint; "str" = uleb128 length + bytes, no NUL).  Fields
 *   are read in order; a payload that ends early leaves the remaining fields
 *   at 0 (newer minor versions only ever append fields).
 *
 * History: every data frame after the first is compressed with the last
 * min(zstd_prefix_bytes, N) bytes of the decompressed content of the data
 * frames before it as a zstd prefix (ZSTD_CCtx_refPrefix /
 * ZSTD_DCtx_refPrefix), so repeated training steps compress against the
 * previous ones although every frame is ended.  The header's META
 * zstd_prefix_bytes gives the size (absent or 0: frames are independent).
 * A reader keeps that much history; a damaged frame ends decoding.
 *
 * Delta state (per frame, per thread): every event record belongs to the
 * thread named by the last THREAD record of the frame.  For each thread the
 * reader keeps {seq, ts, ptr, site, tot_alloc, tot_reserved}, all 0 at the
 * start of each frame (a THREAD record switches threads, it does not reset):
 *   seq  = prev.seq  + dseq       (global sequence number, dense, from 0)
 *   ts   = prev.ts   + dts        (units of ts_unit_ns since start_mono_ns)
 *   ptr  = prev.ptr  + sdptr      (zigzag)
 *   site = prev.site + sdsite     (zigzag; every event with a site updates it)
 *   torch ALLOC/FREE only (api DSMT_API_TORCH), the allocator's totals:
 *     tot_alloc    = prev.tot_alloc + (ALLOC ? size : -size) + stot_alloc
 *     tot_reserved = prev.tot_reserved + stot_reserved
 *   other ALLOC/FREE write 0 for both and leave the state alone.
 * The noisy fields dseq and dts come last in each event, so the repeated
 * part of consecutive steps stays one long match for zstd.
 *
 * Python frames (1.2): ALLOC, FREE, OOM, DRV, NVTX_PUSH, NVTX_START and
 * NVTX_MARK may carry one more field after dts: pystack, the PYSTACK id of
 * the Python frames of the calling thread at the event (absent or 0: none).
 */
#ifndef DSMT_FORMAT_H
#define DSMT_FORMAT_H

#include <stdint.h>

#define DSMT_SKIPPABLE_MAGIC 0x184D2A5DU
#define DSMT_MAGIC "DSMTRACE"
#define DSMT_MAGIC_LEN 8
#define DSMT_FORMAT_MAJOR 1 /* bumped only for incompatible changes */
#define DSMT_FORMAT_MINOR 3 /* bumped when records or trailing fields are added
                             * 1.1 (2026-11-30): DRV, SOURCE and SAMPLE records
                             * 1.2 (2026-11-30): PYCODE, PYSTACK; trailing pystack field
                             * 1.3 (2026-12-01): HOST records */
/* Format 1 was redefined once before any release (2026-11-30: field order,
 * site/totals deltas, frame history); traces of the earlier layout exist only
 * in this repository's history. */

/* default timestamp unit written in the header (META ts_unit_ns) */
#define DSMT_TS_UNIT_NS 1000

enum dsmt_rec {
	/* definitions: not tied to a thread */
	DSMT_REC_META = 0x01,   /* str key, str value */
	DSMT_REC_STRING = 0x02, /* id, str text.  id 0 is reserved for "none" */
	DSMT_REC_STACK = 0x03,  /* id, n, ip[0] (absolute), then n-1 x s(ip[i]-ip[i-1]);
	                         * ip[0] is the innermost frame (caller of the hook) */
	DSMT_REC_MODULE = 0x04, /* base (load bias), lo, hi (absolute address range of
	                         * its PT_LOAD segments), str path, str build_id (raw bytes) */
	DSMT_REC_THREAD = 0x05, /* tid, str name (may be empty) — switches the current thread */
	DSMT_REC_FLUSH = 0x06,  /* ts (absolute, ts units), next_seq: the writer started
	                         * draining at ts; every event committed before ts is in
	                         * this frame or an earlier one (next_seq = seqs claimed then) */
	DSMT_REC_PYCODE = 0x08, /* id, str file, str qualname, firstlineno, str linetable (the
	                         * code object's co_linetable bytes, CPython 3.11+ location
	                         * table), pyver (major*100+minor, e.g. 312).  id 0 = none */
	DSMT_REC_PYSTACK = 0x09, /* id, n, then n x (code_id, instr): Python frames, innermost
	                          * first; instr = the frame's last instruction as an index of
	                          * 16-bit code units into co_code (lines: decoder, from
	                          * co_linetable).  id 0 = none */
	DSMT_REC_SAMPLE = 0x07, /* next_seq ts (absolute) dev1 flags proc_used dev_used dev_total:
	                         * NVML's view of one device, read by the writer thread when
	                         * next_seq seqs had been claimed (replay it before event
	                         * next_seq).  proc_used: this process's bytes on the device
	                         * (valid when flags & DSMT_SAMPLE_PROC); dev_used/dev_total:
	                         * the whole device (all processes) */
	DSMT_REC_HOST = 0x0A,   /* next_seq ts (absolute) rss vsz (1.3): host memory of the
	                         * process, bytes (/proc/self/statm resident and size
	                         * times the page size), read by the writer thread every
	                         * DSMEMTRACE_HOST_SAMPLE_MS when next_seq seqs had been
	                         * claimed (it lies before event next_seq, like SAMPLE) */

	/* events: belong to the current thread; dseq and dts come last */
	DSMT_REC_ALLOC = 0x10, /* api dev1 sdptr size stream stack sdsite stot_alloc stot_reserved dseq dts */
	DSMT_REC_FREE = 0x11,  /* same fields as ALLOC; size 0 when the API gives none */
	DSMT_REC_OOM = 0x12,   /* dev1 size tot_alloc tot_reserved (absolute) stack sdsite dseq dts */
	/* driver level (CUDA driver API, seen by CUPTI or the entry-point wrappers):
	 * op (enum dsmt_drv_op) via (DSMT_VIA_* | DSMT_VIA_UNDER_RT) dev1 sdptr size
	 * aux stack sdsite dseq dts.  sdptr and sdsite update the thread's ptr and
	 * site state like ALLOC/FREE; the meaning of ptr, size and aux is per op. */
	DSMT_REC_DRV = 0x13,
	DSMT_REC_NVTX_PUSH = 0x20,  /* domain name dseq dts   (string ids, 0 = default/none) */
	DSMT_REC_NVTX_POP = 0x21,   /* domain dseq dts */
	DSMT_REC_NVTX_START = 0x22, /* range_id domain name dseq dts */
	DSMT_REC_NVTX_END = 0x23,   /* range_id dseq dts */
	DSMT_REC_NVTX_MARK = 0x24,  /* domain name dseq dts */
	DSMT_REC_LOST = 0x30,       /* count dseq dts — events this thread could not record */
	/* hand-over: from this event on, driver-level events come from `via`
	 * (DSMT_VIA_*, 0 = nothing records them); reason: enum dsmt_src_reason;
	 * name: string id (0 = none), e.g. the library that took CUPTI */
	DSMT_REC_SOURCE = 0x31, /* via reason name dseq dts */
	/* tracing paused / resumed (dsmemtrace_pause/resume, DSMEMTRACE_TOGGLE_SIGNAL):
	 * one record per device whose allocator totals are known (dev1 0 when none);
	 * totals as last reported by the allocator.  While paused nothing is recorded. */
	DSMT_REC_PAUSE = 0x40,  /* dev1 tot_alloc tot_reserved dseq dts */
	DSMT_REC_RESUME = 0x41, /* dev1 tot_alloc tot_reserved dseq dts */
};

/* history kept by writer and reader (META zstd_prefix_bytes) */
#define DSMT_PREFIX_BYTES (1u << 20)

/* dev1 = device index + 1; 0 = unknown / host */

/* API ids: which function produced an ALLOC or FREE */
enum dsmt_api {
	DSMT_API_TORCH = 1, /* c10::reportMemoryUsageToProfiler: one tensor block */

	DSMT_API_CUDA_MALLOC = 16,         /* cudaMalloc / cudaFree */
	DSMT_API_CUDA_MALLOC_ASYNC = 17,   /* cudaMallocAsync / cudaFreeAsync */
	DSMT_API_CUDA_MALLOC_MANAGED = 18, /* cudaMallocManaged / (cudaFree) */
	DSMT_API_CUDA_HOST_ALLOC = 19,     /* cudaHostAlloc, cudaMallocHost / cudaFreeHost */
	DSMT_API_CUDA_HOST_REGISTER = 20,  /* cudaHostRegister / cudaHostUnregister */
	DSMT_API_CUDA_FREE = 21,           /* cudaFree (FREE only: kind taken from the alloc) */
	DSMT_API_CUDA_FREE_HOST = 22,      /* cudaFreeHost (FREE only) */
	/* cudaFreeAsync is written as DSMT_API_CUDA_MALLOC_ASYNC, cudaHostUnregister
	 * as DSMT_API_CUDA_HOST_REGISTER */
};

/* SAMPLE flags */
#define DSMT_SAMPLE_PROC 1u /* proc_used is valid */

/* DRV: how the event was seen (low 4 bits of via) */
enum dsmt_via {
	DSMT_VIA_NONE = 0,
	DSMT_VIA_CUPTI = 1,    /* CUPTI driver-API callback (or resource callback) */
	DSMT_VIA_DLSYM = 2,    /* our wrapper of the entry point (dlsym / cuGetProcAddress / export) */
	DSMT_VIA_ACTIVITY = 3, /* a CUPTI activity record (module statics) */
};
/* DRV via bit: the driver call ran inside a hooked runtime call on the same
 * thread (cudaMalloc -> cuMemAlloc_v2): one allocation with that ALLOC/FREE */
#define DSMT_VIA_UNDER_RT 0x10u

/* DRV ops.  "handle" = CUmemGenericAllocationHandle.  Allocations are
 * recorded after the call succeeded; frees and releases before the call
 * (CUPTI: at API enter) so the address cannot be reused first.  Failed
 * calls are not recorded (a free whose call fails was recorded). */
enum dsmt_drv_op {
	DSMT_DRV_ALLOC = 1,         /* cuMemAlloc_v2, cuMemAllocPitch_v2: ptr size */
	DSMT_DRV_FREE = 2,          /* cuMemFree_v2: ptr */
	DSMT_DRV_ALLOC_MANAGED = 3, /* cuMemAllocManaged: ptr size aux=flags (freed by DRV_FREE) */
	DSMT_DRV_ALLOC_HOST = 4,    /* cuMemAllocHost_v2, cuMemHostAlloc: ptr size aux=flags */
	DSMT_DRV_FREE_HOST = 5,     /* cuMemFreeHost: ptr */
	DSMT_DRV_HOST_REGISTER = 6, /* cuMemHostRegister_v2: ptr size aux=flags */
	DSMT_DRV_HOST_UNREGISTER = 7, /* cuMemHostUnregister: ptr */
	DSMT_DRV_ALLOC_ASYNC = 8,   /* cuMemAllocAsync(_ptsz), cuMemAllocFromPoolAsync(_ptsz):
	                             * ptr size aux=pool (0 = the device's current pool) */
	DSMT_DRV_FREE_ASYNC = 9,    /* cuMemFreeAsync(_ptsz): ptr */
	DSMT_DRV_CREATE = 10,       /* cuMemCreate: ptr=handle size aux=location type
	                             * (CU_MEM_LOCATION_TYPE_*; dev1 from a DEVICE location) */
	DSMT_DRV_RELEASE = 11,      /* cuMemRelease: ptr=handle */
	DSMT_DRV_RETAIN = 12,       /* cuMemRetainAllocationHandle: ptr=handle aux=address */
	DSMT_DRV_MAP = 13,          /* cuMemMap: ptr=va size aux=handle */
	DSMT_DRV_UNMAP = 14,        /* cuMemUnmap: ptr=va size */
	DSMT_DRV_SET_ACCESS = 15,   /* cuMemSetAccess: ptr size aux=descriptor count */
	DSMT_DRV_RESERVE = 16,      /* cuMemAddressReserve: ptr size (address space only) */
	DSMT_DRV_ADDR_FREE = 17,    /* cuMemAddressFree: ptr size */
	DSMT_DRV_IMPORT = 18,       /* cuMemImportFromShareableHandle: ptr=handle aux=handle type */
	DSMT_DRV_IPC_OPEN = 19,     /* cuIpcOpenMemHandle_v2: ptr size (0 when unknown) */
	DSMT_DRV_IPC_CLOSE = 20,    /* cuIpcCloseMemHandle: ptr */
	DSMT_DRV_POOL_CREATE = 21,  /* cuMemPoolCreate: ptr=pool */
	DSMT_DRV_POOL_DESTROY = 22, /* cuMemPoolDestroy: ptr=pool */
	DSMT_DRV_POOL_TRIM = 23,    /* cuMemPoolTrimTo: ptr=pool size=minBytesToKeep */
	DSMT_DRV_CTX_CREATE = 24,   /* context created: ptr=context */
	DSMT_DRV_CTX_DESTROY = 25,  /* context about to be destroyed: ptr=context */
	DSMT_DRV_STATIC = 26,       /* module __device__ statics loaded: ptr size aux=CUPTI's
	                             * timestamp of the load (CLOCK_REALTIME ns).  Delivered by
	                             * CUPTI's activity buffers, so recorded (and placed in seq
	                             * order) up to DSMEMTRACE_FLUSH_MS after the load */
	DSMT_DRV_STATIC_FREE = 27,  /* module statics released: ptr size aux=timestamp */
};

/* SOURCE reasons */
enum dsmt_src_reason {
	DSMT_SRC_START = 1,     /* the first source of the process */
	DSMT_SRC_YIELD = 2,     /* another tool subscribed to CUPTI: we handed it over */
	DSMT_SRC_REFUSED = 3,   /* our cuptiSubscribe failed (another subscriber: nsys, ncu...) */
	DSMT_SRC_NO_CUPTI = 4,  /* libcupti not found or unusable */
	DSMT_SRC_DISABLED = 5,  /* DSMEMTRACE_CUPTI=0 */
	DSMT_SRC_FOREIGN = 6,   /* CUDA_INJECTION64_PATH named another tool's library */
};

#endif
