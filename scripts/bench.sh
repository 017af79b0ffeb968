#!/usr/bin/env bash
# Benchmarks coogle against the same MCP server run directly, side by side in one run.
#
#   scripts/bench.sh            # full run (a few minutes)
#   RUNS=3 CALLS=500 scripts/bench.sh   # quicker
#   BASE=../old/target/release/coogle scripts/bench.sh   # also an older build, side by side
#   FLEET=0 scripts/bench.sh            # without the 5 sessions × 6 real servers headline
#   SDK=0 scripts/bench.sh              # without the Python SDK client's view (scripts/sdk_latency.py)
#   RESULTS_OUT=r.jsonl scripts/bench.sh   # keep the raw measurements (scripts/bench_report.py)
#   PGO=1 scripts/bench.sh              # coogle built with profile-guided optimization (scripts/pgo)
#
# Everything runs in a temporary HOME with its own daemons on private Unix sockets. Prints a
# Markdown table of medians over RUNS repetitions: added latency per tools/call (p50, p99),
# new-session-to-tools/list, Claude Code-style start warm and cold, RSS of shim, daemon and
# child, memory with 1, 4 and 10 sessions, throughput with 8 sessions, the floor (two socat
# hops, no multiplexing) and rmcp-mux side by side, and the fleet headline (scripts/fleet.py).
# The goal's comparisons (coogle against the floor, the daemon against one socat hop) are also
# measured call by call in turn in one process (`mcp_bench pair`), which this machine's quick
# and slow spells cannot tell apart.
set -euo pipefail
cd "$(dirname "$0")/.."

RUNS=${RUNS:-5}
CALLS=${CALLS:-2000}
# The SDK's runs spread by a fifth of their value here: more of them than of the rest.
SDK_RUNS=${SDK_RUNS:-15}
TP_CALLS=${TP_CALLS:-1000}
# The quiet before each call of the paced pairs, µs.
GAP_US=${GAP_US:-500}

cargo build --release --quiet --bins --example fake_mcp --example mcp_bench --example tokio_relay
# The shim as the Linux release archives ship it: linked static (scripts/static-shim).
# Where it cannot be (no static glibc), the dynamic one is measured, and said so.
case "$(rustc -vV | sed -n 's/^host: //p')" in
  *-linux-gnu*) scripts/static-shim >/dev/null || echo "warning: measuring the dynamic shim (scripts/static-shim failed)" >&2 ;;
esac
BIN=${CARGO_TARGET_DIR:-$PWD/target}/release
COOGLE=$BIN/coogle
FAKE=$BIN/examples/fake_mcp
BENCH=$BIN/examples/mcp_bench
TOKIO_RELAY=$BIN/examples/tokio_relay

