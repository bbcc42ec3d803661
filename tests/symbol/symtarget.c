/* A library for tests/symbol/test_symbol.c, built with -O0 -g: each st_*
 * function returns the return address of a call it makes and the line of
 * that call, which dsmt_symbolize must find. */
#define NOINL __attribute__((noinline, used))

NOINL void *st_leaf(void)
{
	return __builtin_return_address(0);
}

NOINL void *st_call(int *line)
{
	*line = __LINE__ + 1;
	void *r = st_leaf();
	return r;
}

static NOINL void *st_static_call(int *line)
{
	*line = __LINE__ + 1;
	void *r = st_leaf();
	return r;
}

/* the static function, through an exported one */
NOINL void *st_static(int *line, void **fn)
{
	*fn = (void *)st_static_call;
	return st_static_call(line);
}

static inline __attribute__((always_inline)) void *st_inl(int *line)
{
	*line = __LINE__ + 1;
	void *r = st_leaf();
	return r;
}

/* st_inl inlined here: the return address lies in st_outer's code, in st_inl's lines */
NOINL void *st_outer(int *line)
{
	void *r = st_inl(line);
	return r;
}
