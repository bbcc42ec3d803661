#!/usr/bin/env python3
"""Process-lifecycle tests of libdsmemtrace.so: exit, signals, fork, spawn,
exec, SIGKILL at random moments, run ids, pause/resume.

  run_life.py SCENARIO --victim EXE --libdir DIR --preload LIB --decoder EXE

Every scenario runs tests/lifecycle/victim_life without the preload and with
it, and checks that the wait status (raw, core flag included), stdout and
stderr are the same, then checks the trace files against the victim's own log
of every allocator call (see victim_life.c), decoded with `dsmemdecode --dump`.
Traces are checked record by record: the torch ALLOC/FREE events in seq order
must be the log's A/F lines (op, pointer, size), the seqs dense from 0, no
LOST record, and the last FLUSH must cover every event (next_seq).

sigkill: --trials runs of `victim_life loop` killed by SIGKILL after 5..300 ms
(DSMEMTRACE_FLUSH_MS 20 or 50): each file decodes, and every event logged
before the time of the last FLUSH record is in it, in order; the gap between
the last FLUSH and the kill is printed.  Then --early runs killed right after
their first allocation: no file, or one that decodes.  LIFE_SEED=N repeats
a run's delays.

sigkill --bench FILE appends the gaps (one JSON line: date, seed, trials,
min/median/max and every gap) to FILE (BUILD/bench/sigkill_gap.jsonl from
the suite; figures of record: bench/sigkill_gap.jsonl); they are measured,
never asserted.

Faults (issue 8):
  threads      256 threads allocate and free for 10 s under the preload: it
               ends (no deadlock), and the decoder's allocs, frees, peak and
               end allocated equal the program's own counts and its
               allocator's counters, with no lost or missing event.
  diskfull     the trace directory fills up (a 256 KiB tmpfs when one can be
               mounted; always RLIMIT_FSIZE 64 KiB): the program's status and
               stdout are unchanged, stderr gains exactly one dsmemtrace line,
               the process is not killed by SIGXFSZ, and what was written
               decodes.
  unwritable   DSMEMTRACE_DIR unwritable (as uid 65534 when root), missing,
               or a regular file: same status and stdout, one stderr line
               naming the directory, no file anywhere.
  squat        the trace's own name already taken by a symbolic link (to a
               file outside) or by a file that is not a trace: neither is
               followed, replaced or written; one stderr line names both;
               the trace goes to NAME.1.zst, mode 0600 (DSMEMTRACE_FILE_MODE
               0640: 0640).
  mp-spawn     Python multiprocessing (spawn) children allocating through the
               stand-in torch: one file per process, each holding exactly its
               own process's allocations.
  setuid       victim_secure (victim_life linked against the library, so the
               loader maps it even where it ignores LD_PRELOAD) set-user-ID
               and set-group-ID to 65534: runs in secure mode and behaves
               exactly as victim_life does (no file anywhere, no environment
               set, no message); not set-ID, the same binary traces (control).
               Needs root and a filesystem without nosuid, else exit 77.

Scenarios: exit sigterm sigint sigsegv sigabrt own-handler ignored fork spawn
exec sigkill runid pause toggle nofile-signal threads diskfull unwritable squat
mp-spawn setuid.

Exit status 0 pass, 1 fail, 77 skip.
"""
import argparse
import json
import os
import random
import re
import select
import signal
import socket
import subprocess
import sys
import tempfile
import time

failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL: " + msg, file=sys.stderr)


def note(msg):
    print(msg)


# ---- processes --------------------------------------------------------------

class Proc(subprocess.Popen):
    """Popen that keeps the raw wait status (core-dump flag included)."""
    raw_status = None

    def _handle_exitstatus(self, sts, *a, **k):
        self.raw_status = sts
        return super()._handle_exitstatus(sts, *a, **k)


def describe(sts):
    if sts is None:
        return "no status"
    if os.WIFEXITED(sts):
        return "exit %d" % os.WEXITSTATUS(sts)
    if os.WIFSIGNALED(sts):
        s = os.WTERMSIG(sts)
        try:
            name = signal.Signals(s).name
        except ValueError:
            name = str(s)
        return "killed by %s%s" % (name, " (core dumped)" if os.WCOREDUMP(sts) else "")
    return "status 0x%x" % sts


CLEAN_VARS = ("LD_PRELOAD", "NVTX_INJECTION64_PATH", "CUDA_INJECTION64_PATH", "RANK", "LOCAL_RANK",
              "WORLD_SIZE", "TORCHELASTIC_RUN_ID", "GROUP_RANK")
CLEAN_PREFIXES = ("DSMEMTRACE_", "SLURM_", "OMPI_COMM_WORLD_", "PMI_", "PMIX_", "MPI_LOCALRANKID")


def base_env(libdir):
    env = {k: v for k, v in os.environ.items()
           if k not in CLEAN_VARS and not k.startswith(CLEAN_PREFIXES)}
    paths = [libdir] + [p for p in env.get("LD_LIBRARY_PATH", "").split(":") if p]
    env["LD_LIBRARY_PATH"] = ":".join(paths)
    env["STANDIN_DEVICE_MEM"] = str(1 << 30)
    env.pop("STANDIN_DEVICE_COUNT", None)
    return env


def preexec(ignore=(), pre=None):
    def f():
        if pre:
            pre()
        for s in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR2, signal.SIGSEGV, signal.SIGABRT,
                  signal.SIGPIPE):
            signal.signal(s, signal.SIG_DFL)
        for s in ignore:
            signal.signal(s, signal.SIG_IGN)
        signal.pthread_sigmask(signal.SIG_SETMASK, [])
    return f


class Run:
    pass