WORK=$(mktemp -d /tmp/coogle-bench.XXXXXX)
DAEMONS=()
stop_daemons() {
  # Daemons a shim started on demand are not in DAEMONS: stop every one by its socket.
  for cfg in "$WORK"/*/config.json; do
    [[ -e $cfg ]] || continue
    d=$(dirname "$cfg")
    COOGLE_CONFIG=$cfg COOGLE_SOCKET=$d/s.sock "$COOGLE" stop >/dev/null 2>&1 || true
  done
  for pid in "${DAEMONS[@]}"; do kill "$pid" 2>/dev/null || true; done
  DAEMONS=()
}
cleanup() {
  stop_daemons
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
if [[ ${PGO:-0} == 1 ]]; then
  # The PGO build beside the same shim: `coogle mcp` runs the coogle-mcp next to it.
  pgo_coogle=$(scripts/pgo)
  mkdir -p "$WORK/pgo-bin"
  cp "$pgo_coogle" "$WORK/pgo-bin/coogle"
  cp "$BIN/coogle-mcp" "$WORK/pgo-bin/coogle-mcp"
  COOGLE=$WORK/pgo-bin/coogle
  echo "coogle under test: the PGO build (scripts/pgo)" >&2
fi

export HOME=$WORK/home XDG_CONFIG_HOME=$WORK/home/.config XDG_STATE_HOME=$WORK/home/.local/state
export UV_CACHE_DIR=${UV_CACHE_DIR:-${REAL_HOME:-/root}/.cache/uv}
# The era and pacing of mcp_bench's sessions are the bench's to set, way by way.
unset XDG_RUNTIME_DIR CLAUDE_CODE_SESSION_ID MCP_BENCH_ERA MCP_BENCH_GAP_US
mkdir -p "$HOME"

# start_daemon NAME CONFIG_JSON: a daemon on its own socket; prints nothing.
start_daemon() {
  local name=$1 config=$2
  mkdir -p "$WORK/$name"
  printf '%s\n' "$config" > "$WORK/$name/config.json"
  # shellcheck disable=SC2086
  COOGLE_CONFIG=$WORK/$name/config.json COOGLE_SOCKET=$WORK/$name/s.sock \
    ${DAEMON_PREFIX:-} "$COOGLE" serve >/dev/null 2>&1 &
  DAEMONS+=($!)
  # Ready means every upstream answered (`status` exits 0); uvx may take most of a minute cold.
  for _ in $(seq 1 1200); do
    if COOGLE_CONFIG=$WORK/$name/config.json COOGLE_SOCKET=$WORK/$name/s.sock \
        "$COOGLE" status --json >/dev/null 2>&1; then return 0; fi
    sleep 0.05
  done
  echo "daemon $name did not become ready" >&2
  COOGLE_CONFIG=$WORK/$name/config.json COOGLE_SOCKET=$WORK/$name/s.sock "$COOGLE" status >&2 || true
  exit 1
}

# shim NAME: the command line of a `coogle mcp` bound to that daemon.
shim() { echo env "COOGLE_CONFIG=$WORK/$1/config.json" "COOGLE_SOCKET=$WORK/$1/s.sock" "$COOGLE" mcp; }
status_json() { COOGLE_CONFIG=$WORK/$1/config.json COOGLE_SOCKET=$WORK/$1/s.sock "$COOGLE" status --json; }

# child_of NAME: the pid of that daemon's (first) child, started first if it is idle (children
# start on demand, and one nobody used for idleStopMs has stopped).
child_of() {
  python3 - "$WORK/$1/s.sock" <<'PY2'
import json, socket, sys
s = socket.socket(socket.AF_UNIX); s.settimeout(120); s.connect(sys.argv[1])
s.sendall(b'{"id":1,"method":"start_child","params":null}\n')
print(json.loads(s.makefile("rb").readline())["result"]["pid"])
PY2
}

server_json() { # command [args...] → {"command":…,"args":[…]}
  python3 -c 'import json,sys; print(json.dumps({"command": sys.argv[1], "args": sys.argv[2:], "credentials": {"source": "none"}}))' "$@"
}

start_daemon fake "{\"servers\":{\"google\":$(server_json "$FAKE")}}"
# BASE=/path/to/an/older/coogle measures that build side by side in this run (same fake child):
# how a change moved the figures, without two runs' noise between them.
if [[ -n ${BASE:-} ]]; then
  mkdir -p "$WORK/base"
  printf '%s\n' "{\"servers\":{\"google\":$(server_json "$FAKE")}}" > "$WORK/base/config.json"
  COOGLE_CONFIG=$WORK/base/config.json COOGLE_SOCKET=$WORK/base/s.sock "$BASE" serve >/dev/null 2>&1 &
  DAEMONS+=($!)
  for _ in $(seq 1 200); do
    COOGLE_CONFIG=$WORK/base/config.json COOGLE_SOCKET=$WORK/base/s.sock "$BASE" status >/dev/null 2>&1 && break
    sleep 0.05
  done
  BASE_VERSION=$("$BASE" --version | awk '{print $2, $3}' | tr -d '(')
fi
base_shim() { echo env "COOGLE_CONFIG=$WORK/base/config.json" "COOGLE_SOCKET=$WORK/base/s.sock" "$BASE" mcp; }
start_daemon fake8 "{\"servers\":{\"google\":$(server_json "$FAKE" | python3 -c 'import json,sys; d=json.load(sys.stdin); d["maxConcurrent"]=8; print(json.dumps(d))')}}"

EVERYTHING=$(command -v mcp-server-everything || true)
if [[ -n $EVERYTHING ]]; then
  start_daemon everything "{\"servers\":{\"everything\":$(server_json "$EVERYTHING" stdio)}}"
fi
UVX=$(command -v uvx || true)
WS_ARGS=(workspace-mcp --tool-tier core)
if [[ -n $UVX ]]; then
  export GOOGLE_OAUTH_CLIENT_ID=bench-dummy.apps.googleusercontent.com GOOGLE_OAUTH_CLIENT_SECRET=bench-dummy
  start_daemon workspace "{\"mcp\":$(server_json "$UVX" "${WS_ARGS[@]}"),\"credentials\":{\"source\":\"env\"}}"
fi

# The peer: rmcp-mux 0.3.1 (crates.io), the strongest multiplexer that runs here: one daemon
# per server on a Unix socket, one `rmcp-mux-proxy` per session, the same fake child.
# Install it with `cargo install rmcp-mux --version '~0.3' --no-default-features --features cli`.
PEER=""
if [[ ${SKIP_PEER:-0} != 1 ]] && command -v rmcp-mux >/dev/null && command -v rmcp-mux-proxy >/dev/null; then
  PEER_SOCKET=$WORK/mux.sock
  rmcp-mux --socket "$PEER_SOCKET" --cmd "$FAKE" --lazy-start false --max-active-clients 16 \
    --log-level warn >"$WORK/peer.log" 2>&1 &
  DAEMONS+=($!)
  PEER_PID=$!
  for _ in $(seq 1 100); do [[ -S $PEER_SOCKET ]] && break; sleep 0.05; done
  PEER="rmcp-mux-proxy --socket $PEER_SOCKET"
  PEER_VERSION=$(rmcp-mux --version 2>/dev/null | awk '{print $2}')
else
  echo "rmcp-mux is not installed; the peer comparison is skipped" >&2
fi

# The floor: a two-hop relay with no multiplexing, the least any out-of-process sharing can
# cost. One `socat` per session (as the shim) connects to a listening `socat` (as the daemon)
# that forks a fresh fake child per connection; nothing reads the messages. Measured in this
# run, so coogle's per-call cost is read against what two process hops cost on this machine.
FLOOR=""
NO_FLOOR=""
if [[ ${SKIP_FLOOR:-0} != 1 ]] && command -v socat >/dev/null; then
  FLOOR_SOCKET=$WORK/floor.sock
  socat "UNIX-LISTEN:$FLOOR_SOCKET,fork" "EXEC:$FAKE" 2>"$WORK/floor.log" &
  DAEMONS+=($!)
  for _ in $(seq 1 100); do [[ -S $FLOOR_SOCKET ]] && break; sleep 0.05; done
  FLOOR="socat STDIO UNIX-CONNECT:$FLOOR_SOCKET"
  # socat's EXEC talks to its child over a socketpair; coogle's daemon uses pipes, as a
  # client does. The same relay over pipes (a few µs quicker here) is the stricter floor.
  FLOOR_PIPES_SOCKET=$WORK/floor-pipes.sock
  socat "UNIX-LISTEN:$FLOOR_PIPES_SOCKET,fork" "EXEC:$FAKE,pipes" 2>"$WORK/floor-pipes.log" &
  DAEMONS+=($!)
  for _ in $(seq 1 100); do [[ -S $FLOOR_PIPES_SOCKET ]] && break; sleep 0.05; done
  FLOOR_PIPES="socat STDIO UNIX-CONNECT:$FLOOR_PIPES_SOCKET"
  # The same listener, reached by the bench on its socket (`raw:`): one hop, beside coogle's
  # daemon alone (the bench on the daemon's socket), so the daemon's hop is read against a
  # socat hop and the shim's against the other.
  # And the daemon's shape with none of its work (examples/tokio_relay.rs: the runtime, a
  # reader task each way, a channel, one writing task): what is left between it and the
  # daemon alone is coogle's own work per line.
  TOKIO_SOCKET=$WORK/tokio.sock
  "$TOKIO_RELAY" "$TOKIO_SOCKET" -- "$FAKE" 2>"$WORK/tokio.log" &
  DAEMONS+=($!)
  for _ in $(seq 1 100); do [[ -S $TOKIO_SOCKET ]] && break; sleep 0.05; done
elif [[ ${SKIP_FLOOR:-0} == 1 ]]; then
  NO_FLOOR="SKIP_FLOOR=1 was set"
  echo "$NO_FLOOR; the floor row (a two-hop relay with no multiplexing) is skipped" >&2
else
  NO_FLOOR="socat is not installed"
  echo "$NO_FLOOR (apt-get install socat); the floor row (a two-hop relay with no multiplexing) is skipped" >&2
fi

# The same ways again with every process on one CPU (ONE_CPU=0 skips it). On a VM, a relay's
# p50 is mostly what it costs to wake a process on the other, idle, vCPU: unpinned runs land
# anywhere from 40 to 120 µs for the same relay. On one CPU nothing waits for another CPU to
# wake, so what is left is each hop's own work, and runs repeat to the microsecond.
ONE_CPU_PIN=""
if [[ ${ONE_CPU:-1} != 0 && -n $FLOOR ]] && command -v taskset >/dev/null; then
  ONE_CPU_PIN="taskset -c 0"
  DAEMON_PREFIX=$ONE_CPU_PIN start_daemon fake1cpu "{\"servers\":{\"google\":$(server_json "$FAKE")}}"
  FLOOR1_SOCKET=$WORK/floor1.sock
  $ONE_CPU_PIN socat "UNIX-LISTEN:$FLOOR1_SOCKET,fork" "EXEC:$FAKE" 2>"$WORK/floor1.log" &
  DAEMONS+=($!)
  for _ in $(seq 1 100); do [[ -S $FLOOR1_SOCKET ]] && break; sleep 0.05; done
  FLOOR1_PIPES_SOCKET=$WORK/floor1-pipes.sock
  $ONE_CPU_PIN socat "UNIX-LISTEN:$FLOOR1_PIPES_SOCKET,fork" "EXEC:$FAKE,pipes" 2>"$WORK/floor1-pipes.log" &
  DAEMONS+=($!)
  for _ in $(seq 1 100); do [[ -S $FLOOR1_PIPES_SOCKET ]] && break; sleep 0.05; done
  TOKIO1_SOCKET=$WORK/tokio1.sock
  $ONE_CPU_PIN "$TOKIO_RELAY" "$TOKIO1_SOCKET" -- "$FAKE" 2>"$WORK/tokio1.log" &
  DAEMONS+=($!)
  for _ in $(seq 1 100); do [[ -S $TOKIO1_SOCKET ]] && break; sleep 0.05; done
fi

# A fake child that takes seconds to start, for a cold daemon's session start (the tools cache
# is on disk from a first run, as it is after any earlier day's use).
SLOW_MS=${SLOW_MS:-3000}
slow_json=$(server_json "$FAKE" | python3 -c 'import json,sys; d=json.loads(sys.stdin.read()); d["env"]={"FAKE_MCP_START_DELAY_MS": sys.argv[1]}; print(json.dumps(d))' "$SLOW_MS")
mkdir -p "$WORK/slow"
printf '%s\n' "{\"servers\":{\"google\":$slow_json}}" > "$WORK/slow/config.json"
stop_daemon() { # NAME: stop it and wait until its socket is gone
  COOGLE_CONFIG=$WORK/$1/config.json COOGLE_SOCKET=$WORK/$1/s.sock "$COOGLE" stop >/dev/null 2>&1 || true
  for _ in $(seq 1 200); do [[ -S $WORK/$1/s.sock ]] || break; sleep 0.05; done
}

# RESULTS_OUT=FILE keeps the raw measurements (one JSON line each) after the run.
RESULTS=${RESULTS_OUT:-$WORK/results.jsonl}
: > "$RESULTS"
RUN=0 # which latency run a row belongs to: the report pairs the ways run by run
record() { # label json
  python3 -c 'import json,sys; d=json.loads(sys.argv[2]); d["label"]=sys.argv[1]; d["run"]=int(sys.argv[3]); print(json.dumps(d))' "$1" "$2" "$RUN" >> "$RESULTS"
}

# record_pair A B JSON: one run of `mcp_bench pair` (A's calls and B's in turn), recorded as
# "A@B" and "B@A": the report reads each pair's two rows against each other, run by run.
record_pair() {
  python3 -c '
import json, sys
a, b, d, run = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), int(sys.argv[4])
for label, side in ((a + "@" + b, "a"), (b + "@" + a, "b")):
    print(json.dumps(dict(d[side], calls=d["calls"], label=label, run=run)))' "$1" "$2" "$3" "$RUN" >> "$RESULTS"
}

# latency_way NAME: one run of one way, recorded under NAME.
latency_way() {
  # shellcheck disable=SC2046,SC2086
  case $1 in
    direct-fake) record "$1" "$("$BENCH" latency "$CALLS" -- "$FAKE")" ;;
    coogle-fake) record "$1" "$("$BENCH" latency "$CALLS" -- $(shim fake))" ;;
    floor-fake) record "$1" "$("$BENCH" latency "$CALLS" -- $FLOOR)" ;;
    floor-pipes-fake) record "$1" "$("$BENCH" latency "$CALLS" -- $FLOOR_PIPES)" ;;
    hop-fake) record "$1" "$("$BENCH" latency "$CALLS" -- "raw:$FLOOR_PIPES_SOCKET")" ;;
    tokio-fake) record "$1" "$("$BENCH" latency "$CALLS" -- "raw:$TOKIO_SOCKET")" ;;
    # The daemon alone (mcp_bench speaks to its socket, no shim): the shim's share is the rest.
    daemon-fake) record "$1" "$("$BENCH" latency "$CALLS" -- "unix:$WORK/fake/s.sock")" ;;
    direct-everything) record "$1" "$("$BENCH" latency "$CALLS" -- "$EVERYTHING" stdio)" ;;
    coogle-everything) record "$1" "$("$BENCH" latency "$CALLS" -- $(shim everything) --server everything)" ;;
    peer-fake) record "$1" "$("$BENCH" latency "$CALLS" -- $PEER)" ;;
    base-fake) record "$1" "$("$BENCH" latency "$CALLS" -- $(base_shim))" ;;
    direct-fake-1cpu) record "$1" "$($ONE_CPU_PIN "$BENCH" latency "$CALLS" -- "$FAKE")" ;;
    floor-fake-1cpu) record "$1" "$($ONE_CPU_PIN "$BENCH" latency "$CALLS" -- socat STDIO "UNIX-CONNECT:$FLOOR1_SOCKET")" ;;
    floor-pipes-fake-1cpu) record "$1" "$($ONE_CPU_PIN "$BENCH" latency "$CALLS" -- socat STDIO "UNIX-CONNECT:$FLOOR1_PIPES_SOCKET")" ;;
    hop-fake-1cpu) record "$1" "$($ONE_CPU_PIN "$BENCH" latency "$CALLS" -- "raw:$FLOOR1_PIPES_SOCKET")" ;;
    tokio-fake-1cpu) record "$1" "$($ONE_CPU_PIN "$BENCH" latency "$CALLS" -- "raw:$TOKIO1_SOCKET")" ;;
    coogle-fake-1cpu) record "$1" "$($ONE_CPU_PIN "$BENCH" latency "$CALLS" -- $(shim fake1cpu))" ;;
    daemon-fake-1cpu) record "$1" "$($ONE_CPU_PIN "$BENCH" latency "$CALLS" -- "unix:$WORK/fake1cpu/s.sock")" ;;
    # Two ways call by call in turn, in one process: what the machine does to one call it does
    # to the other's beside it, so the pair's difference is read without the minutes-long
    # quick and slow spells that move whole runs here by more than the goal's 5%.
    pair-coogle-floor) record_pair coogle-fake floor-fake "$("$BENCH" pair "$CALLS" -- $(shim fake) -- $FLOOR)" ;;
    pair-coogle-floor-pipes) record_pair coogle-fake floor-pipes-fake "$("$BENCH" pair "$CALLS" -- $(shim fake) -- $FLOOR_PIPES)" ;;
    pair-daemon-hop) record_pair daemon-fake hop-fake "$("$BENCH" pair "$CALLS" -- "unix:$WORK/fake/s.sock" -- "raw:$FLOOR_PIPES_SOCKET")" ;;
    pair-tokio-hop) record_pair tokio-fake hop-fake "$("$BENCH" pair "$CALLS" -- "raw:$TOKIO_SOCKET" -- "raw:$FLOOR_PIPES_SOCKET")" ;;
    pair-daemon-tokio) record_pair daemon-fake tokio-fake "$("$BENCH" pair "$CALLS" -- "unix:$WORK/fake/s.sock" -- "raw:$TOKIO_SOCKET")" ;;
    # The same in the era Claude Code 2.1.328 speaks: its probe, then the envelope on every
    # request. The fake child takes that era too, so nothing is translated on the way.
    pair-coogle-floor-cc) record_pair coogle-fake-cc floor-fake-cc "$(MCP_BENCH_ERA=2026-07-28 "$BENCH" pair "$CALLS" -- $(shim fake) -- $FLOOR)" ;;
    pair-coogle-floor-pipes-cc) record_pair coogle-fake-cc floor-pipes-fake-cc "$(MCP_BENCH_ERA=2026-07-28 "$BENCH" pair "$CALLS" -- $(shim fake) -- $FLOOR_PIPES)" ;;
    pair-daemon-hop-cc) record_pair daemon-fake-cc hop-fake-cc "$(MCP_BENCH_ERA=2026-07-28 "$BENCH" pair "$CALLS" -- "unix:$WORK/fake/s.sock" -- "raw:$FLOOR_PIPES_SOCKET")" ;;
    pair-coogle-floor-cc-1cpu) record_pair coogle-fake-cc-1cpu floor-fake-cc-1cpu "$(MCP_BENCH_ERA=2026-07-28 $ONE_CPU_PIN "$BENCH" pair "$CALLS" -- $(shim fake1cpu) -- socat STDIO "UNIX-CONNECT:$FLOOR1_SOCKET")" ;;
    pair-coogle-floor-pipes-cc-1cpu) record_pair coogle-fake-cc-1cpu floor-pipes-fake-cc-1cpu "$(MCP_BENCH_ERA=2026-07-28 $ONE_CPU_PIN "$BENCH" pair "$CALLS" -- $(shim fake1cpu) -- socat STDIO "UNIX-CONNECT:$FLOOR1_PIPES_SOCKET")" ;;
    pair-daemon-hop-cc-1cpu) record_pair daemon-fake-cc-1cpu hop-fake-cc-1cpu "$(MCP_BENCH_ERA=2026-07-28 $ONE_CPU_PIN "$BENCH" pair "$CALLS" -- "unix:$WORK/fake1cpu/s.sock" -- "raw:$FLOOR1_PIPES_SOCKET")" ;;
    # And with each call started from a quiet machine (MCP_BENCH_GAP_US: an untimed wait before
    # each), as an agent's calls come, seconds apart; work a way leaves after its answer then
    # falls on no one's call.
    pair-coogle-floor-cc-gap) record_pair coogle-fake-cc-gap floor-fake-cc-gap "$(MCP_BENCH_GAP_US=$GAP_US MCP_BENCH_ERA=2026-07-28 "$BENCH" pair "$CALLS" -- $(shim fake) -- $FLOOR)" ;;
    pair-coogle-floor-cc-gap-1cpu) record_pair coogle-fake-cc-gap-1cpu floor-fake-cc-gap-1cpu "$(MCP_BENCH_GAP_US=$GAP_US MCP_BENCH_ERA=2026-07-28 $ONE_CPU_PIN "$BENCH" pair "$CALLS" -- $(shim fake1cpu) -- socat STDIO "UNIX-CONNECT:$FLOOR1_SOCKET")" ;;
    pair-coogle-base) record_pair coogle-fake base-fake "$("$BENCH" pair "$CALLS" -- $(shim fake) -- $(base_shim))" ;;
    pair-coogle-floor-1cpu) record_pair coogle-fake-1cpu floor-fake-1cpu "$($ONE_CPU_PIN "$BENCH" pair "$CALLS" -- $(shim fake1cpu) -- socat STDIO "UNIX-CONNECT:$FLOOR1_SOCKET")" ;;
    pair-coogle-floor-pipes-1cpu) record_pair coogle-fake-1cpu floor-pipes-fake-1cpu "$($ONE_CPU_PIN "$BENCH" pair "$CALLS" -- $(shim fake1cpu) -- socat STDIO "UNIX-CONNECT:$FLOOR1_PIPES_SOCKET")" ;;
    pair-daemon-hop-1cpu) record_pair daemon-fake-1cpu hop-fake-1cpu "$($ONE_CPU_PIN "$BENCH" pair "$CALLS" -- "unix:$WORK/fake1cpu/s.sock" -- "raw:$FLOOR1_PIPES_SOCKET")" ;;
    pair-tokio-hop-1cpu) record_pair tokio-fake-1cpu hop-fake-1cpu "$($ONE_CPU_PIN "$BENCH" pair "$CALLS" -- "raw:$TOKIO1_SOCKET" -- "raw:$FLOOR1_PIPES_SOCKET")" ;;
    pair-daemon-tokio-1cpu) record_pair daemon-fake-1cpu tokio-fake-1cpu "$($ONE_CPU_PIN "$BENCH" pair "$CALLS" -- "unix:$WORK/fake1cpu/s.sock" -- "raw:$TOKIO1_SOCKET")" ;;
  esac
}
LATENCY_WAYS=(direct-fake coogle-fake daemon-fake)
[[ -n $FLOOR ]] && LATENCY_WAYS+=(floor-fake floor-pipes-fake hop-fake tokio-fake
  pair-coogle-floor pair-coogle-floor-pipes pair-daemon-hop pair-tokio-hop pair-daemon-tokio
  pair-coogle-floor-cc pair-coogle-floor-pipes-cc pair-daemon-hop-cc pair-coogle-floor-cc-gap)
[[ -n $EVERYTHING ]] && LATENCY_WAYS+=(direct-everything coogle-everything)
[[ -n $PEER ]] && LATENCY_WAYS+=(peer-fake)
[[ -n ${BASE:-} ]] && LATENCY_WAYS+=(base-fake pair-coogle-base)
[[ -n $ONE_CPU_PIN ]] && LATENCY_WAYS+=(direct-fake-1cpu floor-fake-1cpu floor-pipes-fake-1cpu hop-fake-1cpu tokio-fake-1cpu coogle-fake-1cpu daemon-fake-1cpu
  pair-coogle-floor-1cpu pair-coogle-floor-pipes-1cpu pair-daemon-hop-1cpu pair-tokio-hop-1cpu pair-daemon-tokio-1cpu
  pair-coogle-floor-cc-1cpu pair-coogle-floor-pipes-cc-1cpu pair-daemon-hop-cc-1cpu pair-coogle-floor-cc-gap-1cpu)
echo "latency: $RUNS runs × $CALLS sequential calls each, ${#LATENCY_WAYS[@]} ways" >&2
# Each run starts one way further along the list, so no way always follows the same one (the
# report pairs the ways run by run; a fixed order would pair each with the same neighbour).
for RUN in $(seq 1 "$RUNS"); do
  for k in $(seq 0 $(( ${#LATENCY_WAYS[@]} - 1 ))); do
    latency_way "${LATENCY_WAYS[$(( (RUN + k) % ${#LATENCY_WAYS[@]} ))]}"
  done
done
RUN=0

# As a client sees it, the way issue 22 measured its goal: the official Python SDK (`mcp`)
# making serial tools/calls of server-everything's echo, directly, through the floor (both
# kinds) and through coogle, interleaved. Every way starts from a fresh node (coogle's child is
# restarted before each of its runs: a child that lives on would be JIT-warm where the others'
# are not, and read quicker for that alone), then SDK_WARMUP calls bring each to the same
# compiled state before timing. SDK=0 skips it.
SDK_LOG=${SDK_LOG:-/tmp/coogle-bench-sdk.log}
if [[ ${SDK:-1} == 0 ]]; then
  :
elif [[ -z $EVERYTHING || -z $FLOOR ]]; then
  echo "the Python SDK's view needs server-everything and socat; skipped" >&2
elif ! python3 -c 'import mcp, sys; from mcp import Client; from importlib.metadata import version; sys.exit(version("mcp").split(".")[0] != "2")' 2>/dev/null; then
  echo "the Python SDK's view needs the mcp 2.x SDK (pip install mcp==2.3.0); skipped" >&2
else
  SDK_CALLS=${SDK_CALLS:-1000}
  SDK_WARMUP=${SDK_WARMUP:-3000}
  for kind in socketpair pipes; do
    opt=""; [[ $kind == pipes ]] && opt=",pipes"
    socat "UNIX-LISTEN:$WORK/floor-everything-$kind.sock,fork" "EXEC:$EVERYTHING stdio$opt" 2>"$WORK/floor-everything-$kind.log" &
    DAEMONS+=($!)
    for _ in $(seq 1 100); do [[ -S $WORK/floor-everything-$kind.sock ]] && break; sleep 0.05; done
  done
  : > "$SDK_LOG"
  # sdk LABEL COMMAND...: one run recorded, or (a failure, a hang) said with the log's tail and
  # left out; the bench goes on.
  sdk() {
    local label=$1 out; shift
    if out=$(timeout 600 python3 scripts/sdk_latency.py "$SDK_CALLS" --warmup "$SDK_WARMUP" -- "$@" 2>>"$SDK_LOG"); then
      record "$label" "$out"
    else
      echo "$label failed; the end of $SDK_LOG:" >&2
      tail -5 "$SDK_LOG" >&2
    fi
  }
  sdk_way() {
    case $1 in
      direct) sdk sdk-direct "$EVERYTHING" stdio ;;
      floor) sdk sdk-floor socat STDIO "UNIX-CONNECT:$WORK/floor-everything-socketpair.sock" ;;
      floor-pipes) sdk sdk-floor-pipes socat STDIO "UNIX-CONNECT:$WORK/floor-everything-pipes.sock" ;;
      coogle)
        local restarted now
        restarted=$(COOGLE_CONFIG=$WORK/everything/config.json COOGLE_SOCKET=$WORK/everything/s.sock \
          "$COOGLE" restart --server everything | sed -n 's/.*(pid \([0-9]*\)).*/\1/p')
        # shellcheck disable=SC2046
        sdk sdk-coogle $(shim everything) --server everything
        now=$(status_json everything | python3 -c 'import json,sys; print(json.load(sys.stdin)["upstreams"][0]["pid"])')
        [[ $restarted == "$now" ]] || echo "warning: coogle's run may have met a child other than the one restarted ($restarted, now $now)" >&2 ;;
    esac
  }
  echo "as a client sees it: the Python SDK, $SDK_RUNS runs × $SDK_CALLS calls of server-everything" >&2
  # Each run starts with the next way, so no way is always first or always last.
  ways=(direct floor floor-pipes coogle)
  for RUN in $(seq 1 "$SDK_RUNS"); do
    for k in 0 1 2 3; do
      sdk_way "${ways[$(( (RUN + k) % 4 ))]}"
    done
  done
  RUN=0
