/* The preloaded surface: constructor, symbol resolution, recursion guard. */
#ifndef DSMT_PRELOAD_H
#define DSMT_PRELOAD_H

#include <stdatomic.h>

#include "tracer.h"

/* Finds the original definition of `sym`: first the next object in the global
 * scope, else the loaded library whose path contains `hint` (libraries loaded
 * RTLD_LOCAL, e.g. torch's libc10.so), never `self`.  Warns once and returns
 * NULL when there is none; callers must not call NULL. */
DSMT_HIDDEN void *dsmt_resolve(const char *sym, const char *hint, const void *self);

/* Lazily resolved pointer to the original of a hooked function. */
#define DSMT_REAL_NAMED(fn, name, hint)                                                          \
	({                                                                                       \
		static _Atomic(__typeof__(&fn)) real_;                                           \
		static _Atomic int tried_; /* resolve (and warn) once, found or not */           \
		__typeof__(&fn) f_ = atomic_load_explicit(&real_, memory_order_relaxed);         \
		if (__builtin_expect(!f_, 0) && !atomic_exchange(&tried_, 1)) {                  \
			f_ = (__typeof__(&fn))dsmt_resolve(name, hint, (const void *)&fn);       \
			atomic_store_explicit(&real_, f_, memory_order_release);                 \
		} else if (!f_) {                                                                \
			f_ = atomic_load_explicit(&real_, memory_order_acquire);                 \
		}                                                                                \
		f_;                                                                              \
	})

#define DSMT_REAL(fn, hint) DSMT_REAL_NAMED(fn, #fn, hint)

/* Same for a function we call but do not hook (no self to exclude). */
#define DSMT_LOOKUP(type, name, hint)                                                            \
	({                                                                                       \
		static _Atomic(type) p_;                                                         \
		static _Atomic int tried_;                                                       \
		type q_ = atomic_load_explicit(&p_, memory_order_relaxed);                       \
		if (__builtin_expect(!q_, 0) && !atomic_exchange(&tried_, 1)) {                  \
			q_ = (type)dsmt_resolve(name, hint, NULL);                               \
			atomic_store_explicit(&p_, q_, memory_order_release);                    \
		} else if (!q_) {                                                                \
			q_ = atomic_load_explicit(&p_, memory_order_acquire);                    \
		}                                                                                \
		q_;                                                                              \
	})

/* Runs `body` (the recording) unless we are already inside our own code. */
#define DSMT_RECORD(body)                  \
	do {                               \
		if (!dsmt_in_hook) {       \
			dsmt_in_hook = 1;  \
			body;              \
			dsmt_in_hook = 0;  \
		}                          \
	} while (0)

#endif
