#!/usr/bin/env bash
# Memory of idle shims, coogle's `coogle mcp` beside rmcp-mux's `rmcp-mux-proxy`, in one run.
#
#   scripts/shim-memory.sh            # 10 shims of each, median per shim
#   SHIMS=20 scripts/shim-memory.sh
#
# The method is scripts/bench.sh's: each shim is connected to its daemon (a fake child behind
# it), has answered initialize and tools/list, then sits idle; RSS and PSS come from
# /proc/PID/smaps_rollup, threads from /proc/PID/status. Prints one JSON object per tool; the
# "in-process" row is `coogle mcp` kept in coogle's own image (COOGLE_SHIM=in-process), as every
# shim ran before `coogle-mcp` existed and as it still runs when that file is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

SHIMS=${SHIMS:-10}
TARGET=${CARGO_TARGET_DIR:-$PWD/target}
cargo build --release --quiet --bins --example fake_mcp
# The shim as the Linux release archives ship it: linked static (scripts/static-shim).
# Where it cannot be (no static glibc), the dynamic one is measured, and said so.
case "$(rustc -vV | sed -n 's/^host: //p')" in
  *-linux-gnu*) scripts/static-shim >/dev/null || echo "warning: measuring the dynamic shim (scripts/static-shim failed)" >&2 ;;
esac
COOGLE=$TARGET/release/coogle
FAKE=$TARGET/release/examples/fake_mcp

WORK=$(mktemp -d /tmp/coogle-shim-mem.XXXXXX)
PIDS=()
cleanup() {
  COOGLE_CONFIG=$WORK/config.json COOGLE_SOCKET=$WORK/s.sock "$COOGLE" stop >/dev/null 2>&1 || true
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
export HOME=$WORK/home XDG_CONFIG_HOME=$WORK/home/.config XDG_STATE_HOME=$WORK/home/.local/state
unset XDG_RUNTIME_DIR CLAUDE_CODE_SESSION_ID RUST_LOG
mkdir -p "$HOME"

printf '{"servers":{"google":{"command":"%s","args":[],"credentials":{"source":"none"}}}}\n' \
  "$FAKE" >"$WORK/config.json"
COOGLE_CONFIG=$WORK/config.json COOGLE_SOCKET=$WORK/s.sock "$COOGLE" serve >/dev/null 2>&1 &
PIDS+=($!)
for _ in $(seq 1 200); do
  COOGLE_CONFIG=$WORK/config.json COOGLE_SOCKET=$WORK/s.sock "$COOGLE" status --json \
    >/dev/null 2>&1 && break
  sleep 0.05
done

PEER=()
if command -v rmcp-mux >/dev/null && command -v rmcp-mux-proxy >/dev/null; then
  rmcp-mux --socket "$WORK/mux.sock" --cmd "$FAKE" --lazy-start false --max-active-clients 64 \
    --log-level warn >"$WORK/peer.log" 2>&1 &
  PIDS+=($!)
  for _ in $(seq 1 100); do [[ -S $WORK/mux.sock ]] && break; sleep 0.05; done
  PEER=(rmcp-mux-proxy --socket "$WORK/mux.sock")
fi

python3 - "$SHIMS" "$WORK" "$COOGLE" "${PEER[@]}" <<'PY'
import json, os, statistics, subprocess, sys, time
n, work, coogle, peer = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4:]
env = dict(os.environ, COOGLE_CONFIG=f"{work}/config.json", COOGLE_SOCKET=f"{work}/s.sock")

def session(cmd, extra):
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=dict(env, **extra))
    def ask(i, method, params):
        p.stdin.write((json.dumps({"jsonrpc": "2.0", "id": i, "method": method, "params": params}) + "\n").encode())
        p.stdin.flush()
        while True:
            m = json.loads(p.stdout.readline())
            if m.get("id") == i and "method" not in m:
                return m
    ask(1, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                          "clientInfo": {"name": "shim-memory", "version": "1"}})
    p.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
    ask(2, "tools/list", {})
    ask(3, "tools/call", {"name": "echo", "arguments": {"text": "x", "message": "x"}})
    return p

def field(path, name):
    for line in open(path):
        if line.startswith(name + ":"):
            return int(line.split()[1])
    return 0

def measure(label, cmd, extra={}):
    procs = [session(cmd, extra) for _ in range(n)]
    time.sleep(0.5)  # idle
    rows = [(field(f"/proc/{p.pid}/smaps_rollup", "Rss"), field(f"/proc/{p.pid}/smaps_rollup", "Pss"),
             field(f"/proc/{p.pid}/status", "Threads")) for p in procs]
    for p in procs:
        p.stdin.close()
        p.wait(timeout=10)
    med = lambda i: statistics.median(r[i] for r in rows)
    print(json.dumps({"label": label, "shims": n, "rss_kib": med(0), "pss_kib": med(1), "threads": med(2)}))

measure("coogle mcp", [coogle, "mcp"])
measure("coogle mcp, in-process", [coogle, "mcp"], {"COOGLE_SHIM": "in-process"})
if peer:
    measure("rmcp-mux-proxy", peer)
PY
