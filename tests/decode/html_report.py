#!/usr/bin/env python3
"""--html: structural checks of the report (no browser needed).

For several traces (golden scripts, a two-rank H200 DeepSpeed run, and a
generated trace with far more events than pixel columns, one short spike in
it) the page must be one HTML document that references nothing outside
itself, hold one chart per process and device (a selector when there are
several), an area per category the decoder's JSON reports bytes for, the
reserved line, one step line per interval after init, one bar group per
interval, and a peak equal to the JSON report's largest peak_allocated; the
areas' top edge must reach that peak (downsampling keeps it); the breakdown
table must be the peak interval's peak_breakdown.  Bad use: one-line
messages and the documented exit codes.

usage: html_report.py MKTRACE DSMEMDECODE SRCDIR WORKDIR
"""
import html.parser
import json
import os
import random
import re
import subprocess
import sys

import outcheck
from outcheck import fail, run

MKTRACE, DECODE, SRC, WORK = sys.argv[1:5]
CATS = ["parameters", "gathered_parameters", "master_weights", "optimizer_states", "gradients", "activations",
        "temporaries", "buckets", "communication", "workspace", "other"]



class Page(html.parser.HTMLParser):
    """Elements with their attributes (and the text of <title>s inside
    SVG elements is not needed); counts doctype and html elements."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.doctypes = 0
        self.elements = []  # (tag, attrs dict)
        self.stack = []
        self.text = {}      # id -> text (elements with an id)
        self.errors = []

    def handle_decl(self, decl):
        if decl.lower().startswith("doctype"):
            self.doctypes += 1

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.elements.append((tag, a))
        if tag not in ("meta", "link", "br", "img", "input"):
            self.stack.append((tag, a.get("id"), []))

    def handle_startendtag(self, tag, attrs):
        self.elements.append((tag, dict(attrs)))

    def handle_endtag(self, tag):
        if not self.stack or self.stack[-1][0] != tag:
            self.errors.append("unbalanced </%s> (open: %s)" % (tag, self.stack[-1][0] if self.stack else "-"))
            return
        t, i, txt = self.stack.pop()
        s = "".join(txt)
        if i:
            self.text[i] = s
        if self.stack:
            self.stack[-1][2].append(s)

    def handle_data(self, data):
        if self.stack:
            self.stack[-1][2].append(data)


def points(d):
    return [(float(x), float(y)) for x, y in re.findall(r"[ML](-?[\d.]+),(-?[\d.]+)", d)]


def decode_json(traces):
    rc, out, err = run(DECODE, "--format", "json", "--top", "10", *traces)
    if rc:
        raise SystemExit("json decode of %r failed: %s" % (traces, err))
    return json.loads(out)


def rows(p):
    return p["steps"] + p["init"] + p["tail"] + p["eval"]


def check(name, traces, cols=1000):
    path = os.path.join(WORK, name + ".html")
    rc, out, err = run(DECODE, "--html", path, *traces)
    if rc:
        fail("%s: --html exit %d: %s" % (name, rc, err))
        return None
    if out:
        fail("%s: --html printed on stdout" % name)
    raw = open(path, encoding="utf-8").read()
    doc = decode_json(traces)
    pg = Page()
    pg.feed(raw)
    pg.close()
    # one document, self-contained
    if pg.doctypes != 1 or [t for t, _ in pg.elements].count("html") != 1 or raw.count("</html>") != 1:
        fail("%s: not exactly one HTML document" % name)
    if pg.errors:
        fail("%s: %s" % (name, pg.errors[:3]))
    if re.search(r"(?i)(https?:|ftp:|file:|//[a-z0-9.-]+\.[a-z]{2,}/)", raw):
        fail("%s: an external URL in the page" % name)
    for tag, a in pg.elements:
        if "src" in a:
            fail("%s: <%s src=%r>: the page must load nothing" % (name, tag, a["src"]))
        h = a.get("href")
        if h is not None and not (h.startswith("#") or h.startswith("data:")):
            fail("%s: <%s href=%r> leaves the page" % (name, tag, h))
        if tag in ("iframe", "object", "embed", "img", "image", "use"):
            fail("%s: <%s> element" % (name, tag))
    sections = [a for t, a in pg.elements if t == "section"]
    charts = []  # (process json, device)
    for p in doc["processes"]:
        devs = sorted({r["device"] for r in rows(p)})
        charts += [(p, d) for d in devs]
    if len(sections) != len(charts):
        fail("%s: %d charts, expected %d (processes x devices)" % (name, len(sections), len(charts)))
        return raw
    options = [a for t, a in pg.elements if t == "option"]
    if len(charts) > 1 and [o["value"] for o in options] != [s["id"] for s in sections]:
        fail("%s: the selector does not list every chart" % name)
    # elements by chart: everything after a section's start and before the next one
    idx = [i for i, (t, _) in enumerate(pg.elements) if t == "section"] + [len(pg.elements)]
    for k, (p, dev) in enumerate(charts):
        sec = sections[k]
        els = pg.elements[idx[k]:idx[k + 1]]
        if sec.get("data-file") != p["file"] or int(sec.get("data-device")) != dev:
            fail("%s: chart %d is %r/%r, expected %s device %d" % (name, k, sec.get("data-file"),
                                                                  sec.get("data-device"), p["file"], dev))
        drows = [r for r in rows(p) if r["device"] == dev]
        want_peak = max(r["peak_allocated"] for r in drows)
        pk = [a for t, a in els if t == "circle" and "peak" in a.get("class", "").split()]
        if len(pk) != 1:
            fail("%s chart %d: %d peak markers" % (name, k, len(pk)))
            continue
        if int(pk[0]["data-peak"]) != want_peak:
            fail("%s chart %d: peak in the page %s, decoder's JSON %d" % (name, k, pk[0]["data-peak"], want_peak))
        # the stack drawn at the peak is the decoder's breakdown there
        prow = [r for r in drows if r["peak_allocated"] == want_peak][0]
        bk = dict((c, int(v)) for c, v in (x.split(":") for x in pk[0].get("data-bk", "").split(",") if x))
        want_bk = {c: prow["peak_breakdown"][c] for c in CATS if prow["peak_breakdown"][c]}
        if bk != want_bk:
            fail("%s chart %d: the stack at the peak %s, JSON peak_breakdown %s" % (name, k, bk, want_bk))
        shown = [a for t, a in els if t == "span" and "peakval" in a.get("class", "")]
        if len(shown) != 1 or int(shown[0]["data-peak"]) != want_peak:
            fail("%s chart %d: the breakdown heading's peak is not %d" % (name, k, want_peak))
        # an area for every category with bytes in the JSON, no other
        want = set()
        for r in drows:
            for b in (r["peak_breakdown"], r["end_breakdown"]):
                want |= {c for c in CATS if b[c]}
        areas = {a["data-series"]: a for t, a in els if t == "path" and a.get("class") == "area"}
        if not want <= set(areas):
            fail("%s chart %d: no area for %s" % (name, k, sorted(want - set(areas))))
        if set(areas) - set(CATS):
            fail("%s chart %d: unknown series %s" % (name, k, sorted(set(areas) - set(CATS))))
        lines = {a["data-series"] for t, a in els if t == "path" and a.get("class") == "line"}
        want_lines = {"reserved"} | ({"device", "host_pinned"} if p["driver"] is not None else set())
        if lines != want_lines:
            fail("%s chart %d: lines %s, expected %s" % (name, k, sorted(lines), sorted(want_lines)))
        # the top edge of the stack reaches the peak, at the marker
        top_y = min((y for a in areas.values() for _, y in points(a["d"])), default=None)
        if areas and (top_y is None or abs(top_y - float(pk[0]["cy"])) > 0.051):
            fail("%s chart %d: the areas reach y=%s, the peak marker is at y=%s" % (name, k, top_y, pk[0]["cy"]))
        for c, a in areas.items():
            n = len(points(a["d"]))
            if n > 4 * cols + 4:
                fail("%s chart %d: area %s has %d points for %d columns" % (name, k, c, n, cols))
        svg = [a for t, a in els if t == "svg" and "mem" in a.get("class", "")]
        if len(svg) != 1 or len(svg[0]["data-a"].split(",")) != cols:
            fail("%s chart %d: the chart does not have %d columns" % (name, k, cols))
        elif max(map(int, svg[0]["data-a"].split(","))) != want_peak:
            fail("%s chart %d: the columns' maxima miss the peak" % (name, k))
        # intervals: a dashed line where each one after init starts, a bar group each
        steps = [a for t, a in els if t == "line" and a.get("class") == "step"]
        if len(steps) != len([r for r in drows if "step" in r or "eval" in r or r in p["tail"]]):
            fail("%s chart %d: %d step lines for %d intervals after init" % (name, k, len(steps), len(drows)))
        bars = [a for t, a in els if t == "g" and a.get("class") == "bar"]
        want_bars = sorted((r["peak_allocated"], r["end_allocated"]) for r in drows)
        got_bars = sorted((int(a["data-peak"]), int(a["data-end"])) for a in bars)
        if got_bars != want_bars:
            fail("%s chart %d: bars %s, JSON %s" % (name, k, got_bars[:4], want_bars[:4]))
        # the breakdown table is the peak interval's
        tab = {a["data-category"] for t, a in els if t == "tr" and "data-category" in a}
        want_tab = {c for c in CATS + ["cached"] if prow["peak_breakdown"][c]}
        if tab != want_tab:
            fail("%s chart %d: breakdown rows %s, JSON %s" % (name, k, sorted(tab), sorted(want_tab)))
    return raw


os.makedirs(WORK, exist_ok=True)


def mk(case):
    return outcheck.mk(MKTRACE, SRC, WORK, case)


# golden scripts: attribution with frames and top sites; two devices; the driver level
raw = check("attrib_loop", [mk("attrib_loop")])
if raw is not None:
    doc = decode_json([os.path.join(WORK, "attrib_loop.zst")])
    # the top sites at the peak, with their Python frames as --top renders them
    p = doc["processes"][0]
    prow = max(rows(p), key=lambda r: r["peak_allocated"])
    for t in prow["top_sites"]:
        for fr in t["frames"]:
            esc = fr.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            if esc not in raw:
                fail("attrib_loop: top-site frame %r not in the page" % fr)
check("twodev", [mk("twodev")])
check("drv_host", [mk("drv_host")])
# merged runs: the two ranks of a ZeRO-3 run on H200s
h200 = os.path.join(SRC, "h200", "driver", "ds13_z3")
check("ds13_z3", sorted(os.path.join(h200, f) for f in os.listdir(h200) if f.endswith(".zst")))

# far more events than columns, one 256 MiB spike that lasts one event
N, SPIKE = 300000, 123457
r = random.Random(7)
L = ["meta host h1", "meta pid 100", "meta rank 0", "meta world_size 1", "meta ts_unit_ns 1000",
     "meta start_realtime_ns 1000000000", "thread 1 main",
     "module 0x10000 0x10000 0x20000 /opt/torch/lib/libc10_cuda.so 0011aabb",
     "alloc seq=0 ts=0 api=malloc ptr=0x100000000 size=17179869184 site=0x10100"]
seq, live, nxt, level, peak, spike_ts = 1, [], 0x100000000, 0, 0, None
for i in range(N):
    if i % 20000 == 0:
        if i:
            L.append("pop seq=%d ts=%d" % (seq, seq))
            seq += 1
        L.append("push seq=%d ts=%d name=train_step" % (seq, seq))
        seq += 1
    if i == SPIKE:
        L.append("alloc seq=%d ts=%d ptr=%#x size=268435456 site=0x10100" % (seq, seq, nxt))
        spike_ts, spike_level = seq, level + 268435456
        L.append("free seq=%d ts=%d ptr=%#x size=268435456 site=0x10100" % (seq + 1, seq + 1, nxt))
        seq += 2
        nxt += 268435456
        continue
    if live and (len(live) > 64 or r.random() < 0.5):
        ptr, s = live.pop(r.randrange(len(live)))
        L.append("free seq=%d ts=%d ptr=%#x size=%d site=0x10100" % (seq, seq, ptr, s))
        level -= s
    else:
        s = r.randrange(1, 2048) * 512
        L.append("alloc seq=%d ts=%d ptr=%#x size=%d site=0x10100" % (seq, seq, nxt, s))
        live.append((nxt, s))
        nxt += s
        level += s
        peak = max(peak, level)
    seq += 1
L.append("pop seq=%d ts=%d" % (seq, seq))
with open(os.path.join(WORK, "long.txt"), "w") as f:
    f.write("\n".join(L) + "\n")
if spike_level <= peak:
    raise SystemExit("the generated spike is not the peak")
zst = os.path.join(WORK, "long.zst")
rc, _, err = run(MKTRACE, os.path.join(WORK, "long.txt"), zst)
if rc:
    raise SystemExit("mktrace long: " + err)
raw = check("long", [zst])
if raw is not None:
    doc = decode_json([zst])
    if max(r["peak_allocated"] for r in rows(doc["processes"][0])) != spike_level:
        fail("long: the decoder's peak is not the spike (%d)" % spike_level)
    m = re.search(r'class="peak" data-peak="(\d+)" data-peak-ns="(\d+)"', raw)
    if not m or int(m.group(1)) != spike_level or int(m.group(2)) != 1000000000 + spike_ts * 1000:
        fail("long: the peak marker is not the spike's level and time: %r" % (m and m.groups(),))
    if len(raw) > 400000:
        fail("long: %d bytes of HTML for %d events (the columns should bound it)" % (len(raw), N))

# bad use: one line, exit 1 (usage) or 2 (bad input)
bad = [
    (["--html", os.path.join(WORK, "no-such-dir", "r.html"), zst], 1, "cannot write"),
    (["--html", os.path.join(WORK, "x.html"), "--dump", zst], 1, "does not go with"),
    (["--html", os.path.join(WORK, "x.html"), "--summary", zst], 1, "does not go with"),
    (["--html", os.path.join(WORK, "x.html"), "--what-if", "micro_batch=2", zst], 1, "does not go with"),
    (["--html", os.path.join(WORK, "x.html"), os.path.join(WORK, "missing.zst")], 2, "missing.zst"),
    (["--html", os.path.join(WORK, "x.html"), os.path.join(SRC, "basic.txt")], 2, "basic.txt"),
]
for args, code, text in bad:
    rc, out, err = run(DECODE, *args)
    if rc != code or text not in err or len(err.strip().splitlines()) != 1:
        fail("dsmemdecode %s: exit %d (want %d), stderr %r" % (" ".join(args), rc, code, err))

outcheck.finish("html")
