#!/usr/bin/env python3
"""Summarize a tests/gpu/run.sh results directory.

    python3 tests/gpu/summarize.py RESULTS_DIR [--quiet]

Reads what run.sh left in RESULTS_DIR (env/facts.txt, loops/<loop>/...,
hook/depth-<d>/...), writes RESULTS_DIR/summary.json and summary.txt, prints
summary.txt (unless --quiet), and exits 0 when everything agreed, 1 otherwise.
"""
import json
import os
import re
import sys

SELFTIME_RE = re.compile(r"selftime:\s*(\d+)\s+events,\s*(\d+)\s+ns total,\s*([0-9.]+)\s+ns/event")


def rd(d, name):
    try:
        with open(os.path.join(d, name), errors="replace") as f:
            return f.read()
    except OSError:
        return None


def rd_int(d, name):
    t = rd(d, name)
    try:
        return int(t.strip()) if t is not None else None
    except ValueError:
        return None


def rd_json(d, name):
    t = rd(d, name)
    if t is None:
        return None
    try:
        return json.loads(t)
    except ValueError:
        return None


def printed(d, tag, key):
    t = rd(d, f"{tag}.out") or ""
    for line in t.splitlines():
        if line.startswith(key + "="):
            return line[len(key) + 1:]
    return None


def lines_matching(text, pred, limit):
    out = [ln.rstrip() for ln in (text or "").splitlines() if pred(ln)]
    return out[:limit]


def trace_part(d, e, problems):
    """Trace, decoder and comparison facts shared by loops and hook runs."""
    e["trace_files"] = rd_int(d, "trace.count")
    e["trace_bytes"] = rd_int(d, "trace.bytes")
    path = (rd(d, "trace.path") or "").strip()
    e["trace"] = os.path.basename(path) if path else None
    if rd(d, "decode.problem"):
        problems.append(rd(d, "decode.problem").strip())
    if e["trace_files"] and e["trace_files"] > 1:
        e.setdefault("notes", []).append(f"{e['trace_files']} trace files in the trace dir (other processes traced)")
    e["decode_rc"] = rd_int(d, "decode.rc")
    e["decode_ignore_totals_rc"] = rd_int(d, "decode-nt.rc")
    cmp_rc = rd_int(d, "cmp.rc")
    e["ignore_totals_identical"] = None if cmp_rc is None else cmp_rc == 0
    e["dump_rc"] = rd_int(d, "dump.rc")
    e["dump_lines"] = rd_int(d, "dump.lines")
    e["dump_events"] = rd_int(d, "dump.events")
    e["dump_alloc_free_lines"] = rd_int(d, "dump.allocfree")
    err = rd(d, "decode.err") or ""
    m = re.search(r"(\d+) events, (\d+) frames", err)
    e["decoder_events"] = int(m.group(1)) if m else None
    e["zstd_frames"] = int(m.group(2)) if m else None
    e["decode_v_totals"] = [re.sub(r"\S*/(dsmemtrace\.[^:\s]+)", r"\1", ln)
                            for ln in lines_matching(err, lambda ln: re.search(r"total", ln, re.I), 6)]
    e["decode_v_tail"] = err.splitlines()[-8:]
    if path:
        for key, label in (("decode_rc", "dsmemdecode -v --format json"),
                           ("decode_ignore_totals_rc", "dsmemdecode --ignore-totals --format json"),
                           ("dump_rc", "dsmemdecode --dump")):
            if e[key] is None:
                problems.append(f"{label} did not run")
            elif e[key] != 0:
                problems.append(f"{label} exit {e[key]}")
        if e["ignore_totals_identical"] is False:
            problems.append("--ignore-totals JSON differs from the default JSON")
    cmpj = rd_json(d, "compare.json")
    if cmpj:
        for k in ("steps_torch", "steps_trace", "steps_compared", "fields_compared", "disagreements",
                  "step_count_mismatch", "reserved_compared", "trace_events", "trace_ooms",
                  "trace_lost_events", "trace_missing_events"):
            e[k] = cmpj.get(k)
        e["compare_ok"] = bool(cmpj.get("ok"))
        e["step_events"] = sum((r.get("allocs") or 0) + (r.get("frees") or 0) for r in cmpj.get("rows", []))
        if cmpj.get("disagreements"):
            problems.append(f"{cmpj['disagreements']} field(s) disagree with torch")
        if cmpj.get("step_count_mismatch"):
            problems.append(f"step count mismatch (torch {cmpj.get('steps_torch')}, trace {cmpj.get('steps_trace')})")
        problems.extend(p for p in cmpj.get("problems", []) if not p.startswith("step sets differ"))
        e.setdefault("notes", []).extend(cmpj.get("notes", []))
    elif path:
        e["compare_ok"] = False
        problems.append("no comparison: " + ((rd(d, "compare.txt") or "compare.py did not run").strip().splitlines() or [""])[-1])
    # events decoded: the decoder's own count (-v), else --dump's event lines
    events = e["decoder_events"] or e["dump_events"] or None
    e["events"] = events
    e["bytes_per_event"] = round(e["trace_bytes"] / events, 2) if e["trace_bytes"] and events else None