class Ctx:
    def __init__(self, args, tmp):
        self.a = args
        self.tmp = tmp
        self.env0 = base_env(args.libdir)
        self.host = socket.gethostname().replace("/", "_")
        self.n = 0

    def run(self, label, argv, traced, env=None, send=None, ignore=(), log=True, timeout=30, kill_after=None,
            pre=None, exe=None, tdir=None):
        """Runs the victim in a fresh directory (cwd) with its log there and,
        when traced, DSMEMTRACE_DIR=<dir>/traces.  send: a signal the driver
        sends once the victim printed "ready".  kill_after: seconds after
        which the driver sends SIGKILL."""
        self.n += 1
        d = os.path.join(self.tmp, "%02d-%s" % (self.n, label))
        os.makedirs(d)
        r = Run()
        r.label, r.dir, r.tdir, r.log = label, d, tdir or os.path.join(d, "traces"), os.path.join(d, "log")
        if not tdir:
            os.mkdir(r.tdir)
        cmd = [exe or self.a.victim] + argv + (["--log", r.log] if log else [])
        e = dict(self.env0)
        if traced:
            e["LD_PRELOAD"] = self.a.preload
            e["DSMEMTRACE_DIR"] = r.tdir
        e.update(env or {})
        r.cmd = cmd
        r.env = {k: v for k, v in e.items() if k not in os.environ or os.environ[k] != v}
        p = Proc(cmd, env=e, cwd=d, stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=preexec(ignore, pre))
        r.pid = p.pid
        r.t_start = time.monotonic_ns()
        first = b""
        if send is not None:
            deadline = time.monotonic() + timeout
            fd = p.stdout.fileno()
            while not first.endswith(b"\n") and time.monotonic() < deadline:
                rd, _, _ = select.select([fd], [], [], 0.5)
                if rd:
                    b = os.read(fd, 1)
                    if not b:
                        break
                    first += b
            if first == b"ready\n":
                p.send_signal(send)
            else:
                fail("%s: victim did not say ready (got %r)" % (label, first))
        if kill_after is not None:
            time.sleep(kill_after)
            r.t_kill = time.monotonic_ns()
            p.send_signal(signal.SIGKILL)
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
            fail("%s: timeout after %d s: %s" % (label, timeout, " ".join(cmd)))
        r.status = p.raw_status
        r.out = (first + out).decode(errors="replace")
        r.err = err.decode(errors="replace")
        r.loglines = read_log(r.log)
        return r

    def cmdline(self, r):
        return " ".join(["%s=%s" % kv for kv in sorted(r.env.items())] + r.cmd)

    def same(self, ref, r, stdout=True, stderr=True):
        """r (traced) behaved exactly like ref (plain)."""
        ok = True
        if ref.status != r.status:
            fail("%s: %s under the preload, %s without\n  command: %s\n  stderr: %s"
                 % (r.label, describe(r.status), describe(ref.status), self.cmdline(r), r.err.strip()))
            ok = False
        if stdout and ref.out != r.out:
            fail("%s: stdout differs under the preload:\n--- without\n%s--- with\n%s" % (r.label, ref.out, r.out))
            ok = False
        if stderr and ref.err != r.err:
            fail("%s: stderr differs under the preload:\n--- without\n%s--- with\n%s" % (r.label, ref.err, r.err))
            ok = False
        kinds = lambda L: [x[0] for x in L if x[0] in "AFafSRH"]
        if kinds(ref.loglines) != kinds(r.loglines):
            fail("%s: the victim did different things under the preload (log: %d lines, %d without)"
                 % (r.label, len(r.loglines), len(ref.loglines)))
            ok = False
        if ref.tdir and os.listdir(ref.tdir):
            fail("%s: trace files without the preload" % ref.label)
        return ok

    def files(self, r, killed=False):
        """The trace files in DSMEMTRACE_DIR.  Anything else there (a
        temporary file) is a failure, except after a SIGKILL (noted)."""
        stray = [f for f in os.listdir(r.dir) if "dsmemtrace" in f]
        if stray:
            fail("%s: trace files outside DSMEMTRACE_DIR: %s" % (r.label, stray))
        names = sorted(os.listdir(r.tdir))
        other = [f for f in names if not f.startswith("dsmemtrace.")]
        if other and killed:
            note("%s: left %s" % (r.label, other))
        elif other:
            fail("%s: DSMEMTRACE_DIR holds %s besides the traces" % (r.label, other))
        return [f for f in names if f.startswith("dsmemtrace.")]

    def name(self, pid, rank=None, sfx=""):
        return "dsmemtrace.%s.%d%s%s.zst" % (self.host, pid, ".rank%s" % rank if rank is not None else "", sfx)

    def expect_files(self, r, names):
        got = self.files(r)
        if sorted(names) != got:
            fail("%s: trace files %s, expected %s\n  command: %s" % (r.label, got, sorted(names), self.cmdline(r)))
            return False
        return True

    def decode(self, path, label):
        return Trace(self.a.decoder, path, label)


# ---- the victim's log and the decoded trace -----------------------------------

def read_log(path):
    out = []
    try:
        with open(path) as f:
            data = f.read()
    except FileNotFoundError:
        return out
    for line in data.split("\n")[:-1]:  # a last line without \n was cut by a kill
        w = line.split()
        if not w:
            continue
        k = w[0]
        if k in "AFaf":
            out.append((k, int(w[1], 16) if w[1] != "(nil)" else 0, int(w[2]), int(w[3])))
        elif k in "SR":
            out.append((k, int(w[1]), int(w[2]), int(w[3])))
        else:
            out.append(tuple([k] + w[1:]))
    return out


FIELD = re.compile(r'(\w+)=("(?:[^"\\]|\\.)*"|\S+)')
META = re.compile(r'^\d+ META "((?:[^"\\]|\\.)*)"="((?:[^"\\]|\\.)*)"$')
NAME = re.compile(r' name=\d+ "((?:[^"\\]|\\.)*)"')
EVENTS = ("ALLOC", "FREE", "OOM", "NVTX_PUSH", "NVTX_POP", "NVTX_START", "NVTX_END", "NVTX_MARK", "LOST",
          "PAUSE", "RESUME", "DRV", "SOURCE")


