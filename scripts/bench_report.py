#!/usr/bin/env python3
"""The Markdown tables of scripts/bench.sh from its raw measurements (one JSON line each):

    scripts/bench_report.py RESULTS.jsonl RUNS CALLS TP_CALLS

Separate from the run so a kept RESULTS_OUT file can be rendered again."""
import json, math, statistics, sys, platform, os, subprocess
path, runs, calls, tp_calls = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
rows = [json.loads(l) for l in open(path)]
def by(label): return [r for r in rows if r["label"] == label]
def med(label, key): 
    v = [r[key] for r in by(label)]
    return statistics.median(v) if v else None
# t for a two-sided 95% interval, by degrees of freedom.
T95 = {1: 12.71, 2: 4.30, 3: 3.18, 4: 2.78, 5: 2.57, 6: 2.45, 7: 2.36, 8: 2.31, 9: 2.26,
       10: 2.23, 11: 2.20, 12: 2.18, 13: 2.16, 14: 2.14, 15: 2.13, 20: 2.09, 30: 2.04}
def runs_of(label):
    """{run: p50} of a way; rows written before runs were numbered pair by their order."""
    return {r.get("run", i): r["p50_us"] for i, r in enumerate(by(label))}
def against(way, floor):
    """Way's p50 against the floor's, paired run by run (whole runs here land in slow and quick
    modes, so two medians of unpaired runs can differ by more than the goal on noise alone):
    the mean ratio with its 95% interval, and a verdict only when the interval allows one."""
    a, b = runs_of(way), runs_of(floor)
    logs = [math.log(a[k] / b[k]) for k in sorted(set(a) & set(b))]
    n = len(logs)
    if n == 0:
        return "no paired runs"
    mean = statistics.mean(logs)
    # Between the table's rows, the row below (fewer degrees of freedom: a larger t, a wider
    # interval), so a verdict is never surer than the runs allow.
    t = T95[max(d for d in T95 if d <= n - 1)] if n > 1 else math.inf
    half = t * statistics.stdev(logs) / math.sqrt(n) if n > 1 else math.inf
    lo, hi = math.exp(mean - half) - 1, math.exp(mean + half) - 1
    verdict = "met" if hi <= 0.05 else "not met" if lo > 0.05 else "inconclusive"
    # An end within a twentieth of a point of the goal is printed finer, so that "+5.0" never
    # stands for an end the rule read as above (or below) 5%.
    def end(x): return f"{x * 100:+.2f}" if abs(x - 0.05) < 0.0005 else f"{x * 100:+.1f}"
    interval = f"95% interval {end(lo)} to {end(hi)}%" if n > 1 else "one run, no interval"
    return f"{(math.exp(mean) - 1) * 100:+.1f}% ({interval}, {n} paired runs): {verdict}"