def run_part(d, tag, e, problems, label):
    if rd(d, f"{tag}.skipped") is not None:
        problems.append(f"{label}: skipped ({rd(d, tag + '.skipped').strip()})")
        e[f"{tag}_rc"] = None
        return False
    rc = rd_int(d, f"{tag}.rc")
    e[f"{tag}_rc"] = rc
    e[f"{tag}_wall_s"] = rd_int(d, f"{tag}.wall_s")
    if rc is None:
        problems.append(f"{label}: not run")
        return False
    if rc != 0:
        tail = [ln for ln in (rd(d, f"{tag}.err") or "").splitlines() if ln.strip()][-1:]
        problems.append(f"{label}: exit {rc}" + (" (timeout)" if rc == 124 else "")
                        + (f": {tail[0][:200]}" if tail else ""))
        return False
    return True


def loop_entry(res, name):
    d = os.path.join(res, "loops", name)
    e = {"loop": name, "notes": []}
    problems = []
    ran = run_part(d, "preload", e, problems, "run under the preload")
    lj = rd_json(d, "preload.json") or {}
    e["steps"] = len(lj.get("steps") or [])
    e["loop_s"] = round(lj["loop_s"], 3) if "loop_s" in lj else None
    for k in ("final_loss", "param_checksum", "segments", "num_ooms", "oom_caught", "empty_cache_step",
              "expandable", "alloc_conf", "deterministic"):
        if k in lj:
            e[k] = lj[k]
    e["notes"].extend(lj.get("notes", []))
    e["library_stderr"] = lines_matching(rd(d, "preload.err"), lambda ln: ln.startswith("dsmemtrace"), 12)
    if ran or os.path.isdir(os.path.join(d, "trace")):
        trace_part(d, e, problems)
    if name == "oom" and lj and not lj.get("oom_caught"):
        problems.append("the oom loop caught no OutOfMemoryError")

    # the library must not change results
    det = {"preload": None, "plain": None, "plain2": None, "verdict": "not run"}
    plain_ok = run_part(d, "plain", e, problems, "run without the preload")
    pj = rd_json(d, "plain.json") or {}
    e["loop_s_plain"] = round(pj["loop_s"], 3) if "loop_s" in pj else None
    if ran and plain_ok:
        key = lambda tag: (printed(d, tag, "final_loss"), printed(d, tag, "param_checksum"))  # noqa: E731
        det["preload"], det["plain"] = key("preload"), key("plain")
        if det["preload"][0] is None:
            det["verdict"] = "no final_loss printed"
            problems.append("no final_loss line printed")
        elif det["preload"] == det["plain"]:
            det["verdict"] = "identical"
        else:
            p2rc = rd_int(d, "plain2.rc")
            det["plain2"] = key("plain2") if p2rc == 0 else None
            if det["plain2"] is None:
                det["verdict"] = "differs (rerun without the preload failed or was not made)"
                problems.append("results differ with and without the preload")
            elif det["plain2"] == det["plain"]:
                det["verdict"] = "CHANGED by the library (two runs without it agree)"
                problems.append("the library changed the loop's results")
            else:
                det["verdict"] = "nondeterministic run to run: compared only that it ran"
                e["notes"].append("loop is not deterministic here; the with/without comparison only checks that it ran")
        if lj.get("steps") and pj.get("steps"):
            e["counters_same_without_preload"] = lj["steps"] == pj["steps"]
            if not e["counters_same_without_preload"]:
                e["notes"].append("torch's own counters differ with and without the preload (informational)")
    e["determinism"] = det
    e["problems"] = problems
    e["status"] = "ok" if not problems else "FAIL"
    return e