fi

echo "new session → tools/list" >&2
# shellcheck disable=SC2046
record startup-coogle-fake "$("$BENCH" startup 20 -- $(shim fake))"
record startup-direct-fake "$("$BENCH" startup 20 -- "$FAKE")"
if [[ -n ${BASE:-} ]]; then
  # shellcheck disable=SC2046
  record startup-base-fake "$("$BENCH" startup 20 -- $(base_shim))"
fi
if [[ -n $PEER ]]; then
  # shellcheck disable=SC2086
  record startup-peer-fake "$("$BENCH" startup 20 -- $PEER)"
  record rss-peer-server "$("$BENCH" rss "$PEER_PID" -- x)"
fi

echo "Claude Code-style start (server/discover probe, then tools/list), warm and cold" >&2
# shellcheck disable=SC2046
record cc-warm-coogle-fake "$("$BENCH" claude-start 20 -- $(shim fake))"
record cc-direct-fake "$("$BENCH" claude-start 20 -- "$FAKE")"
if [[ -n $PEER ]]; then
  # shellcheck disable=SC2086
  record cc-warm-peer-fake "$("$BENCH" claude-start 20 -- $PEER)"
fi
# Cold: no daemon, a child that takes SLOW_MS to start, the cache on disk from a first run.
# shellcheck disable=SC2046
"$BENCH" claude-start 1 -- $(shim slow) >/dev/null
for _ in $(seq 1 "$RUNS"); do
  stop_daemon slow
  # shellcheck disable=SC2046
  record cc-cold-coogle-slow "$("$BENCH" claude-start 1 -- $(shim slow))"
