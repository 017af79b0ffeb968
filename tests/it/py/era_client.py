"""Drive a stdio MCP server (here: `coogle mcp`) with the official Python SDK `mcp` 2.x, in one
protocol era, and print what happened as one JSON object on stdout.

    era_client.py --mode auto|legacy|2026-07-28 [--call TOOL ARGS_JSON] [--elicit CONTENT_JSON]
                  [--log-level LEVEL] -- COMMAND [ARGS...]

The test harness compares what each era sees. A failure to connect is reported as
{"error": "..."} with exit code 1, never a traceback on stdout.
"""

import argparse
import asyncio
import json
import os
import sys

from mcp import Client, StdioServerParameters, types


def parse():
    p = argparse.ArgumentParser()
    p.add_argument("--mode", required=True)
    p.add_argument("--call", nargs=2, metavar=("TOOL", "ARGS"))
    p.add_argument("--elicit")
    p.add_argument("--log-level")
    p.add_argument("command", nargs=argparse.REMAINDER)
    a = p.parse_args()
    if a.command and a.command[0] == "--":
        a.command = a.command[1:]
    return a


async def run(a):
    params = StdioServerParameters(command=a.command[0], args=a.command[1:], env=dict(os.environ))
    asked = []
    logs = []

    async def elicit(_ctx, req):
        asked.append(req.message)
        return types.ElicitResult(action="accept", content=json.loads(a.elicit))

    async def log(msg):
        logs.append(msg.data)

    kwargs = {"mode": a.mode, "logging_callback": log}
    if a.elicit:
        kwargs["elicitation_callback"] = elicit
    if a.log_level:
        kwargs["log_level"] = a.log_level
    out = {}
    async with Client(params, **kwargs) as c:
        out["protocolVersion"] = c.protocol_version
        out["server"] = c.server_info.name if c.server_info else None
        listed = await c.list_tools()
        out["tools"] = sorted(t.name for t in listed.tools)
        if a.call:
            r = await c.call_tool(a.call[0], json.loads(a.call[1]))
            out["isError"] = bool(r.is_error)
            out["text"] = "".join(getattr(b, "text", "") for b in r.content)
        out["asked"] = asked
        out["logs"] = logs
    return out


def main():
    a = parse()
    try:
        out = asyncio.run(asyncio.wait_for(run(a), timeout=60))
    except BaseException as e:  # report, never a traceback on stdout
        print(json.dumps({"error": f"{type(e).__name__}: {e}"}))
        sys.exit(1)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