def hook_entry(res, depth):
    d = os.path.join(res, "hook", f"depth-{depth}")
    e = {"depth": int(depth) if depth.isdigit() else depth, "notes": []}
    problems = []
    ran = run_part(d, "preload", e, problems, f"depth {depth} run")
    lj = rd_json(d, "preload.json") or {}
    e["loop_s"] = round(lj["loop_s"], 3) if "loop_s" in lj else None
    e["steps"] = len(lj.get("steps") or [])
    # one line a traced process: the loop's is the one with the most events
    cands = [(int(m.group(1)), ln.strip(), m) for ln in (rd(d, "selftime.txt") or "").splitlines()
             for m in [SELFTIME_RE.search(ln)] if m]
    m = max(cands, key=lambda c: c[0])[2] if cands else None
    e["selftime_line"] = max(cands, key=lambda c: c[0])[1] if cands else None
    if m:
        e["selftime_events"], e["selftime_total_ns"] = int(m.group(1)), int(m.group(2))
        e["ns_per_event"] = float(m.group(3))
    else:
        e["ns_per_event"] = None
        if ran:
            e["notes"].append("no 'dsmemtrace: selftime:' line on stderr")
    err = rd(d, "preload.err") or ""
    e["library_stderr"] = lines_matching(err, lambda ln: ln.startswith("dsmemtrace") and "selftime:" not in ln, 6)
    if "libunwind" in err:
        e["notes"].append("libunwind: " + lines_matching(err, lambda ln: "libunwind" in ln, 1)[0].strip())
    if ran or os.path.isdir(os.path.join(d, "trace")):
        trace_part(d, e, problems)
    e["problems"] = problems
    e["status"] = "ok" if not problems else "FAIL"
    return e


def facts(res):
    f = {}
    for line in (rd(os.path.join(res, "env"), "facts.txt") or "").splitlines():
        if "=" in line:
            k, v = line.split("=", 1)
            f[k] = v
    return f


def listfile(res, name):
    return [ln.strip() for ln in (rd(res, name) or "").splitlines() if ln.strip()]


def fmt(v, nd=None):
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "NO"
    if isinstance(v, float) and nd is not None:
        return f"{v:.{nd}f}"
    return str(v)


def short_verdict(v):
    for key, short in (("identical", "identical"), ("CHANGED", "CHANGED"), ("nondeterministic", "nondeterministic"),
                       ("differs", "differs"), ("no final_loss", "no-loss")):
        if v.startswith(key):
            return short
    return "not-run"


def table(rows):
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]