done
stop_daemon slow
record cc-direct-slow "$("$BENCH" claude-start 1 -- env FAKE_MCP_START_DELAY_MS="$SLOW_MS" "$FAKE")"
if [[ -n $UVX ]]; then
  # shellcheck disable=SC2046
  record startup-coogle-workspace "$("$BENCH" startup 10 -- $(shim workspace))"
  record startup-direct-workspace "$("$BENCH" startup 3 -- "$UVX" "${WS_ARGS[@]}")"
  # shellcheck disable=SC2046
  record cc-warm-coogle-workspace "$("$BENCH" claude-start 10 -- $(shim workspace))"
  record cc-direct-workspace "$("$BENCH" claude-start 3 -- "$UVX" "${WS_ARGS[@]}")"
  for _ in $(seq 1 3); do
    stop_daemon workspace
    # shellcheck disable=SC2046
    record cc-cold-coogle-workspace "$("$BENCH" claude-start 1 -- $(shim workspace))"
  done
  start_daemon workspace "$(cat "$WORK/workspace/config.json")"
fi

echo "throughput: 8 sessions × $TP_CALLS calls" >&2
for _ in $(seq 1 "$RUNS"); do
  # shellcheck disable=SC2046
  record tp-mc1 "$("$BENCH" throughput 8 "$TP_CALLS" -- $(shim fake))"
  # shellcheck disable=SC2046
  record tp-mc8 "$("$BENCH" throughput 8 "$TP_CALLS" -- $(shim fake8))"
  if [[ -n ${BASE:-} ]]; then
    # shellcheck disable=SC2046
    record tp-base "$("$BENCH" throughput 8 "$TP_CALLS" -- $(base_shim))"
  fi
