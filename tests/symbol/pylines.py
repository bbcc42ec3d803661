"""Dump CPython code objects for tests/symbol/test_pyline.c: for each code
object its co_firstlineno, co_linetable and, for every 16-bit code unit, the
line CPython itself gives (co_lines(); -1 for no line).

Output (stdout), one line each:
    V <major*100+minor>
    C <firstlineno> <linetable hex> <line of unit 0>,<line of unit 1>,...
Exits 77 (meson: skipped) before 3.11, whose tables have another format."""
import sys
import types

if sys.version_info < (3, 11):
    print("python %d.%d has no 3.11 location tables: skipped" % sys.version_info[:2], file=sys.stderr)
    sys.exit(77)


# --- code shapes that exercise every entry form ---------------------------

def simple(a, b):
    return a + b


def loops(n):
    total = 0
    for i in range(n):
        if i % 3 == 0:
            continue
        while total > 100:
            total -= 7
        total += i
    else:
        total += 1
    return total


def handlers(path):
    try:
        with open(path) as f:
            data = f.read()
    except (OSError, ValueError) as e:
        data = str(e)
    except Exception:
        raise
    finally:
        path = None
    return data


def comprehensions(xs):
    a = [x * 2 for x in xs if x]
    b = {x: y for x, y in zip(xs, xs[1:])}
    c = (x for x in xs)
    d = lambda q: (q,
                   q + 1)
    return a, b, list(c), d(3)


def generator(n):
    for i in range(n):
        yield i
    yield from range(3)


async def coroutine(x):
    async with x as y:
        async for z in y:
            await z


def long_call(a):
    return dict(
        alpha=a,


        beta=a.attribute.chained.lookup(1, 2, 3)[4:5],
        gamma=[
            1,
            2,
        ],
    )


def jumps(x):
    if x:
        return 1
    # a long gap of lines below gives large line deltas (long form)
    y = x
    return y + 10000000000000000000000


def wide_columns(x):
    return xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx + x


class Klass:
    attr = 1

    def method(self, *args, **kw):
        return super().__init__(*args, **kw)

    @property
    def prop(self):
        return self.attr


def walk(co):
    yield co
    for c in co.co_consts:
        if isinstance(c, types.CodeType):
            yield from walk(c)


def lines_of(co):
    n = len(co.co_code) // 2
    lines = [-1] * n
    for start, end, line in co.co_lines():
        for b in range(start, end, 2):
            if b // 2 < n:
                lines[b // 2] = -1 if line is None else line
    return lines


def codes():
    with open(__file__, encoding="utf-8") as f:
        yield from walk(compile(f.read(), __file__, "exec"))
    # synthetic: a function starting far down (large firstlineno), many lines
    src = "\n" * 5000 + "def far(x):\n" + "".join("    x = x + %d\n" % i for i in range(300)) + \
          "\n" * 3000 + "    return x\n"
    yield from walk(compile(src, "<far>", "exec"))
    # real modules of the standard library
    import importlib.util
    for name in ("argparse", "typing", "dataclasses", "json.decoder", "asyncio.base_events",
                 "collections", "inspect", "enum"):
        spec = importlib.util.find_spec(name)
        if spec is None or not spec.origin or not spec.origin.endswith(".py"):
            continue
        with open(spec.origin, encoding="utf-8") as f:
            yield from walk(compile(f.read(), spec.origin, "exec"))


def main():
    out = sys.stdout
    out.write("V %d\n" % (sys.version_info[0] * 100 + sys.version_info[1]))
    for co in codes():
        out.write("C %d %s %s\n" % (co.co_firstlineno, co.co_linetable.hex() or "-",
                                    ",".join(map(str, lines_of(co))) or "-"))


if __name__ == "__main__":
    main()
