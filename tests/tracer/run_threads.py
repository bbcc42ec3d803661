#!/usr/bin/env python3
"""Given NTHREADS threads allocating through one mutex-protected allocator,
when traced by the tracer core and decoded, then every event is present
(allocs/frees counted exactly), replay agrees with the allocator totals at
every event, and the run ends at zero allocated."""
import json, subprocess, sys, tempfile, glob

threads_exe, decoder, nthreads, nevents = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
with tempfile.TemporaryDirectory() as d:
    out = subprocess.run([threads_exe, d, str(nthreads), str(nevents)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    files = glob.glob(d + "/dsmemtrace.*.zst")
    assert len(files) == 1, files
    r = subprocess.run([decoder, "-v", "--format", "json", files[0]], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "0 disagreements" in r.stderr, "cross-check line missing or disagreements:\n" + r.stderr
    assert "missing" not in r.stderr and "lost" not in r.stderr.lower(), r.stderr
    doc = json.loads(r.stdout)
    p = doc["processes"][0]
    steps = p["steps"]
    assert len(steps) == 1, steps
    # each thread: nevents operations alternating alloc/free per slot, then frees what is live
    allocs = sum(s["allocs"] for s in steps) + sum(s["allocs"] for s in p.get("init", []) + p.get("tail", []))
    frees = sum(s["frees"] for s in steps) + sum(s["frees"] for s in p.get("init", []) + p.get("tail", []))
    per_thread_allocs = (nevents + 1) // 2 if nevents % 32 == 0 else None
    assert allocs == frees, (allocs, frees)
    expect_allocs = 0
    for t in range(nevents):
        if (t // 16) % 2 == 0:
            expect_allocs += 1
    assert allocs == nthreads * expect_allocs, (allocs, nthreads * expect_allocs)
    assert steps[0]["end_allocated"] == 0, steps[0]
    assert steps[0]["peak_allocated"] > 0
    print(f"ok: {allocs} allocs, {frees} frees, peak {steps[0]['peak_allocated']}")