done
if [[ -n ${BASE:-} ]]; then
  base_daemon=$(COOGLE_CONFIG=$WORK/base/config.json COOGLE_SOCKET=$WORK/base/s.sock "$BASE" status --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["daemon"]["pid"])')
  record rss-daemon-base "$("$BENCH" rss "$base_daemon" -- x)"
fi

daemon_pid=$(status_json fake | python3 -c 'import json,sys; print(json.load(sys.stdin)["daemon"]["pid"])')
child_pid=$(child_of fake)
record rss-daemon-fake "$("$BENCH" rss "$daemon_pid" -- x)"
record rss-child-fake "$("$BENCH" rss "$child_pid" -- x)"
if [[ -n $UVX ]]; then
  ws_daemon=$(status_json workspace | python3 -c 'import json,sys; print(json.load(sys.stdin)["daemon"]["pid"])')
  record rss-daemon-workspace "$("$BENCH" rss "$ws_daemon" -- x)"
  # The child is uvx; the Python process under it is what holds the memory: sum the group.
  ws_child=$(child_of workspace)
  group_kib=$(python3 - "$ws_child" <<'PY2'
import os, sys
pgid = int(sys.argv[1]); total = 0
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        stat = open(f"/proc/{pid}/stat").read()
        if int(stat.rsplit(")", 1)[1].split()[2]) != pgid: continue
        total += next(int(l.split()[1]) for l in open(f"/proc/{pid}/status") if l.startswith("VmRSS:"))
    except (OSError, StopIteration, ValueError):
        pass
print(total)
PY2
)
  record rss-child-workspace "{\"rss_kib\": $group_kib}"