def short_table(ways, direct, floor):
    """p50, p99, over direct and against the floor, for each (name, label) that was measured."""
    if not (by(direct) and by(floor)):
        print(f"(no table: {direct} or {floor} was not measured)")
        return
    d, f = med(direct, "p50_us"), med(floor, "p50_us")
    print("| way | p50 | p99 | p50 over direct | p50 against the floor |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name, label in ways:
        if not by(label): continue
        p50, p99 = med(label, "p50_us"), med(label, "p99_us")
        over = "–" if label == direct else f"{p50 - d:+.0f} µs"
        against = "–" if label in (direct, floor) else f"{(p50 / f - 1) * 100:+.0f}% ({p50 - f:+.0f} µs)"
        print(f"| {name} | {p50:.0f} µs | {p99:.0f} µs | {over} | {against} |")
def paired(a, b):
    """A against B measured call by call in turn (`mcp_bench pair`): the rows "A@B" and "B@A"."""
    return f"{a}@{b}", f"{b}@{a}"
def pair_table(pairs):
    """For each (name, A, B) measured side by side: both p50s and A against B over the runs."""
    pairs = [(n, *paired(a, b)) for n, a, b in pairs if by(paired(a, b)[0])]
    if not pairs: return
    print("| A against B | A's p50 | B's p50 | difference | A against B, paired run by run |")
    print("| --- | ---: | ---: | ---: | --- |")
    for name, a, b in pairs:
        pa, pb = med(a, "p50_us"), med(b, "p50_us")
        print(f"| {name} | {pa:.0f} µs | {pb:.0f} µs | {pa - pb:+.0f} µs | {against(a, b)} |")
# The pairs scripts/bench.sh measures, by the labels of their ways.
PAIRS = [("coogle against the floor", "coogle-fake", "floor-fake"),
         ("coogle against the floor over pipes", "coogle-fake", "floor-pipes-fake"),
         ("coogle's daemon alone against one `socat` hop", "daemon-fake", "hop-fake"),
         ("the daemon's shape with none of its work against one `socat` hop", "tokio-fake", "hop-fake"),
         ("coogle's daemon alone against that shape", "daemon-fake", "tokio-fake"),
         (f"coogle against the previous build, {os.environ.get('BASE_VERSION') or 'BASE'}", "coogle-fake", "base-fake")]
cpu = next((l.split(":",1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
load = open("/proc/loadavg").read().split()[:3]
print(f"Machine: {cpu}, {os.cpu_count()} cores, Linux {platform.release()}; medians of {runs} runs, {calls} sequential calls per latency run; load average when the report was written {' '.join(load)} (1, 5, 15 min).\n")
version = os.environ.get("COOGLE_VERSION", "")
if version:
    # `coogle --version` ends in `pgo` for the build scripts/pgo makes.
    build = ("the PGO build (`scripts/pgo`), as the release's archives" if version.rstrip(")").endswith("pgo")
             else "the plain build (`cargo build --release`), as `cargo install`; `PGO=1` measures the release's")
    print(f"coogle under test: {version}: {build}.\n")
print("| measure | direct | through coogle | added / ratio |")
print("| --- | ---: | ---: | ---: |")
for name, d, c in [("fake Rust child", "direct-fake", "coogle-fake"), ("server-everything", "direct-everything", "coogle-everything")]:
    if not by(c): continue
    for q in ("p50_us", "p99_us"):
        dv, cv = med(d, q), med(c, q)
        print(f"| tools/call {q[:3]} latency, {name} | {dv:.0f} µs | {cv:.0f} µs | {cv-dv:+.0f} µs |")
for name, d, c in [("fake child", "startup-direct-fake", "startup-coogle-fake"), ("workspace-mcp", "startup-direct-workspace", "startup-coogle-workspace")]:
    if not by(c): continue
    dv, cv = med(d, "median_ms"), med(c, "median_ms")
    ratio = f"{dv/cv:.0f}× faster" if dv > cv else f"+{cv-dv:.1f} ms (shim start)"
    print(f"| new session → tools/list, {name} | {dv:.1f} ms | {cv:.1f} ms (warm daemon) | {ratio} |")
for name, direct, warm, cold in [
        ("fake child", "cc-direct-fake", "cc-warm-coogle-fake", None),
        (f"fake child starting in {os.environ.get('SLOW_MS', '3000')} ms", "cc-direct-slow", None, "cc-cold-coogle-slow"),
        ("workspace-mcp", "cc-direct-workspace", "cc-warm-coogle-workspace", "cc-cold-coogle-workspace")]:
    if not by(direct): continue
    dv = med(direct, "median_ms")
    era = by(direct)[0]["era"]
    parts = []
    if warm and by(warm): parts.append(f"warm {med(warm,'median_ms'):.1f} ms ({by(warm)[0]['era']})")
    if cold and by(cold): parts.append(f"cold daemon {med(cold,'median_ms'):.1f} ms, probe answered in {med(cold,'probe_ms'):.1f} ms ({by(cold)[0]['era']})")
    print(f"| Claude Code-style start (probe → tools/list), {name} | {dv:.1f} ms ({era}) | {'; '.join(parts)} | |")
shim = med("coogle-fake", "rss_kib")
print(f"| RSS of one `coogle mcp` shim | – | {shim/1024:.1f} MiB | |")
print(f"| RSS of the daemon (fake child) | – | {med('rss-daemon-fake','rss_kib')/1024:.1f} MiB | |")
if by("rss-daemon-workspace"):
    print(f"| RSS of the daemon (workspace-mcp child) | – | {med('rss-daemon-workspace','rss_kib')/1024:.1f} MiB | |")
    for n in (1, 4, 10):
        m, d = by(f"mem-coogle-ws-{n}"), by(f"mem-direct-ws-{n}")
        if not (m and d): continue
        shared = (m[0]["sessions_pss_kib"] + m[0]["others_pss_kib"]) / 1024
        direct = d[0]["sessions_pss_kib"] / 1024
        diff = direct - shared
        verdict = f"{diff:.0f} MiB less" if diff >= 0 else f"{-diff:.0f} MiB more"
        print(f"| memory, {n} session(s), workspace-mcp (PSS, all processes) | {direct:.0f} MiB ({n} × uvx + python) | {shared:.0f} MiB (1 child + daemon + {n} shims) | {verdict} |")
for n in (1, 4, 10):
    c, d = by(f"mem-coogle-fake-{n}"), by(f"mem-direct-fake-{n}")
    if c and d:
        c, d = c[0], d[0]
        print(f"| memory, {n} session(s), fake child (PSS) | {d['sessions_pss_kib']/1024:.1f} MiB | {(c['sessions_pss_kib'] + c['others_pss_kib'])/1024:.1f} MiB (shims {c['sessions_pss_kib']/1024:.1f}) | |")
for label, mc in (("tp-mc1", 1), ("tp-mc8", 8)):
    print(f"| throughput, 8 sessions, maxConcurrent {mc} (fake echo) | – | {med(label,'calls_per_s'):.0f} calls/s | |")
# Per call, every way of reaching the same fake child, measured in this run: the floor is two
# socat hops with no multiplexing (the least an out-of-process hop costs here).
ways = [("direct (the client starts the child)", "direct-fake"),
        ("floor: two `socat` hops, no multiplexing", "floor-fake"),
        ("floor over pipes to the child (`EXEC:…,pipes`, as coogle's daemon)", "floor-pipes-fake"),
        ("coogle (`coogle mcp` → daemon → child)", "coogle-fake"),
        ("coogle's daemon alone (the bench on its socket, no shim)", "daemon-fake"),
        ("one `socat` hop (the bench on the pipes floor's listener, no client `socat`)", "hop-fake"),
        ("the daemon's shape with none of its work (`tokio_relay`, the bench on its socket)", "tokio-fake"),
        (f"rmcp-mux {os.environ.get('PEER_VERSION') or ''} (proxy → daemon → child)".replace("  ", " "), "peer-fake"),
        (f"previous build, {os.environ.get('BASE_VERSION') or 'BASE'} (`coogle mcp` → daemon → child)", "base-fake")]
if by("floor-fake"):
    d, f = med("direct-fake", "p50_us"), med("floor-fake", "p50_us")
    # Noise on a shared machine only ever adds time, and whole runs land in a slow mode (two
    # of a relay's processes on one busy core): the quietest run's p50 is read beside the median.
    def low(label): return min(r["p50_us"] for r in by(label))
    fl = low("floor-fake")
    print(f"\nPer tools/call, the same fake child reached every way, medians of {runs} runs in this run (and the quietest run's p50):\n")
    print("| way | p50 | p99 | p50 over direct | p50 against the floor | p50, quietest run | against the floor's |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, label in ways:
        if not by(label): continue
        p50, p99 = med(label, "p50_us"), med(label, "p99_us")
        over = "–" if label == "direct-fake" else f"{p50 - d:+.0f} µs"
        floor = "–" if label in ("direct-fake", "floor-fake") else f"{(p50 / f - 1) * 100:+.0f}% ({p50 - f:+.0f} µs)"
        lowf = "–" if label in ("direct-fake", "floor-fake") else f"{(low(label) / fl - 1) * 100:+.0f}%"
        print(f"| {name} | {p50:.0f} µs | {p99:.0f} µs | {over} | {floor} | {low(label):.0f} µs | {lowf} |")
    c, cl = med("coogle-fake", "p50_us"), low("coogle-fake")
    print(f"\nGoal: coogle's p50 within 5% of the floor, run by run: {against('coogle-fake', 'floor-fake')}; "
          f"medians {(c / f - 1) * 100:+.1f}%, quietest runs {(cl / fl - 1) * 100:+.1f}%; "
          f"the floor adds {f - d:.0f} µs to direct, coogle {c - d:.0f} µs.")
    if by("floor-pipes-fake"):
        print(f"Against the floor over pipes: {against('coogle-fake', 'floor-pipes-fake')}.")
    if by("hop-fake"):
        # One hop against one hop: the daemon's against a listening socat's.
        print(f"Hop by hop: coogle's daemon alone against one `socat` hop: {against('daemon-fake', 'hop-fake')}, "
              f"{med('daemon-fake', 'p50_us') - med('hop-fake', 'p50_us'):+.0f} µs; the shim's hop (coogle less the daemon alone) "
              f"{c - med('daemon-fake', 'p50_us'):.0f} µs against the client `socat`'s (the floor over pipes less one hop) "
              f"{med('floor-pipes-fake', 'p50_us') - med('hop-fake', 'p50_us'):.0f} µs.")
    if by("tokio-fake") and by("hop-fake"):
        # The runtime and the task shape against coogle's own work per line.
        print(f"Where the daemon's hop goes: the daemon's shape with none of its work (`tokio_relay`) against one `socat` hop "
              f"{against('tokio-fake', 'hop-fake')}; the daemon alone against that shape {against('daemon-fake', 'tokio-fake')}, "
              f"{med('daemon-fake', 'p50_us') - med('tokio-fake', 'p50_us'):+.0f} µs.")
    if by(paired("coogle-fake", "floor-fake")[0]):
        print(f"\nSide by side: each pair's two ways called in turn, call by call, in one process (`mcp_bench pair`, {calls} calls of each "
              f"per run, medians of the runs). A quick or slow spell of this machine falls on both ways of a pair alike, so these "
              f"differences are much less moved by the spells that move whole runs above. Here the bench's session speaks the "
              f"handshake era and the fake child 2026-07-28, so coogle translates every answer and the floors translate nothing:\n")
        pair_table(PAIRS)
        print(f"\nGoal, side by side: coogle against the floor {against(*paired('coogle-fake', 'floor-fake'))}; "
              f"against the floor over pipes {against(*paired('coogle-fake', 'floor-pipes-fake'))}.")
    if by(paired("coogle-fake-cc", "floor-fake-cc")[0]):
        # The bench's handshake-era session meets a 2026-07-28 child above, so every answer is
        # translated; Claude Code 2.1.328 speaks the child's era, and nothing is.
        print("\nSide by side in the era Claude Code 2.1.328 speaks (`MCP_BENCH_ERA=2026-07-28`: its `server/discover` probe, "
              "then the envelope on every request; the fake child speaks that era, so nothing is translated):\n")
        pair_table([(n, a + "-cc", b + "-cc") for n, a, b in PAIRS[:3]])
        print(f"\nGoal in Claude Code's era, side by side: coogle against the floor {against(*paired('coogle-fake-cc', 'floor-fake-cc'))}; "
              f"against the floor over pipes {against(*paired('coogle-fake-cc', 'floor-pipes-fake-cc'))}.")
    if by(paired("coogle-fake-cc-gap", "floor-fake-cc-gap")[0]):
        # Back to back, work a way leaves after its answer runs into the next call, the other
        # way's half the time; paced, it falls on no call, and every process wakes from idle.
        print(f"\nPaced: the same pair with {os.environ.get('GAP_US') or 500} µs of quiet before each call, untimed, closer to an agent's calls "
              f"(seconds apart) than back to back, so work one way leaves after its answer falls on neither way's next call:\n")
        pair_table([("coogle against the floor, Claude Code's era, paced", "coogle-fake-cc-gap", "floor-fake-cc-gap"),
                    ("the same on one CPU", "coogle-fake-cc-gap-1cpu", "floor-fake-cc-gap-1cpu")])
    if by("floor-fake-1cpu"):
        # Every process of each way on one CPU (taskset -c 0): no cross-CPU wake-up, so what
        # is left is each hop's own work; these runs repeat to the microsecond.
        f1 = med("floor-fake-1cpu", "p50_us")
        print(f"\nThe same, every process on one CPU (`taskset -c 0`), medians of {runs} runs:\n")
        short_table([(name, label + "-1cpu") for name, label in ways[:7]], "direct-fake-1cpu", "floor-fake-1cpu")
        line = f"\nGoal on one CPU, run by run: {against('coogle-fake-1cpu', 'floor-fake-1cpu')}"
        if by("floor-pipes-fake-1cpu"):
            line += f"; against the floor over pipes {against('coogle-fake-1cpu', 'floor-pipes-fake-1cpu')}"
        if by("hop-fake-1cpu"):
            line += f"; the daemon alone against one `socat` hop {against('daemon-fake-1cpu', 'hop-fake-1cpu')}"
        if by("tokio-fake-1cpu") and by("hop-fake-1cpu"):
            line += (f"; the daemon's shape with none of its work against one `socat` hop {against('tokio-fake-1cpu', 'hop-fake-1cpu')}"
                     f", the daemon alone against it {against('daemon-fake-1cpu', 'tokio-fake-1cpu')}")
        print(line + ".")
        if by(paired("coogle-fake-1cpu", "floor-fake-1cpu")[0]):
            print("\nSide by side on one CPU:\n")
            pair_table([(n, a + "-1cpu", b + "-1cpu") for n, a, b in PAIRS])
            print(f"\nGoal on one CPU, side by side: coogle against the floor {against(*paired('coogle-fake-1cpu', 'floor-fake-1cpu'))}; "
                  f"against the floor over pipes {against(*paired('coogle-fake-1cpu', 'floor-pipes-fake-1cpu'))}.")
        if by(paired("coogle-fake-cc-1cpu", "floor-fake-cc-1cpu")[0]):
            print("\nSide by side on one CPU, in Claude Code's era:\n")
            pair_table([(n, a + "-cc-1cpu", b + "-cc-1cpu") for n, a, b in PAIRS[:3]])
            print(f"\nGoal on one CPU in Claude Code's era, side by side: coogle against the floor {against(*paired('coogle-fake-cc-1cpu', 'floor-fake-cc-1cpu'))}; "
                  f"against the floor over pipes {against(*paired('coogle-fake-cc-1cpu', 'floor-pipes-fake-cc-1cpu'))}.")
else:
    print(f"\n(no floor row: {os.environ.get('NO_FLOOR') or 'none was measured'})")
if by("sdk-coogle") and by("sdk-floor") and by("sdk-direct"):
    # Issue 22's own measure: a real client's per-call work is part of what a user waits for.
    sdk = by("sdk-coogle")[0]
    eras = sorted({r.get("era") for l in ("sdk-direct", "sdk-floor", "sdk-floor-pipes", "sdk-coogle") for r in by(l)})
    n = len(by("sdk-coogle"))
    print(f"\nAs a client sees it: the official Python SDK (`mcp` {sdk.get('mcp', '?')}) making serial `tools/call`s of server-everything's echo, "
          f"{n} runs of {sdk['calls']} calls after {sdk.get('warmup', '?')} of warm-up, every way from a fresh node, the order rotated each run "
          f"(scripts/sdk_latency.py); the sessions' era: {', '.join(map(str, eras))}{' (not the same for every way!)' if len(eras) > 1 else ''}. Medians:\n")
    short_table([("direct (the client starts server-everything)", "sdk-direct"),
                 ("floor: two `socat` hops", "sdk-floor"),
                 ("floor over pipes to the child", "sdk-floor-pipes"),
                 ("coogle (`coogle mcp` → daemon → child)", "sdk-coogle")], "sdk-direct", "sdk-floor")
    added = lambda way: sorted(runs_of(way)[k] - runs_of("sdk-direct")[k] for k in set(runs_of(way)) & set(runs_of("sdk-direct")))
    spread = lambda xs: f"{statistics.median(xs):.0f} µs (runs {xs[0]:.0f} to {xs[-1]:.0f})" if xs else "–"
    print(f"\nAdded to direct, run by run: coogle {spread(added('sdk-coogle'))}, the floor {spread(added('sdk-floor'))}"
          + (f", the floor over pipes {spread(added('sdk-floor-pipes'))}" if by("sdk-floor-pipes") else "") + ".")
    print(f"Goal, measured as issue 22 measured it: coogle against the floor {against('sdk-coogle', 'sdk-floor')}"
          + (f"; against the floor over pipes {against('sdk-coogle', 'sdk-floor-pipes')}" if by("sdk-floor-pipes") else "") + ".")
    halves = [r["p50_first_half_us"] / r["p50_second_half_us"] - 1 for l in ("sdk-direct", "sdk-floor", "sdk-floor-pipes", "sdk-coogle") for r in by(l) if "p50_first_half_us" in r]
    if halves:
        print(f"Warm-up check: each run's first half of timed calls against its second, p50: {statistics.median(halves) * 100:+.1f}% (median of {len(halves)} runs).")
if by("peer-fake"):
    peer = f"rmcp-mux {os.environ.get('PEER_VERSION') or ''}".strip()
    print(f"\nSide by side with a peer that also shares one child among sessions: {peer} (crates.io), its daemon in front of the same fake child, one `rmcp-mux-proxy` per session.\n")
    print(f"| measure | coogle | {peer} | ratio |")
    print("| --- | ---: | ---: | ---: |")
    for q in ("p50_us", "p99_us"):
        c, p = med("coogle-fake", q) - med("direct-fake", q), med("peer-fake", q) - med("direct-fake", q)
        print(f"| added latency per tools/call, {q[:3]} | {c:.0f} µs | {p:.0f} µs | {p/c:.1f}× |")
    c, p = med("startup-coogle-fake", "median_ms"), med("startup-peer-fake", "median_ms")
    print(f"| new session → tools/list | {c:.1f} ms | {p:.1f} ms | {p/c:.1f}× |")
    if by("cc-warm-peer-fake"):
        c, p = med("cc-warm-coogle-fake", "median_ms"), med("cc-warm-peer-fake", "median_ms")
        ce, pe = by("cc-warm-coogle-fake")[0]["era"], by("cc-warm-peer-fake")[0]["era"]
        print(f"| Claude Code-style start, era the session ends up in | {c:.1f} ms ({ce}) | {p:.1f} ms ({pe}) | {p/c:.1f}× |")
    c, p = med("coogle-fake", "rss_kib") / 1024, med("peer-fake", "rss_kib") / 1024
    print(f"| RSS per session (shim / proxy) | {c:.1f} MiB | {p:.1f} MiB | {p/c:.2f}× |")
    for n in (10,):
        cm, pm = by(f"mem-coogle-fake-{n}"), by(f"mem-peer-fake-{n}")
        if cm and pm:
            print(f"| PSS per session (shim / proxy), {n} sessions | {cm[0]['sessions_pss_kib']/n/1024:.2f} MiB | {pm[0]['sessions_pss_kib']/n/1024:.2f} MiB | |")
    c, p = med("rss-daemon-fake", "rss_kib") / 1024, med("rss-peer-server", "rss_kib") / 1024
    print(f"| shared part (daemon), without the child | {c:.1f} MiB | {p:.1f} MiB | {p/c:.1f}× |")
    for n in (1, 10):
        c, p = by(f"mem-coogle-fake-{n}"), by(f"mem-peer-fake-{n}")
        if c and p:
            c = (c[0]["sessions_pss_kib"] + c[0]["others_pss_kib"]) / 1024
            p = (p[0]["sessions_pss_kib"] + p[0]["others_pss_kib"]) / 1024
            print(f"| memory, {n} session(s), all processes (PSS) | {c:.1f} MiB | {p:.1f} MiB | {p/c:.1f}× |")
if by("base-fake"):
    base = os.environ.get("BASE_VERSION") or "the base build"
    print(f"\nThis build side by side with {base} (BASE), same fake child, same run:\n")
    print(f"| measure | this build | {base} |")
    print("| --- | ---: | ---: |")
    for q in ("p50_us", "p99_us"):
        d = med("direct-fake", q)
        print(f"| added latency per tools/call, {q[:3]} | {med('coogle-fake', q) - d:.0f} µs | {med('base-fake', q) - d:.0f} µs |")
    print(f"| new session → tools/list | {med('startup-coogle-fake','median_ms'):.1f} ms | {med('startup-base-fake','median_ms'):.1f} ms |")
    print(f"| RSS of one shim | {med('coogle-fake','rss_kib')/1024:.1f} MiB | {med('base-fake','rss_kib')/1024:.1f} MiB |")
    print(f"| RSS of the daemon (fake child) | {med('rss-daemon-fake','rss_kib')/1024:.1f} MiB | {med('rss-daemon-base','rss_kib')/1024:.1f} MiB |")
    print(f"| throughput, 8 sessions, maxConcurrent 1 | {med('tp-mc1','calls_per_s'):.0f} calls/s | {med('tp-base','calls_per_s'):.0f} calls/s |")
    for n in (1, 10):
        c, b = by(f"mem-coogle-fake-{n}"), by(f"mem-base-fake-{n}")
        if c and b:
            c = (c[0]["sessions_pss_kib"] + c[0]["others_pss_kib"]) / 1024
            b = (b[0]["sessions_pss_kib"] + b[0]["others_pss_kib"]) / 1024
            print(f"| memory, {n} session(s), fake child, all processes (PSS) | {c:.1f} MiB | {b:.1f} MiB |")