def main(argv):
    quiet = "--quiet" in argv[1:]
    args = [a for a in argv[1:] if a != "--quiet"]
    if len(args) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    res = args[0]
    fa = facts(res)
    loops = [loop_entry(res, n) for n in listfile(res, "loops.list")]
    hooks = [hook_entry(res, dp) for dp in listfile(res, "hook.list")]
    build = fa.get("build", "ok")
    failures = [f"{e['loop']}: {p}" for e in loops for p in e["problems"]]
    failures += [f"hook depth {e['depth']}: {p}" for e in hooks for p in e["problems"]]
    if build not in ("ok", ""):
        failures.insert(0, f"build {build} (see build.log)")
    totals = {
        "loops": len(loops),
        "loops_ok": sum(e["status"] == "ok" for e in loops),
        "hook_runs": len(hooks),
        "hook_runs_ok": sum(e["status"] == "ok" for e in hooks),
        "steps_compared": sum(e.get("steps_compared") or 0 for e in loops + hooks),
        "fields_compared": sum(e.get("fields_compared") or 0 for e in loops + hooks),
        "disagreements": sum(e.get("disagreements") or 0 for e in loops + hooks),
        "failures": len(failures),
    }
    ok = not failures and build in ("ok", "") and (totals["loops"] + totals["hook_runs"]) > 0
    summary = {
        "format": "dsmemtrace-gpu-check/1",
        "ok": ok,
        "facts": fa,
        "totals": totals,
        "failures": failures,
        "loops": loops,
        "hook_cost": hooks,
    }
    with open(os.path.join(res, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
        f.write("\n")

    out = []
    out.append(f"dsmemtrace GPU check  {fa.get('date', '')}  {fa.get('host', '')}")
    out.append(f"  {fa.get('probe', '')}; driver: {fa.get('nvidia_smi', '-')}")
    out.append(f"  git {fa.get('git', '-')}; libunwind {fa.get('libunwind', '-')}; build {build or '-'}")
    if loops:
        out.append("")
        out.append("loops (trace vs torch, device 0; events = records decoded, in-steps = allocs+frees inside steps):")
        rows = [("loop", "status", "steps", "cmp", "fields", "diff", "events", "alloc/free", "in-steps",
                 "trace_B", "B/event", "ign-tot=", "same-result", "same-ctrs", "loop_s pre/plain")]
        for e in loops:
            rows.append((e["loop"], e["status"], fmt(e.get("steps")), fmt(e.get("steps_compared")),
                         fmt(e.get("fields_compared")), fmt(e.get("disagreements")), fmt(e.get("events")),
                         fmt(e.get("dump_alloc_free_lines")), fmt(e.get("step_events")), fmt(e.get("trace_bytes")),
                         fmt(e.get("bytes_per_event")), fmt(e.get("ignore_totals_identical")),
                         short_verdict(e["determinism"]["verdict"]), fmt(e.get("counters_same_without_preload")),
                         f"{fmt(e.get('loop_s'))}/{fmt(e.get('loop_s_plain'))}"))
        out.extend("  " + ln for ln in table(rows))
    if hooks:
        out.append("")
        out.append("hook cost (transformer_ckpt, DSMEMTRACE_SELFTIME=1, by DSMEMTRACE_NATIVE_DEPTH):")
        rows = [("depth", "status", "ns/event", "events", "hook_ms", "trace_B", "B/event", "diff", "loop_s")]
        for e in hooks:
            tot = e.get("selftime_total_ns")
            rows.append((fmt(e["depth"]), e["status"], fmt(e.get("ns_per_event")), fmt(e.get("selftime_events")),
                         fmt(tot / 1e6 if tot is not None else None, 2), fmt(e.get("trace_bytes")),
                         fmt(e.get("bytes_per_event")), fmt(e.get("disagreements")), fmt(e.get("loop_s"))))
        out.extend("  " + ln for ln in table(rows))
    dv = [(e["loop"], e.get("decode_v_totals") or []) for e in loops]
    if any(v for _, v in dv):
        out.append("")
        out.append("dsmemdecode -v (totals cross-check lines):")
        for name, v in dv:
            for ln in v[:2]:
                out.append(f"  {name}: {ln[:160]}")
    libmsgs = sorted({ln for e in loops + hooks for ln in e.get("library_stderr", [])})
    if libmsgs:
        out.append("")
        out.append("library messages on stderr (distinct):")
        out.extend(f"  {ln[:200]}" for ln in libmsgs[:12])
    notes = [f"{e.get('loop', 'depth ' + str(e.get('depth')))}: {n}" for e in loops + hooks for n in e.get("notes", [])]
    if notes:
        out.append("")
        out.append("notes:")
        out.extend(f"  - {n[:220]}" for n in dict.fromkeys(notes))
    if failures:
        out.append("")
        out.append("FAILURES:")
        out.extend(f"  - {p[:300]}" for p in failures)
        for e in loops + hooks:
            if (e.get("disagreements") or e.get("step_count_mismatch")):
                sub = "loops/" + e["loop"] if "loop" in e else f"hook/depth-{e['depth']}"
                t = rd(os.path.join(res, sub), "compare.txt") or ""
                out.append("")
                out.extend(t.rstrip().splitlines()[:24])
    out.append("")
    out.append(f"totals: loops {totals['loops']} ({totals['loops_ok']} ok), hook runs {totals['hook_runs']} "
               f"({totals['hook_runs_ok']} ok), steps compared {totals['steps_compared']}, "
               f"fields compared {totals['fields_compared']}, disagreements {totals['disagreements']}, "
               f"failures {totals['failures']}")
    npass = totals["loops_ok"] + totals["hook_runs_ok"]
    nfail = totals["loops"] + totals["hook_runs"] - npass
    out.append(f"gpu: {npass} passed, {nfail} failed")
    out.append(f"RESULT: {'PASS' if ok else 'FAIL'}")
    text = "\n".join(out) + "\n"
    with open(os.path.join(res, "summary.txt"), "w") as f:
        f.write(text)
    if not quiet:
        sys.stdout.write(text)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