fi

# Memory with 1, 4 and 10 sessions, measured: the sessions' processes plus the shared part
# (daemon and child group), summed as PSS so pages the processes share are counted once.
group_pids() { # every process in the process group led by $1
  python3 - "$1" <<'PY2'
import os, sys
pgid = int(sys.argv[1])
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        if int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[2]) == pgid: print(pid)
    except (OSError, ValueError, IndexError):
        pass
PY2
}
for n in 1 4 10; do
  fake_daemon=$(status_json fake | python3 -c 'import json,sys; print(json.load(sys.stdin)["daemon"]["pid"])')
  fake_child=$(child_of fake)
  # shellcheck disable=SC2046
  record "mem-coogle-fake-$n" "$("$BENCH" memory "$n" "$fake_daemon" "$fake_child" -- $(shim fake))"
  record "mem-direct-fake-$n" "$("$BENCH" memory "$n" -- "$FAKE")"
  if [[ -n $UVX ]]; then
    ws_daemon=$(status_json workspace | python3 -c 'import json,sys; print(json.load(sys.stdin)["daemon"]["pid"])')
    ws_child=$(child_of workspace)
    # shellcheck disable=SC2046
    record "mem-coogle-ws-$n" "$("$BENCH" memory "$n" "$ws_daemon" $(group_pids "$ws_child") -- $(shim workspace))"
    record "mem-direct-ws-$n" "$("$BENCH" memory "$n" -- "$UVX" "${WS_ARGS[@]}")"
  fi
  if [[ -n ${BASE:-} ]]; then
    base_daemon=$(COOGLE_CONFIG=$WORK/base/config.json COOGLE_SOCKET=$WORK/base/s.sock "$BASE" status --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["daemon"]["pid"])')
    base_child=$(child_of base)
    # shellcheck disable=SC2046
    record "mem-base-fake-$n" "$("$BENCH" memory "$n" "$base_daemon" "$base_child" -- $(base_shim))"
  fi
  if [[ -n $PEER ]]; then
    # shellcheck disable=SC2046,SC2086
    record "mem-peer-fake-$n" "$("$BENCH" memory "$n" "$PEER_PID" $(pgrep -P "$PEER_PID") -- $PEER)"
  fi
