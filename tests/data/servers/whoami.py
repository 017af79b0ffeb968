"""A stdio MCP server in one file, for coogle's tests of where and with what a child runs.

Its one tool, `whoami`, answers with the directory it runs in, this file's path, the
`secret.txt` beside where it runs (if any) and the environment variables named by `vars`, as
JSON. Handshake era only: `server/discover` gets -32601, as a legacy server answers it.
"""
import json
import os
import sys

TOOL = {
    "name": "whoami",
    "description": "Where this server runs and with what.",
    "inputSchema": {
        "type": "object",
        "properties": {"vars": {"type": "array", "items": {"type": "string"}}},
    },
}


def answer(msg_id, result=None, error=None):
    msg = {"jsonrpc": "2.0", "id": msg_id}
    if error is not None:
        msg["error"] = error
    else:
        msg["result"] = result
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


def whoami(args):
    try:
        with open("secret.txt") as f:
            secret = f.read().strip()
    except OSError:
        secret = None
    return {
        "cwd": os.getcwd(),
        "file": os.path.abspath(__file__),
        "secret": secret,
        "env": {v: os.environ.get(v) for v in args.get("vars", [])},
    }


for line in sys.stdin:
    if not line.strip():
        continue
    msg = json.loads(line)
    method, msg_id = msg.get("method"), msg.get("id")
    if msg_id is None:
        continue
    params = msg.get("params") or {}
    if method == "initialize":
        answer(msg_id, {
            "protocolVersion": params.get("protocolVersion", "2025-06-18"),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "whoami", "version": "1"},
        })
    elif method == "tools/list":
        answer(msg_id, {"tools": [TOOL]})
    elif method == "tools/call" and params.get("name") == "whoami":
        text = json.dumps(whoami(params.get("arguments") or {}))
        answer(msg_id, {"content": [{"type": "text", "text": text}]})
    elif method == "ping":
        answer(msg_id, {})
    else:
        answer(msg_id, error={"code": -32601, "message": "Method not found"})
