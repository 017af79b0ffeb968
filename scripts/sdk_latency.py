#!/usr/bin/env python3
"""Per-call latency as a real client sees it: the official Python SDK (`mcp` 2.x) starts a
stdio server, then makes CALLS serial `tools/call`s of TOOL and times each.

    scripts/sdk_latency.py CALLS [--mode auto|legacy|2026-07-28] [--tool echo]
                           [--args '{"message":"bench"}'] -- COMMAND [ARGS...]

Prints one JSON object, as `mcp_bench latency` does: {"calls", "p50_us", "p99_us", ...}, with
the era the session ended in, the SDK's version, and each half's p50 (a warm-up too short
shows as a first half slower than the second).
scripts/bench.sh runs it against server-everything directly, through the socat floor and
through coogle: the way issue 22 measured the goal (a client's own work is part of each call,
so a hop's cost is read against what a user waits for, not only against a Rust loop)."""
import argparse
import asyncio
import json
import math
import os
import sys
import time
from importlib.metadata import version

from mcp import Client, StdioServerParameters


def parse():
    # The server's command is everything after `--`, taken as it is (argparse's REMAINDER
    # would swallow options written after CALLS).
    argv = sys.argv[1:]
    if "--" not in argv:
        raise SystemExit("usage: sdk_latency.py CALLS [options] -- COMMAND [ARGS...]")
    cut = argv.index("--")
    p = argparse.ArgumentParser()
    p.add_argument("calls", type=int)
    p.add_argument("--mode", default="auto")
    p.add_argument("--warmup", type=int, help="calls made before timing (default CALLS/10, at least 20)")
    p.add_argument("--tool", default="echo")
    p.add_argument("--args", default='{"message":"bench"}')
    a = p.parse_args(argv[:cut])
    a.command = argv[cut + 1 :]
    if not a.command:
        p.error("a server command is needed after --")
    return a


def percentile(sorted_ns, q):
    # As examples/mcp_bench.rs rounds (half away from zero; Python's round() goes to even).
    i = min(len(sorted_ns) - 1, math.floor(q / 100 * (len(sorted_ns) - 1) + 0.5))
    return sorted_ns[i] / 1000


async def run(a):
    params = StdioServerParameters(command=a.command[0], args=a.command[1:], env=dict(os.environ))
    args = json.loads(a.args)
    async with Client(params, mode=a.mode) as c:
        # Warm up as mcp_bench does: the first calls pay for imports, caches and JIT.
        warmup = a.warmup if a.warmup is not None else max(20, a.calls // 10)
        for _ in range(warmup):
            await c.call_tool(a.tool, args)
        samples = []
        for _ in range(a.calls):
            t = time.perf_counter_ns()
            r = await c.call_tool(a.tool, args)
            samples.append(time.perf_counter_ns() - t)
            if r.is_error:
                raise SystemExit(f"the call failed: {r}")
        # Whether the warm-up sufficed: the timed calls' halves should read alike.
        half = len(samples) // 2
        first, second = sorted(samples[:half]), sorted(samples[half:])
        samples.sort()
        return {
            "calls": a.calls,
            "warmup": warmup,
            "p50_us": percentile(samples, 50),
            "p99_us": percentile(samples, 99),
            "p50_first_half_us": percentile(first, 50),
            "p50_second_half_us": percentile(second, 50),
            "era": c.protocol_version,
            "mcp": version("mcp"),
        }


def main():
    a = parse()
    print(json.dumps(asyncio.run(run(a))))


if __name__ == "__main__":
    sys.exit(main())