done

# Which build the figures are of: the plain one (`cargo install`) and the PGO one (every release
# archive) differ per call by more than the goal's 5%.
COOGLE_VERSION=$("$COOGLE" --version)
COOGLE_VERSION=$COOGLE_VERSION GAP_US=$GAP_US NO_FLOOR=$NO_FLOOR SLOW_MS=$SLOW_MS PEER_VERSION=${PEER_VERSION:-} BASE_VERSION=${BASE_VERSION:-} python3 scripts/bench_report.py "$RESULTS" "$RUNS" "$CALLS" "$TP_CALLS"

# The headline of sharing every stdio server: SESSIONS sessions × the six real servers of the
# issue (those installed), direct and through one daemon. FLEET=0 skips it.
if [[ ${FLEET:-1} != 0 ]]; then
  echo "fleet: ${SESSIONS:-5} sessions × real servers, direct and through coogle" >&2
  # As on a user's machine, the fleet's daemon is the only coogle running: the earlier parts'
  # daemons would map the same code and take their shares of its pages' PSS, making "sessions
  # gone" read about 5 MiB less than it is.
  stop_daemons
  mkdir -p "$WORK/fleet"
  python3 scripts/fleet.py "$COOGLE" "$WORK/fleet" "${SESSIONS:-5}" > "$WORK/fleet.jsonl"
  python3 - "$WORK/fleet.jsonl" <<'PY'