class Trace:
    def __init__(self, decoder, path, label):
        self.path, self.label = path, label
        self.cmd = "%s --dump %s" % (decoder, path)
        p = subprocess.run([decoder, "--dump", path], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
        self.rc = p.returncode
        self.err = p.stderr.decode(errors="replace")
        self.meta, self.events, self.flushes, self.unknown = {}, [], [], []
        for line in p.stdout.decode(errors="replace").splitlines():
            if line.startswith("#"):
                continue
            w = line.split(" ", 2)
            if len(w) < 2:
                continue
            kind = w[1]
            if kind == "META":
                m = META.match(line)
                if m:
                    self.meta[m.group(1)] = m.group(2)
            elif kind == "FLUSH":
                f = dict(FIELD.findall(w[2]))
                self.flushes.append({"ts": int(f["ts"]), "next_seq": int(f["next_seq"]),
                                     "index": len(self.events)})
            elif kind in EVENTS:
                e = dict(FIELD.findall(w[2]))
                e["type"] = kind
                e["seq"] = int(e["seq"])
                e["ts"] = int(e["ts"])
                m = NAME.search(line)
                if m:
                    e["name"] = m.group(1)
                self.events.append(e)
            elif kind == "unknown":
                self.unknown.append(line)
        self.events.sort(key=lambda e: e["seq"])

    def ok(self):
        if self.rc != 0:
            fail("%s: `%s` exited %d: %s" % (self.label, self.cmd, self.rc, self.err.strip()[:500]))
            return False
        return True

    def torch(self):
        return [(e["type"][0], int(e["ptr"], 16), int(e["size"])) for e in self.events
                if e["type"] in ("ALLOC", "FREE") and e.get("api") == "torch"]

    def abs_ns(self, ts):
        return int(self.meta["start_mono_ns"]) + ts * int(self.meta["ts_unit_ns"])


def logged(loglines, kinds="AF"):
    return [(k.upper(), p, s) for k, p, s, _ in (x for x in loglines if x[0] in "AFaf") if k in kinds]


def first_diff(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return min(len(a), len(b))


def fmt_ev(e):
    return "%s ptr=0x%x size=%d" % e if e else "(none)"


def check_trace(ctx, t, expect, label, complete=True, pid=None):
    """The trace's torch ALLOC/FREE (seq order) equal `expect`; complete:
    dense seqs, no LOST, the last FLUSH covers every event."""
    if not t.ok():
        return False
    got = t.torch()
    ok = True
    if got != expect:
        i = first_diff(got, expect)
        fail("%s: %s holds %d torch events, the victim made %d; first difference at #%d: trace %s, victim %s"
             % (label, os.path.basename(t.path), len(got), len(expect), i,
                fmt_ev(got[i] if i < len(got) else None), fmt_ev(expect[i] if i < len(expect) else None)))
        ok = False
    if pid is not None and t.meta.get("pid") != str(pid):
        fail("%s: META pid %s, process %d" % (label, t.meta.get("pid"), pid))
        ok = False
    if complete:
        seqs = [e["seq"] for e in t.events]
        if seqs != list(range(len(seqs))):
            fail("%s: event seqs not dense from 0 (%d events, last seq %s)"
                 % (label, len(seqs), seqs[-1] if seqs else None))
            ok = False
        lost = [e for e in t.events if e["type"] == "LOST"]
        if lost:
            fail("%s: LOST records: %s" % (label, lost))
            ok = False
        if not t.flushes or t.flushes[-1]["next_seq"] != len(t.events):
            fail("%s: the last FLUSH (%s) does not cover all %d events"
                 % (label, t.flushes[-1] if t.flushes else None, len(t.events)))
            ok = False
        if "truncated" in t.err:
            fail("%s: decoder says truncated: %s" % (label, t.err.strip()))
            ok = False
    return ok


def single_trace(ctx, r, complete=True):
    if not ctx.expect_files(r, [ctx.name(r.pid)]):
        return None
    t = ctx.decode(os.path.join(r.tdir, ctx.name(r.pid)), r.label)
    check_trace(ctx, t, logged(r.loglines), r.label, complete=complete, pid=r.pid)
    return t


# ---- scenarios ----------------------------------------------------------------

NO_PERIODIC = {"DSMEMTRACE_FLUSH_MS": "60000"}  # only lifecycle flushes write events


def sc_exit(ctx):
    ref = ctx.run("exit-plain", ["exit"], False)
    r = ctx.run("exit", ["exit"], True, env=NO_PERIODIC)
    if ctx.same(ref, r):
        single_trace(ctx, r)


def signal_case(ctx, sig, how):
    name = signal.Signals(sig).name[3:]
    if how == "self":
        argv, send = ["self-signal", name], None
    else:
        argv, send = ["wait-signal"], sig
    ref = ctx.run("%s-%s-plain" % (name, how), argv, False, send=send)
    r = ctx.run("%s-%s" % (name, how), argv, True, env=NO_PERIODIC, send=send)
    if not (os.WIFSIGNALED(ref.status) and os.WTERMSIG(ref.status) == sig):
        fail("%s: without the preload the victim %s, not killed by %s" % (ref.label, describe(ref.status), name))
    if ctx.same(ref, r):
        single_trace(ctx, r)


def sc_sigterm(ctx):
    signal_case(ctx, signal.SIGTERM, "self")
    signal_case(ctx, signal.SIGTERM, "driver")


def sc_sigint(ctx):
    signal_case(ctx, signal.SIGINT, "self")
    signal_case(ctx, signal.SIGINT, "driver")


def fault_case(ctx, mode, sig):
    ref = ctx.run(mode + "-plain", [mode], False)
    r = ctx.run(mode, [mode], True, env=NO_PERIODIC)
    if not (os.WIFSIGNALED(ref.status) and os.WTERMSIG(ref.status) == sig):
        fail("%s: without the preload the victim %s" % (ref.label, describe(ref.status)))
    if ctx.same(ref, r):
        single_trace(ctx, r)


def sc_sigsegv(ctx):
    fault_case(ctx, "segv", signal.SIGSEGV)


def sc_sigabrt(ctx):
    fault_case(ctx, "abort", signal.SIGABRT)


def sc_own_handler(ctx):
    for mode, want in (("own-continue", 7), ("own-exit", 9)):
        ref = ctx.run(mode + "-plain", [mode], False)
        r = ctx.run(mode, [mode], True, env=NO_PERIODIC)
        if not (os.WIFEXITED(ref.status) and os.WEXITSTATUS(ref.status) == want):
            fail("%s: without the preload: %s, expected exit %d" % (ref.label, describe(ref.status), want))
        for x in (ref, r):
            if not any(l[0] == "H" and l[1] == str(int(signal.SIGTERM)) for l in x.loglines):
                fail("%s: the program's own SIGTERM handler did not run" % x.label)
        if ctx.same(ref, r):
            single_trace(ctx, r)


def sc_ignored(ctx):
    ign = (signal.SIGTERM,)
    ref = ctx.run("ignored-plain", ["ignored"], False, ignore=ign)
    r = ctx.run("ignored", ["ignored"], True, env=NO_PERIODIC, ignore=ign)
    if ref.status != 0 or ref.out.count(": ignored") != 3:
        fail("%s: without the preload: %s, stdout %r" % (ref.label, describe(ref.status), ref.out))
    if ctx.same(ref, r):
        single_trace(ctx, r)


def sc_fork(ctx):
    env = {"DSMEMTRACE_FLUSH_MS": "20"}  # the parent's file is written to before and after the forks
    ref = ctx.run("fork-plain", ["fork"], False)
    r = ctx.run("fork", ["fork"], True, env=env)
    if "child 2: signal %d" % signal.SIGTERM not in ref.out:
        fail("%s: the second child did not die by SIGTERM: %r" % (ref.label, ref.out))
    if not ctx.same(ref, r):
        return
    ms = [int(l[2]) for l in r.loglines if l[0] == "T"]
    if not ms or ms[0] > 700:
        fail("fork: the child killed by SIGTERM took %s ms to die (waiting for a writer it does not have?)" % ms)
    kids = [int(l[2]) for l in r.loglines if l[0] == "D"]
    if len(kids) != 2:
        fail("fork: expected two child pids in the log, got %s" % kids)
    if not any(l[0] in "af" for l in r.loglines):
        fail("fork: the children made no allocations")
    t = single_trace(ctx, r)  # exactly one file, the parent's, with only the parent's events
    if t and not any(e.get("api") == "torch" and int(e["size"]) > 256 * 1024 for e in t.events):
        fail("fork: no event of the parent after the forks")


def sc_spawn(ctx):
    env = {"DSMEMTRACE_FLUSH_MS": "20"}
    ref = ctx.run("spawn-plain", ["spawn"], False)
    r = ctx.run("spawn", ["spawn"], True, env=env)
    if "posix_spawn child: exit 0" not in ref.out or "fork+exec child: exit 0" not in ref.out:
        fail("%s: children failed: %r %r" % (ref.label, ref.out, ref.err))
    if not ctx.same(ref, r):
        return
    kids = {l[1]: int(l[2]) for l in r.loglines if l[0] == "D"}
    if set(kids) != {"spawn", "forkexec"}:
        fail("spawn: child pids not logged: %s" % kids)
        return
    names = [ctx.name(r.pid), ctx.name(kids["spawn"]), ctx.name(kids["forkexec"])]
    if not ctx.expect_files(r, names):
        return
    check_trace(ctx, ctx.decode(os.path.join(r.tdir, names[0]), "spawn parent"), logged(r.loglines),
                "spawn parent", pid=r.pid)
    for k, n in (("spawn", names[1]), ("forkexec", names[2])):
        lines = read_log(r.log + "." + k)
        if not lines:
            fail("spawn: the %s child logged nothing" % k)
        check_trace(ctx, ctx.decode(os.path.join(r.tdir, n), "spawn " + k), logged(lines), "%s child" % k,
                    pid=kids[k])


def sc_exec(ctx):
    for via in ("execv", "execvp", "execve"):
        ref = ctx.run("exec-%s-plain" % via, ["exec", via], False)
        r = ctx.run("exec-" + via, ["exec", via], True, env=NO_PERIODIC)
        if ref.status != 0 or ref.out != "done\n":
            fail("%s: without the preload: %s, %r" % (ref.label, describe(ref.status), ref.out))
        if not ctx.same(ref, r):
            continue
        first, second = ctx.name(r.pid), ctx.name(r.pid, sfx=".1")
        if not ctx.expect_files(r, [first, second]):
            continue
        t1 = ctx.decode(os.path.join(r.tdir, first), r.label + " before exec")
        check_trace(ctx, t1, logged(r.loglines), t1.label, pid=r.pid)
        t2 = ctx.decode(os.path.join(r.tdir, second), r.label + " after exec")
        check_trace(ctx, t2, logged(read_log(r.log + ".exec")), t2.label, pid=r.pid)
        if "child" not in t2.meta.get("cmdline", "") or "child" in t1.meta.get("cmdline", ""):
            fail("%s: cmdlines %r / %r" % (r.label, t1.meta.get("cmdline"), t2.meta.get("cmdline")))


def sc_sigkill(ctx):
    trials = ctx.a.trials
    rng = random.Random(ctx.a.seed)
    note("seed %d, %d trials" % (ctx.a.seed, trials))
    ref = ctx.run("sigkill-plain", ["loop"], False, kill_after=0.05)
    if not (os.WIFSIGNALED(ref.status) and os.WTERMSIG(ref.status) == signal.SIGKILL):
        fail("%s: %s" % (ref.label, describe(ref.status)))
    gaps, covered, total, nofile = [], 0, 0, 0
    for i in range(trials):
        # delays spread over 5..300 ms, in random order
        delay = 0.005 + 0.295 * (i + rng.random()) / trials
        fms = rng.choice((20, 50))
        label = "sigkill-%02d" % i
        r = ctx.run(label, ["loop", "--seed", str(rng.randrange(1 << 30))], True,
                    env={"DSMEMTRACE_FLUSH_MS": str(fms)}, kill_after=delay)
        if r.status != ref.status:
            fail("%s: %s, expected %s" % (label, describe(r.status), describe(ref.status)))
        files = ctx.files(r, killed=True)
        log = [x for x in r.loglines if x[0] in "AF"]
        desc = "%s: delay %.0f ms, flush %d ms, %d events logged" % (label, delay * 1000, fms, len(log))
        if not files:
            nofile += 1
            if log:
                # the writer may not have opened the file yet; nothing was flushed, nothing is owed
                note("%s: no file" % desc)
            continue
        if files != [ctx.name(r.pid)]:
            fail("%s: files %s" % (label, files))
            continue
        path = os.path.join(r.tdir, files[0])
        t = ctx.decode(path, label)
        if t.rc != 0:
            fail("%s: `%s` exited %d (%s; file %d bytes)\n  command: %s"
                 % (desc, t.cmd, t.rc, t.err.strip(), os.path.getsize(path), ctx.cmdline(r)))
            continue
        got = t.torch()
        exp = [(k, p, s) for k, p, s, _ in log]
        times = [ns for _, _, _, ns in log]
        if t.flushes:
            fl = t.flushes[-1]
            flush_abs = t.abs_ns(fl["ts"])
            k = sum(1 for ns in times if ns < flush_abs)
            gap_ms = (r.t_kill - flush_abs) / 1e6
            gaps.append(gap_ms)
        else:
            fl, flush_abs, k, gap_ms = {"ts": None}, None, 0, float("nan")
        total += len(exp)
        covered += k
        # everything logged before the last FLUSH's time is in the trace, in order
        if got[:k] != exp[:k]:
            i2 = first_diff(got, exp)
            fail("%s: %d events logged before the last FLUSH (ts %s), trace has %d torch events; "
                 "first difference at #%d: trace %s, victim %s\n  command: %s"
                 % (desc, k, fl["ts"], len(got), i2, fmt_ev(got[i2] if i2 < len(got) else None),
                    fmt_ev(exp[i2] if i2 < len(exp) else None), ctx.cmdline(r)))
            continue
        # and nothing else: the trace is a prefix of what the victim did (+1: the
        # event whose hook returned but whose log line the kill prevented)
        n = len(got)
        if n > len(exp) + 1 or got[:len(exp)] != exp[:n]:
            i2 = first_diff(got, exp)
            fail("%s: the trace holds events the victim did not make (trace %d, log %d, differ at #%d)"
                 % (desc, n, len(exp), i2))
        seqs = [e["seq"] for e in t.events]
        if seqs != list(range(len(seqs))):
            fail("%s: seqs not dense in the written part" % desc)
        if t.flushes and t.flushes[-1]["next_seq"] > len(t.events):
            fail("%s: the last FLUSH says %d events were committed before it, the trace holds %d"
                 % (desc, t.flushes[-1]["next_seq"], len(t.events)))
        note("%s, %d FLUSH records, %d events before the last flush, %d in the trace, kill %.1f ms after it"
             % (desc, len(t.flushes), k, len(got), gap_ms))
    if gaps:
        gaps.sort()
        note("gap between the last FLUSH and the kill: min %.1f ms, median %.1f ms, max %.1f ms (%d trials)"
             % (gaps[0], gaps[len(gaps) // 2], gaps[-1], len(gaps)))
        if ctx.a.bench:
            rec = {"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "host": socket.gethostname(),
                   "nproc": os.cpu_count(), "seed": ctx.a.seed, "trials": trials, "flushed": len(gaps),
                   "flush_ms": [20, 50], "gap_ms_min": round(gaps[0], 2),
                   "gap_ms_median": round(gaps[len(gaps) // 2], 2), "gap_ms_max": round(gaps[-1], 2),
                   "gaps_ms": [round(g, 2) for g in gaps]}
            try:
                with open(ctx.a.bench, "a") as f:
                    f.write(json.dumps(rec) + "\n")
                note("gaps appended to %s" % ctx.a.bench)
            except OSError as e:
                note("cannot append to %s: %s" % (ctx.a.bench, e))
    note("%d of %d logged events were before the last flush (and checked); %d trials without a file"
         % (covered, total, nofile))
    if trials >= 10 and len(gaps) < trials // 2:
        fail("only %d of %d trials produced a flushed trace" % (len(gaps), trials))

    # killed at once after the first allocation (the writer thread is just
    # starting): no file, or a file that decodes
    counts = {"no file": 0, "decodes": 0, "does not decode": 0}
    for i in range(ctx.a.early):
        r = ctx.run("sigkill-early-%d" % i, ["self-signal", "KILL", "--n", "1"], True)
        if r.status != ref.status:
            fail("%s: %s" % (r.label, describe(r.status)))
        files = ctx.files(r, killed=True)
        if not files:
            counts["no file"] += 1
            continue
        path = os.path.join(r.tdir, files[0])
        t = ctx.decode(path, r.label)
        if t.rc == 0:
            counts["decodes"] += 1
            continue
        counts["does not decode"] += 1
        if counts["does not decode"] == 1:
            fail("%s: killed right after its first allocation, it left %s (%d bytes) that `%s` rejects "
                 "(exit %d: %s)\n  command: %s"
                 % (r.label, files[0], os.path.getsize(path), t.cmd, t.rc, t.err.strip(), ctx.cmdline(r)))
    note("SIGKILL right after the first allocation, %d runs: %s" % (ctx.a.early, counts))


def launcher(ctx, d, tag, env, traced):
    """sh -c starting two ranks in the background and waiting for both."""
    v = ctx.a.victim
    script = ('"$0" exit --log "$1.r0" --n 8 & a=$!; RANK=1 LOCAL_RANK=1 "$0" exit --log "$1.r1" --n 8 & '
              'b=$!; wait $a; s=$?; wait $b; exit $((s | $?))')
    e = dict(ctx.env0)
    e.update({"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "2"})
    if traced:
        e["LD_PRELOAD"] = ctx.a.preload
        e["DSMEMTRACE_DIR"] = d
    e.update(env)
    return Proc(["/bin/sh", "-c", script, v, os.path.join(d, tag)], env=e, cwd=d, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, preexec_fn=preexec())


def rank_traces(ctx, d, label):
    out = []
    for f in sorted(os.listdir(d)):
        if f.startswith("dsmemtrace."):
            t = ctx.decode(os.path.join(d, f), label + " " + f)
            if t.ok():
                out.append(t)
    return out


def sc_runid(ctx):
    base = os.path.join(ctx.tmp, "runid")
    # without the preload: the same statuses
    d0 = os.path.join(base, "plain")
    os.makedirs(d0)
    p = launcher(ctx, d0, "L", {}, False)
    out0, err0 = p.communicate(timeout=60)
    st0 = p.raw_status

    # two launchers at once, two ranks each, one directory
    d = os.path.join(base, "two")
    os.makedirs(d)
    ps = [launcher(ctx, d, tag, {}, True) for tag in ("A", "B")]
    for p in ps:
        out, err = p.communicate(timeout=60)
        if p.raw_status != st0 or err != err0:
            fail("runid: launcher %s under the preload, %s without; stderr %r"
                 % (describe(p.raw_status), describe(st0), err.decode(errors="replace")))
    ts = rank_traces(ctx, d, "runid")
    if len(ts) != 4:
        fail("runid: %d trace files from two launchers of two ranks: %s" % (len(ts), os.listdir(d)))
        return
    by = {}
    for t in ts:
        want = "rank%s" % t.meta.get("rank")
        if want not in os.path.basename(t.path):
            fail("runid: %s has META rank %s" % (t.path, t.meta.get("rank")))
        by.setdefault(t.meta.get("ppid"), []).append(t)
    lpids = sorted(str(p.pid) for p in ps)
    if sorted(by) != lpids:
        fail("runid: META ppid of the ranks %s, launchers %s" % (sorted(by), lpids))
        return
    ids = {}
    for pp, group in by.items():
        rid = {t.meta.get("run_id") for t in group}
        if len(rid) != 1 or None in rid or "" in rid:
            fail("runid: the two ranks of launcher %s have run ids %s" % (pp, rid))
        ids[pp] = rid.pop()
        if sorted(t.meta.get("rank") for t in group) != ["0", "1"]:
            fail("runid: launcher %s ranks %s" % (pp, [t.meta.get("rank") for t in group]))
    if len(set(ids.values())) != 2:
        fail("runid: both launchers got run id %s" % ids)
    note("launcher run ids: %s" % ids)

    # explicit ids
    for tag, env, want in (("dsmt", {"DSMEMTRACE_RUN_ID": "my-run-17"}, "my-run-17"),
                           ("elastic", {"TORCHELASTIC_RUN_ID": "te-4242"}, "te-4242"),
                           ("both", {"DSMEMTRACE_RUN_ID": "wins", "TORCHELASTIC_RUN_ID": "loses"}, "wins")):
        dd = os.path.join(base, tag)
        os.makedirs(dd)
        p = launcher(ctx, dd, "L", env, True)
        p.communicate(timeout=60)
        if p.raw_status != st0:
            fail("runid %s: launcher %s" % (tag, describe(p.raw_status)))
        got = [t.meta.get("run_id") for t in rank_traces(ctx, dd, "runid " + tag)]
        if got != [want, want]:
            fail("runid %s (%s): run ids %s, expected %s twice" % (tag, env, got, want))

    # a process without RANK: a run id of its own, different in the next run
    rids = []
    for i in range(2):
        r = ctx.run("runid-single-%d" % i, ["exit", "--n", "4"], True)
        if r.status != 0:
            fail("%s: %s" % (r.label, describe(r.status)))
        t = single_trace(ctx, r)
        rids.append(t.meta.get("run_id") if t else None)
    if None in rids or "" in rids or rids[0] == rids[1] or set(rids) & set(ids.values()):
        fail("runid: two runs of one process got run ids %s (launchers %s)" % (rids, sorted(ids.values())))


def check_pause(ctx, r, t, paused_records):
    """PAUSE/RESUME records: one per device, with the allocator's totals as
    the victim read them (S = at the pause, R = at the resume); no
    ALLOC/FREE/NVTX record between them."""
    if not t.ok():
        return
    if t.unknown:
        fail("%s: the decoder does not know the PAUSE/RESUME records yet: %s" % (r.label, t.unknown[:2]))
        return
    ndev = 2
    S = sorted((d, a, b) for k, d, a, b in (x for x in r.loglines if x[0] in "SR") if k == "S")
    R = sorted((d, a, b) for k, d, a, b in (x for x in r.loglines if x[0] in "SR") if k == "R")
    ps = [e for e in t.events if e["type"] == "PAUSE"]
    rs = [e for e in t.events if e["type"] == "RESUME"]

    def totals(recs):
        return sorted((int(e["dev"]), int(e["tot_alloc"]), int(e["tot_reserved"])) for e in recs
                      if e.get("dev") not in (None, "host"))

    # paused before the first allocation: one PAUSE record with no device
    # (no allocator totals known yet); it still marks where the pause began
    want_p = S if paused_records else []
    if totals(ps) != want_p or len(ps) != (len(want_p) if paused_records else 1):
        fail("%s: PAUSE records (dev, tot_alloc, tot_reserved) %s, the allocator's counters at the pause %s"
             % (r.label, totals(ps), want_p))
    if totals(rs) != R or len(rs) != ndev:
        fail("%s: RESUME records (dev, tot_alloc, tot_reserved) %s, the allocator's counters at the resume %s"
             % (r.label, totals(rs), R))
    if not rs:
        return
    lo = max(e["seq"] for e in ps) if ps else -1
    hi = min(e["seq"] for e in rs)
    inside = [e for e in t.events if lo < e["seq"] < hi and e["type"] not in ("PAUSE", "RESUME")]
    if inside:
        fail("%s: %d records while paused, e.g. %s" % (r.label, len(inside), inside[0]))
    if ps and max(e["seq"] for e in ps) > hi:
        fail("%s: PAUSE after RESUME" % r.label)
    names = {e.get("name") for e in t.events if e["type"].startswith("NVTX")}
    if "paused" in names:
        fail("%s: NVTX ranges opened while paused are in the trace" % r.label)
    if "resumed" not in names:
        fail("%s: NVTX ranges after the resume are missing" % r.label)


def sc_pause(ctx):
    for mode, has_pause in (("pause", True), ("pause-first", False)):
        argv = [mode, "--devices", "2"]
        ref = ctx.run(mode + "-plain", argv, False)
        r = ctx.run(mode, argv, True)
        if ref.status != 0:
            fail("%s: %s" % (ref.label, describe(ref.status)))
        if not ctx.same(ref, r):
            continue
        if ctx.expect_files(r, [ctx.name(r.pid)]):
            t = ctx.decode(os.path.join(r.tdir, ctx.name(r.pid)), r.label)
            check_trace(ctx, t, logged(r.loglines), r.label, complete=not t.unknown, pid=r.pid)
            check_pause(ctx, r, t, has_pause)


def sc_toggle(ctx):
    argv = ["toggle", "--devices", "2"]
    ref = ctx.run("toggle-plain", argv, False)
    if not (os.WIFSIGNALED(ref.status) and os.WTERMSIG(ref.status) == signal.SIGUSR2):
        fail("%s: %s, expected death by SIGUSR2" % (ref.label, describe(ref.status)))
    # no DSMEMTRACE_TOGGLE_SIGNAL: the library installs nothing, SIGUSR2 kills
    r0 = ctx.run("toggle-unset", argv, True, env={"DSMEMTRACE_FLUSH_MS": "20"})
    ctx.same(ref, r0)
    # with it: two toggles, pause then resume
    r = ctx.run("toggle", argv, True, env={"DSMEMTRACE_TOGGLE_SIGNAL": "USR2", "DSMEMTRACE_FLUSH_MS": "20"})
    if r.status != 0:
        fail("%s: %s under DSMEMTRACE_TOGGLE_SIGNAL=USR2: %s\n  command: %s"
             % (r.label, describe(r.status), r.err, ctx.cmdline(r)))
        return
    if ctx.expect_files(r, [ctx.name(r.pid)]):
        t = ctx.decode(os.path.join(r.tdir, ctx.name(r.pid)), r.label)
        check_trace(ctx, t, logged(r.loglines), r.label, complete=not t.unknown, pid=r.pid)
        check_pause(ctx, r, t, True)


def sc_nofile_signal(ctx):
    cases = (("TERM-self", ["nvtx-signal", "TERM"], None, signal.SIGTERM),
             ("INT-self", ["nvtx-signal", "INT"], None, signal.SIGINT),
             ("TERM-driver", ["nvtx-wait"], signal.SIGTERM, signal.SIGTERM))
    for tag, argv, send, sig in cases:
        ref = ctx.run("nofile-%s-plain" % tag, argv, False, send=send)
        r = ctx.run("nofile-" + tag, argv, True, send=send)
        if not (os.WIFSIGNALED(ref.status) and os.WTERMSIG(ref.status) == sig):
            fail("%s: %s" % (ref.label, describe(ref.status)))
        ctx.same(ref, r)
        files = ctx.files(r)
        if files:
            fail("%s: a process that never allocated left %s" % (r.label, files))



# ---- faults (issue 8) -------------------------------------------------------------

def dsmt_lines(err):
    return [l for l in err.splitlines() if l.startswith("dsmemtrace[")]


def same_but_one_line(ctx, ref, r, must=()):
    """r behaved like ref (status, stdout, stderr) except for exactly one
    dsmemtrace line on stderr, which holds every string in `must`."""
    ok = ctx.same(ref, r, stderr=False)
    extra = dsmt_lines(r.err)
    rest = "\n".join(l for l in r.err.splitlines() if not l.startswith("dsmemtrace["))
    if rest != "\n".join(ref.err.splitlines()):
        fail("%s: stderr differs beyond dsmemtrace's own lines:\n%s" % (r.label, r.err))
        ok = False
    if len(extra) != 1:
        fail("%s: %d dsmemtrace lines on stderr, expected exactly one:\n%s\n  command: %s"
             % (r.label, len(extra), r.err, ctx.cmdline(r)))
        return False
    for m in must:
        if m not in extra[0]:
            fail("%s: the stderr line does not say %r: %s" % (r.label, m, extra[0]))
            ok = False
    note("%s: %s" % (r.label, extra[0]))
    return ok


def json_report(ctx, path, label):
    p = subprocess.run([ctx.a.decoder, "-v", "--format", "json", path], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=300)
    err = p.stderr.decode(errors="replace")
    if p.returncode != 0:
        fail("%s: `%s --format json %s` exited %d: %s" % (label, ctx.a.decoder, path, p.returncode, err[:500]))
        return None, err
    return json.loads(p.stdout), err


def sc_threads(ctx):
    n, secs = ctx.a.threads, ctx.a.secs
    r = ctx.run("threads", ["threads", "--n", str(n), "--secs", str(secs)], True, log=False,
                timeout=secs + 110)
    if r.status != 0 or r.err:
        fail("%s: %s, stderr %r (a deadlock ends in the timeout)\n  command: %s"
             % (r.label, describe(r.status), r.err, ctx.cmdline(r)))
        return
    m = re.search(r"threads (\d+): (\d+) allocs, (\d+) frees, (\d+) bytes\nallocator: peak (\d+), end (\d+)", r.out)
    if not m:
        fail("%s: unexpected output %r" % (r.label, r.out))
        return
    nt, allocs, frees, _, peak, end = (int(x) for x in m.groups())
    if not ctx.expect_files(r, [ctx.name(r.pid)]):
        return
    doc, err = json_report(ctx, os.path.join(r.tdir, ctx.name(r.pid)), r.label)
    if doc is None:
        return
    p = doc["processes"][0]
    rows = [s for k in ("init", "steps", "tail") for s in p[k] if s["device"] == 0]
    got = (sum(s["allocs"] for s in rows), sum(s["frees"] for s in rows),
           max(s["peak_allocated"] for s in rows), rows[-1]["end_allocated"])
    if got != (allocs, frees, peak, end):
        fail("%s: the decoder says %d allocs, %d frees, peak %d, end %d; the program made %d allocs, %d frees, "
             "its allocator's peak %d, end %d" % ((r.label,) + got + (allocs, frees, peak, end)))
    if p["lost_events"] or p["missing_events"] or p["truncated"] or p["damaged"]:
        fail("%s: lost %s, missing %s, truncated %s, damaged %s" % (r.label, p["lost_events"], p["missing_events"],
                                                                  p["truncated"], p["damaged"]))
    if " 0 disagreements" not in err:
        fail("%s: the totals cross-check disagrees: %s" % (r.label, err))
    note("%d threads, %d s: %d allocs, %d frees, peak %d bytes, %d events, trace %d bytes"
         % (nt, secs, allocs, frees, peak, p["events"], os.path.getsize(os.path.join(r.tdir, ctx.name(r.pid)))))


def try_tmpfs(path, size):
    if os.geteuid() != 0:
        return False
    p = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=%d,mode=0777" % size, "dsmt-full", path],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    return p.returncode == 0


def check_partial(ctx, r, label):
    files = ctx.files(r)
    if len(files) > 1:
        fail("%s: files %s" % (label, files))
    for f in files:
        t = ctx.decode(os.path.join(r.tdir, f), label)
        if t.rc != 0:
            fail("%s: what was written (%s, %d bytes) does not decode: exit %d: %s"
                 % (label, f, os.path.getsize(os.path.join(r.tdir, f)), t.rc, t.err.strip()))
        else:
            note("%s: %s, %d bytes, %d events decoded" % (label, f, os.path.getsize(os.path.join(r.tdir, f)),
                                                         len(t.events)))
    return files


def sc_diskfull(ctx):
    argv = ["threads", "--n", "4", "--ops", "50000"]
    ref = ctx.run("full-plain", argv, False, log=False)
    if ref.status != 0:
        fail("%s: %s %r" % (ref.label, describe(ref.status), ref.err))
        return
    mechanisms = 0
    # a small tmpfs as DSMEMTRACE_DIR
    d = os.path.join(ctx.tmp, "tmpfs")
    os.mkdir(d)
    if try_tmpfs(d, 256 * 1024):
        mechanisms += 1
        try:
            r = ctx.run("full-tmpfs", argv, True, log=False, tdir=d, env={"DSMEMTRACE_FLUSH_MS": "5"})
            if same_but_one_line(ctx, ref, r, ("No space left on device", "the program continues")):
                check_partial(ctx, r, r.label)
        finally:
            subprocess.run(["umount", d])
    else:
        note("diskfull: cannot mount a tmpfs here (not root, or no CAP_SYS_ADMIN): RLIMIT_FSIZE only")
    # RLIMIT_FSIZE (ulimit -f): past it the kernel would send SIGXFSZ
    import resource
    for limit in (64 * 1024, 2048):
        def lim(limit=limit):
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))
        ref2 = ctx.run("fsize-plain-%d" % limit, argv, False, log=False, pre=lim)
        r = ctx.run("fsize-%d" % limit, argv, True, log=False, pre=lim, env={"DSMEMTRACE_FLUSH_MS": "5"})
        mechanisms += 1
        if os.WIFSIGNALED(r.status) and os.WTERMSIG(r.status) == signal.SIGXFSZ:
            fail("%s: the program was killed by SIGXFSZ (the trace ran into RLIMIT_FSIZE)" % r.label)
            continue
        if same_but_one_line(ctx, ref2, r, ("file size limit", "the program continues")):
            for f in check_partial(ctx, r, r.label):
                if os.path.getsize(os.path.join(r.tdir, f)) > limit:
                    fail("%s: %s is larger than the limit" % (r.label, f))
    if not mechanisms:
        print("SKIP: no way to fill a disk here")
        sys.exit(77)


def as_nobody():
    os.setgroups([])
    os.setgid(65534)
    os.setuid(65534)


def sc_unwritable(ctx):
    argv = ["exit"]
    root = os.geteuid() == 0
    os.chmod(ctx.tmp, 0o755)
    pre = as_nobody if root else None
    ro = os.path.join(ctx.tmp, "readonly")
    os.mkdir(ro, 0o555)
    os.chmod(ro, 0o555)
    afile = os.path.join(ctx.tmp, "a-file")
    with open(afile, "w") as f:
        f.write("not a directory\n")
    os.chmod(afile, 0o666)
    cases = (("readonly", ro), ("missing", os.path.join(ctx.tmp, "no", "such", "dir")), ("a-file", afile))
    for tag, dirpath in cases:
        def mk_run(traced, label):
            r = ctx.run(label, argv, traced, log=False, pre=pre, tdir=dirpath if traced else None,
                        env={"DSMEMTRACE_DIR": dirpath} if traced else None)
            return r
        # the run directory must be writable by the victim
        ref = mk_run(False, "unwritable-%s-plain" % tag)
        r = mk_run(True, "unwritable-" + tag)
        if ref.status != 0:
            fail("%s: %s: %s" % (ref.label, describe(ref.status), ref.err))
        same_but_one_line(ctx, ref, r, ("cannot create a trace file in %s" % dirpath, "the program continues"))
        stray = [f for f in os.listdir(r.dir) if "dsmemtrace" in f]
        if os.path.isdir(dirpath):
            stray += os.listdir(dirpath)
        if stray:
            fail("%s: files left: %s" % (r.label, stray))
    if root:
        note("unwritable: run as uid 65534 (root may write anywhere)")


def sc_squat(ctx):
    argv = ["exit"]
    ref = ctx.run("squat-plain", argv, False)
    outside = os.path.join(ctx.tmp, "precious")
    for tag, mode_env, want_mode in (("symlink", None, 0o600), ("file", None, 0o600),
                                     ("symlink-mode", "0640", 0o640), ("none-mode", "0640", 0o640)):
        with open(outside, "w") as f:
            f.write("precious bytes\n")
        os.chmod(outside, 0o644)
        tdir = os.path.join(ctx.tmp, "squat-%s-traces" % tag)
        os.mkdir(tdir)

        def squat(tag=tag, tdir=tdir):
            # runs in the victim's process before exec: its pid is the victim's
            name = os.path.join(tdir, "dsmemtrace.%s.%d.zst" % (ctx.host, os.getpid()))
            if tag.startswith("symlink"):
                os.symlink(outside, name)
            elif tag == "file":
                with open(name, "w") as f:
                    f.write("someone else's file\n")
        env = {"DSMEMTRACE_FILE_MODE": mode_env} if mode_env else {}
        r = ctx.run("squat-" + tag, argv, True, env=env, pre=None if tag.startswith("none") else squat, tdir=tdir)
        first, second = ctx.name(r.pid), ctx.name(r.pid, sfx=".1")
        if tag.startswith("none"):
            if not ctx.same(ref, r) or not ctx.expect_files(r, [first]):
                continue
            got = os.stat(os.path.join(r.tdir, first)).st_mode & 0o777
        else:
            if not same_but_one_line(ctx, ref, r, (os.path.join(r.tdir, first), os.path.join(r.tdir, second),
                                                   "left alone")):
                continue
            names = sorted(os.listdir(r.tdir))
            if names != sorted([first, second]):
                fail("%s: files %s, expected %s and %s" % (r.label, names, first, second))
                continue
            sq = os.path.join(r.tdir, first)
            if tag.startswith("symlink"):
                if not os.path.islink(sq) or os.readlink(sq) != outside:
                    fail("%s: the symbolic link was replaced" % r.label)
            elif open(sq).read() != "someone else's file\n":
                fail("%s: the existing file was changed" % r.label)
            if open(outside).read() != "precious bytes\n" or os.stat(outside).st_mode & 0o777 != 0o644:
                fail("%s: the link's target was written or changed" % r.label)
            got = os.stat(os.path.join(r.tdir, second)).st_mode & 0o777
            t = ctx.decode(os.path.join(r.tdir, second), r.label)
            check_trace(ctx, t, logged(r.loglines), r.label, pid=r.pid)
        if got != want_mode:
            fail("%s: the trace has mode %o, expected %o (umask %s)" % (r.label, got, want_mode, "022"))


MP_CHILD = r"""
import ctypes, os, sys, time
def torch():
    ctypes.CDLL("libcudart.so.13", mode=ctypes.RTLD_GLOBAL)
    t = ctypes.CDLL("libtorchstub.so", mode=ctypes.RTLD_LOCAL)
    t.ts_alloc.restype = ctypes.c_void_p
    t.ts_alloc.argtypes = [ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p]
    t.ts_free.argtypes = [ctypes.c_void_p]
    return t
def work(logpath, base, n):
    t = torch()
    fd = os.open(logpath, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    keep = []
    for i in range(n):
        size = base + 512 * (1 + (i * 37) % 300)
        p = t.ts_alloc(size, 0, None)
        os.write(fd, b"A 0x%x %d %d\n" % (p, size, time.monotonic_ns()))
        if i % 2:
            t.ts_free(p)
            os.write(fd, b"F 0x%x %d %d\n" % (p, size, time.monotonic_ns()))
        else:
            keep.append((p, size))
    for p, size in keep[::3]:
        t.ts_free(p)
        os.write(fd, b"F 0x%x %d %d\n" % (p, size, time.monotonic_ns()))
    os.write(fd, b"D pid %d\n" % os.getpid())
    os.close(fd)
def child(logdir, k):
    work(os.path.join(logdir, "child%d" % k), 256 * 1024 * (k + 1), 30)
if __name__ == "__main__":
    import multiprocessing as mp
    logdir = sys.argv[1]
    work(os.path.join(logdir, "parent"), 0, 20)
    ctx = mp.get_context("spawn")
    ps = [ctx.Process(target=child, args=(logdir, k)) for k in range(3)]
    for p in ps:
        p.start()
    for p in ps:
        p.join()
    print("exit codes", [p.exitcode for p in ps])
    work(os.path.join(logdir, "parent"), 1024 * 1024, 10)
"""


def sc_mp_spawn(ctx):
    d = os.path.join(ctx.tmp, "mp")
    os.makedirs(os.path.join(d, "traces"))
    os.makedirs(os.path.join(d, "logs"))
    script = os.path.join(d, "mp_spawn.py")
    with open(script, "w") as f:
        f.write(MP_CHILD)
    e = dict(ctx.env0)
    e.update({"LD_PRELOAD": ctx.a.preload, "DSMEMTRACE_DIR": os.path.join(d, "traces")})
    p = subprocess.run([sys.executable, script, os.path.join(d, "logs")], env=e, cwd=d, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=120)
    out, err = p.stdout.decode(), p.stderr.decode()
    if p.returncode != 0 or "exit codes [0, 0, 0]" not in out or err:
        fail("mp-spawn: exit %d, stdout %r, stderr %r" % (p.returncode, out, err))
        return
    logs = {}
    for name in sorted(os.listdir(os.path.join(d, "logs"))):
        lines = read_log(os.path.join(d, "logs", name))
        pid = [int(l[2]) for l in lines if l[0] == "D" and l[1] == "pid"]
        logs[pid[0]] = (name, [x for x in lines if x[0] in "AF"])
    files = sorted(os.listdir(os.path.join(d, "traces")))
    want = sorted(ctx.name(pid) for pid in logs)
    if files != want or len(logs) != 4:
        fail("mp-spawn: trace files %s, expected one per allocating process %s (logs %s)"
             % (files, want, sorted(v[0] for v in logs.values())))
        return
    for pid, (name, lines) in sorted(logs.items()):
        t = ctx.decode(os.path.join(d, "traces", ctx.name(pid)), "mp-spawn " + name)
        check_trace(ctx, t, logged(lines), "mp-spawn %s (pid %d)" % (name, pid), pid=pid)
    note("mp-spawn: %d files: %s" % (len(files), ", ".join("%s=%s" % (v[0], k) for k, v in sorted(logs.items()))))


def sc_setuid(ctx):
    secure = ctx.a.secure_victim
    if os.geteuid() != 0:
        print("SKIP: setuid: needs root (to give a copy of the victim to uid 65534)")
        sys.exit(77)
    if not secure or not os.path.exists(secure):
        print("SKIP: setuid: victim_secure not built")
        sys.exit(77)
    os.chmod(ctx.tmp, 0o755)
    bins = os.path.join(ctx.tmp, "bin")
    os.mkdir(bins, 0o755)
    import shutil
    runs, shares = {}, {}
    for kind, mode, owner in (("setuid", 0o4755, (65534, 0)), ("setgid", 0o2755, (0, 65534)),
                              ("plain", 0o755, (0, 0))):
        share = shares[kind] = os.path.join(ctx.tmp, "share-" + kind)
        os.mkdir(share)
        os.chmod(share, 0o777)
        for exe in ("victim_life", "victim_secure"):
            src = ctx.a.victim if exe == "victim_life" else secure
            dst = os.path.join(bins, "%s-%s" % (exe, kind))
            shutil.copy(src, dst)
            os.chown(dst, *owner)
            os.chmod(dst, mode)
            # DSMEMTRACE_DIR and the working directory writable by anyone: a
            # library that traced anyway would leave a file in one of them
            r = ctx.run("%s-%s" % (exe, kind), ["secure"], exe == "victim_secure", log=False, exe=dst,
                        tdir=share, env={"LD_PRELOAD": "", "DSMEMTRACE_DIR": share})
            runs[exe, kind] = r
    for kind in ("setuid", "setgid"):
        plain, lib = runs["victim_life", kind], runs["victim_secure", kind]
        if "AT_SECURE=1" not in plain.out:
            print("SKIP: setuid: a %s copy does not run in secure mode here (nosuid mount?): %r"
                  % (kind, plain.out))
            sys.exit(77)
        ctx.same(plain, lib)
        left = os.listdir(shares[kind]) + [f for f in os.listdir(lib.dir) if "dsmemtrace" in f]
        if left:
            fail("%s: the library left %s in secure mode" % (lib.label, left))
    # control: not set-ID, the same linked binary traces
    c = runs["victim_secure", "plain"]
    if c.status != 0 or "NVTX_INJECTION64_PATH set" not in c.out:
        fail("%s: the control run did not trace: %s, %r" % (c.label, describe(c.status), c.out))
    elif not [f for f in os.listdir(shares["plain"]) if f.startswith("dsmemtrace.")]:
        fail("%s: the control run left no trace in %s" % (c.label, shares["plain"]))
    note("setuid/setgid: no file, no environment, no message; the control traced")

SCENARIOS = {
    "exit": sc_exit, "sigterm": sc_sigterm, "sigint": sc_sigint, "sigsegv": sc_sigsegv, "sigabrt": sc_sigabrt,
    "own-handler": sc_own_handler, "ignored": sc_ignored, "fork": sc_fork, "spawn": sc_spawn, "exec": sc_exec,
    "sigkill": sc_sigkill, "runid": sc_runid, "pause": sc_pause, "toggle": sc_toggle,
    "nofile-signal": sc_nofile_signal, "threads": sc_threads, "diskfull": sc_diskfull,
    "unwritable": sc_unwritable, "squat": sc_squat, "mp-spawn": sc_mp_spawn, "setuid": sc_setuid,
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("scenario", choices=sorted(SCENARIOS))
    ap.add_argument("--victim", required=True)
    ap.add_argument("--libdir", required=True)
    ap.add_argument("--preload")
    ap.add_argument("--decoder")
    ap.add_argument("--trials", type=int, default=int(os.environ.get("LIFE_TRIALS", "24")))
    ap.add_argument("--early", type=int, default=10, help="sigkill: runs killed right after the first allocation")
    ap.add_argument("--seed", type=int, default=int(os.environ.get("LIFE_SEED", str(int(time.time())))))
    ap.add_argument("--keep", help="keep the run directories here")
    ap.add_argument("--bench", help="sigkill: append the measured gaps (JSON line) to this file")
    ap.add_argument("--threads", type=int, default=256, help="threads: how many")
    ap.add_argument("--secs", type=int, default=10, help="threads: for how long")
    ap.add_argument("--secure-victim", help="setuid: victim_life linked against the library")
    a = ap.parse_args()
    for what, path in (("preload", a.preload), ("decoder", a.decoder), ("victim", a.victim)):
        if not path or not os.path.exists(path):
            print("SKIP: %s %s not built" % (what, path))
            sys.exit(77)
    a.preload, a.decoder, a.victim = (os.path.abspath(x) for x in (a.preload, a.decoder, a.victim))
    if a.keep:
        tmp = os.path.abspath(a.keep)
        os.makedirs(tmp, exist_ok=True)
        SCENARIOS[a.scenario](Ctx(a, tmp))
    else:
        with tempfile.TemporaryDirectory(prefix="dsmt-life-") as tmp:
            SCENARIOS[a.scenario](Ctx(a, tmp))
    if failures:
        print("%d failure(s)" % len(failures), file=sys.stderr)
        sys.exit(1)
    print("ok")


if __name__ == "__main__":
    main()
