#!/usr/bin/env python3
"""The Markdown tables of scripts/bench.sh from its raw measurements (one JSON line each):

    scripts/bench_report.py RESULTS.jsonl RUNS CALLS TP_CALLS

Separate from the run so a kept RESULTS_OUT file can be rendered again."""
import json, statistics, sys, platform, os, subprocess
path, runs, calls, tp_calls = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
rows = [json.loads(l) for l in open(path)]
def by(label): return [r for r in rows if r["label"] == label]
def sdk_version():
    try:
        from importlib.metadata import version
        return version("mcp")
    except Exception:
        return "?"
def med(label, key): 
    v = [r[key] for r in by(label)]
    return statistics.median(v) if v else None
within5 = lambda x, y: "met" if x <= y * 1.05 else "not met"
def short_table(ways, direct, floor):
    """p50, p99, over direct and against the floor, for each (name, label) that was measured."""
    d, f = med(direct, "p50_us"), med(floor, "p50_us")
    print("| way | p50 | p99 | p50 over direct | p50 against the floor |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name, label in ways:
        if not by(label): continue
        p50, p99 = med(label, "p50_us"), med(label, "p99_us")
        over = "–" if label == direct else f"{p50 - d:+.0f} µs"
        against = "–" if label in (direct, floor) else f"{(p50 / f - 1) * 100:+.0f}% ({p50 - f:+.0f} µs)"
        print(f"| {name} | {p50:.0f} µs | {p99:.0f} µs | {over} | {against} |")
cpu = next((l.split(":",1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
load = open("/proc/loadavg").read().split()[:3]
print(f"Machine: {cpu}, {os.cpu_count()} cores, Linux {platform.release()}; medians of {runs} runs, {calls} sequential calls per latency run; load average when the report was written {' '.join(load)} (1, 5, 15 min).\n")
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
    print(f"\nGoal: coogle's p50 within 5% of the floor: medians {(c / f - 1) * 100:+.1f}% ({within5(c, f)}), "
          f"quietest runs {(cl / fl - 1) * 100:+.1f}% ({within5(cl, fl)}); "
          f"the floor adds {f - d:.0f} µs to direct, coogle {c - d:.0f} µs.")
    if by("floor-pipes-fake"):
        fp = med("floor-pipes-fake", "p50_us")
        print(f"Against the floor over pipes: {(c / fp - 1) * 100:+.1f}% ({within5(c, fp)}).")
    if by("floor-fake-1cpu"):
        # Every process of each way on one CPU (taskset -c 0): no cross-CPU wake-up, so what
        # is left is each hop's own work; these runs repeat to the microsecond.
        f1 = med("floor-fake-1cpu", "p50_us")
        print(f"\nThe same, every process on one CPU (`taskset -c 0`), medians of {runs} runs:\n")
        short_table([(name, label + "-1cpu") for name, label in ways[:5]], "direct-fake-1cpu", "floor-fake-1cpu")
        c1 = med("coogle-fake-1cpu", "p50_us")
        line = f"\nGoal on one CPU: coogle's p50 {(c1 / f1 - 1) * 100:+.1f}% against the floor ({within5(c1, f1)})"
        if by("floor-pipes-fake-1cpu"):
            fp1 = med("floor-pipes-fake-1cpu", "p50_us")
            line += f", {(c1 / fp1 - 1) * 100:+.1f}% against the floor over pipes ({within5(c1, fp1)})"
        print(line + ".")
else:
    print("\n(no floor row: socat is not installed)")
if by("sdk-coogle"):
    # Issue 22's own measure: a real client's per-call work is part of what a user waits for.
    sf = med("sdk-floor", "p50_us")
    print(f"\nAs a client sees it: the official Python SDK (`mcp` {sdk_version()}) making serial `tools/call`s of server-everything's echo, {runs} interleaved runs (scripts/sdk_latency.py), medians:\n")
    short_table([("direct (the client starts server-everything)", "sdk-direct"),
                 ("floor: two `socat` hops", "sdk-floor"),
                 ("floor over pipes to the child", "sdk-floor-pipes"),
                 ("coogle (`coogle mcp` → daemon → child)", "sdk-coogle")], "sdk-direct", "sdk-floor")
    sc = med("sdk-coogle", "p50_us")
    line = f"\nGoal, measured as issue 22 measured it: coogle's p50 {(sc / sf - 1) * 100:+.1f}% against the floor ({within5(sc, sf)})"
    if by("sdk-floor-pipes"):
        sp = med("sdk-floor-pipes", "p50_us")
        line += f", {(sc / sp - 1) * 100:+.1f}% against the floor over pipes ({within5(sc, sp)})"
    sd = med("sdk-direct", "p50_us")
    line += f"; coogle adds {sc - sd:.0f} µs to direct, the floor {sf - sd:.0f}"
    print(line + f"; in each run, coogle against that run's floor: {', '.join(f'{(c / f - 1) * 100:+.0f}%' for c, f in zip([r['p50_us'] for r in by('sdk-coogle')], [r['p50_us'] for r in by('sdk-floor')]))}.")
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