import json, sys
rows = {r["phase"]: r for r in map(json.loads, open(sys.argv[1]))}
s = rows["servers"]
print(f"\n{s['sessions']} sessions × {len(s['names'])} servers ({', '.join(s['names'])}), each session started as Claude Code starts its servers (all at once; probe → tools/list):\n")
print("| | processes | PSS, all processes | session start, median (max) |")
print("| --- | ---: | ---: | ---: |")
def row(label, r):
    start = f"{r['start_median_ms']/1000:.2f} s ({r['start_max_ms']/1000:.2f} s)" if "start_median_ms" in r else "–"
    print(f"| {label} | {r['processes']} | {r['pss_mib']:.0f} MiB | {start} |")
if "direct" in rows:
    row("direct: every session runs its own copy of each", rows["direct"])
c = rows["coogle-cold"]
row("coogle, sessions started against an idle daemon (public tool lists from the cache; a server whose list is private starts its child)", c)
b = rows["coogle-busy"]
row(f"coogle, the same sessions with every server's child running (shims {b['shim_pss_mib']:.0f} MiB)", b)
if "coogle-parked" in rows:
    k = rows["coogle-parked"]
    row(f"coogle, the same sessions all still open after idleStopMs of quiet: children parked (shims {k['shim_pss_mib']:.0f} MiB)", k)
row("coogle, sessions gone, children idle-stopped", rows["coogle-after"])
if "coogle-parked" in rows:
    k, g = rows["coogle-parked"]["pss_mib"], rows["coogle-after"]["pss_mib"]
    print(f"\nGoal: parked with every session open within 2× sessions gone: {k:.0f} MiB against {g:.0f} MiB, {k / g:.1f}× ({'met' if k <= 2 * g else 'not met'}).")
firsts = [json.loads(l) for l in open(sys.argv[1]) if '"first-call"' in l]
if firsts:
    print(f"\nThe first call after parking (a session open, its child parked; the child starts again) next to the same server started cold directly (spawn → initialize → the same call), medians of {firsts[0].get('rounds', 3)} rounds; the two take turns going first (the second starts warmer), and the difference is the mean of each order's median difference:\n")
    print("| server (tool) | first call after parking | cold direct start | difference | goal ≤ cold + 50 ms |")
    print("| --- | ---: | ---: | ---: | --- |")
    for f in firsts:
        d = f.get("difference_ms", f["parked_ms"] - f["cold_ms"])
        print(f"| {f['server']} (`{f['tool']}`) | {f['parked_ms']:.0f} ms | {f['cold_ms']:.0f} ms | {d:+.0f} ms | {'met' if d <= 50 else 'not met'} |")
i = rows["coogle-idle"]
print(f"\nIdle machine: the daemon with {len(s['names'])} servers configured and none running: {i['daemon_rss_mib']:.1f} MiB RSS, {i['processes']} process(es).")
PY
fi
