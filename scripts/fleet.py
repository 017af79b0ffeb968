#!/usr/bin/env python3
"""The headline of "share every stdio server": M sessions × N real servers, direct vs coogle.

    scripts/fleet.py COOGLE_BIN WORK_DIR [SESSIONS]

Called by scripts/bench.sh (FLEET=1), which has already built coogle. Each session starts its
servers the way Claude Code does (a `server/discover` probe, `initialize` on an error, then
`tools/list`), all of a session's servers at once; a session has started when its last server
has answered `tools/list`. Memory is PSS summed over every process involved (pages shared
between processes are counted once), read from /proc/PID/smaps_rollup.

Phases, one JSON line each on stdout:
  direct        each session runs its own copy of every server
  coogle-idle   the daemon with every server configured and none running (an idle machine)
  coogle-cold   sessions start against that idle daemon (answers from the tools cache)
  coogle-busy   the same sessions after every server has been asked for (children running)
  coogle-parked the same sessions, all still open, after idleStopMs of quiet: children parked
  first-call    per server with a harmless tool: a call on an open session whose child is
                parked (the child starts again), next to the same server started cold
                directly (spawn → initialize → the same call), medians of FIRST_CALL_ROUNDS
                (env, default 4); the two take turns going first, and the difference is the
                mean of each order's median difference
  coogle-after  the sessions have gone and the children have idle-stopped
idleStopMs is IDLE_STOP_MS (10 s) here, not the default, so the run stays short; it must be
longer than the 5 s the busy phase lets the children settle, or they park before it measures.
A server whose tool list is private (`cacheScope: "private"`, the Python SDK's default) is
never answered from the cache for another session: a session started against an idle daemon
starts that child and waits for it (the cold phase has those children running).
Servers that are not installed are left out (and named on stderr).
"""
import json, os, select, shutil, signal, socket, statistics, subprocess, sys, threading, time

PROBE_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "claude-code", "version": "2.1.328"},
    "io.modelcontextprotocol/clientCapabilities": {
        "roots": {"listChanged": True}, "elicitation": {"form": {}, "url": {}}},
}
IDLE_STOP_MS = 10000
FIRST_CALL_ROUNDS = int(os.environ.get("FIRST_CALL_ROUNDS", "4"))
# A call each server answers without network or sign-in, for the first call after parking.
HARMLESS = {
    "everything": ("echo", {"message": "fleet"}),
    "filesystem": ("list_allowed_directories", {}),
    "memory": ("read_graph", {}),
    "time": ("get_current_time", {"timezone": "UTC"}),
}


def servers(work):
    """The six servers of the issue, as {name: {command, args, env}}, those installed."""
    project = os.path.join(work, "project")
    os.makedirs(project, exist_ok=True)
    found, missing = {}, []
    def add(name, program, args=(), env=None):
        path = shutil.which(program)
        if path is None:
            missing.append(name)
            return
        found[name] = {"command": path, "args": list(args), "env": env or {}}
    add("everything", "mcp-server-everything", ["stdio"])
    add("filesystem", "mcp-server-filesystem", [project])
    add("memory", "mcp-server-memory", env={"MEMORY_FILE_PATH": os.path.join(work, "memory.jsonl")})
    add("time", "mcp-server-time")
    add("fetch", "mcp-server-fetch")
    add("workspace", "uvx", ["workspace-mcp==2.2.1", "--tool-tier", "core"],
        env={"GOOGLE_OAUTH_CLIENT_ID": "fleet-dummy.apps.googleusercontent.com",
             "GOOGLE_OAUTH_CLIENT_SECRET": "fleet-dummy"})
    if missing:
        print(f"fleet: not installed, left out: {', '.join(missing)}", file=sys.stderr)
    return found, project


class Conn:
    """One stdio MCP connection, newline-delimited JSON-RPC."""

    def __init__(self, argv, env, cwd):
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, env=env, cwd=cwd,
                                     start_new_session=True)
        self.buf = b""
        # The era claude_start ended in: 2026-07-28 requests carry their _meta.
        self.modern = False
        self.next_id = 100

    def send(self, msg):
        self.proc.stdin.write((json.dumps(msg) + "\n").encode())
        self.proc.stdin.flush()

    def answer(self, id_, timeout):
        """The response to `id_`, skipping notifications and other traffic."""
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while True:
            while b"\n" in self.buf:
                line, self.buf = self.buf.split(b"\n", 1)
                try:
                    msg = json.loads(line)
                except ValueError:
                    continue
                if msg.get("id") == id_ and ("result" in msg or "error" in msg):
                    return msg
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise TimeoutError(f"no answer to {id_!r}")
            chunk = os.read(fd, 65536)
            if not chunk:
                raise EOFError(f"the server closed its stdout before answering {id_!r}")
            self.buf += chunk

    def claude_start(self, timeout=120):
        """Claude Code's start: the probe, `initialize` if it fails, then `tools/list`."""
        self.send({"jsonrpc": "2.0", "id": "server-discover-probe-1", "method": "server/discover",
                   "params": {"_meta": PROBE_META}})
        probe = self.answer("server-discover-probe-1", timeout)
        self.modern = "result" in probe
        if self.modern:
            self.send({"jsonrpc": "2.0", "id": 1, "method": "tools/list",
                       "params": {"_meta": PROBE_META}})
        else:
            self.send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {"roots": {}},
                "clientInfo": {"name": "claude-code", "version": "2.1.328"}}})
            self.answer(0, timeout)
            self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
            self.send({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}})
        tools = self.answer(1, timeout)
        if "result" not in tools:
            raise RuntimeError(f"tools/list failed: {tools}")
        return len(tools["result"]["tools"])

    def call(self, tool, arguments, timeout=120):
        """One tools/call in this connection's era; the seconds until it was answered."""
        self.next_id += 1
        params = {"name": tool, "arguments": arguments}
        if self.modern:
            params["_meta"] = PROBE_META
        t0 = time.monotonic()
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": "tools/call", "params": params})
        answer = self.answer(self.next_id, timeout)
        took = time.monotonic() - t0
        if "result" not in answer or answer["result"].get("isError"):
            raise RuntimeError(f"{tool} failed: {answer}")
        return took

    def close(self):
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except OSError:
            pass
        self.proc.wait()


def start_session(launches):
    """Start one session's servers at once; (seconds until the last answered, connections)."""
    conns, errors = [None] * len(launches), []
    t0 = time.monotonic()
    def one(i, argv, env, cwd):
        try:
            c = Conn(argv, env, cwd)
            conns[i] = c
            c.claude_start()
        except Exception as e:  # a server that fails is reported, not hidden
            errors.append(f"{argv[0]}: {e}")
    threads = [threading.Thread(target=one, args=(i, *l)) for i, l in enumerate(launches)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise RuntimeError("; ".join(errors))
    return time.monotonic() - t0, conns


def children_of():
    table = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            ppid = int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        table.setdefault(ppid, []).append(int(pid))
    return table


def tree(roots):
    """The roots and all their descendants."""
    table, seen, todo = children_of(), set(), list(roots)
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        todo.extend(table.get(pid, []))
    return seen


def pss_kib(pids):
    total = 0
    for pid in pids:
        try:
            for line in open(f"/proc/{pid}/smaps_rollup"):
                if line.startswith("Pss:"):
                    total += int(line.split()[1])
        except OSError:
            pass
    return total


def rss_kib(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def settle(pids_fn, seconds=2.0):
    """Let started processes finish their imports before memory is read."""
    time.sleep(seconds)
    return pids_fn()


def report(phase, starts, pids, **extra):
    row = {"phase": phase, "processes": len(pids), "pss_mib": round(pss_kib(pids) / 1024, 1)}
    if starts:
        row["start_median_ms"] = round(statistics.median(starts) * 1000, 1)
        row["start_max_ms"] = round(max(starts) * 1000, 1)
    row.update(extra)
    print(json.dumps(row), flush=True)


def direct(found, project, sessions):
    env = dict(os.environ)
    starts, conns = [], []
    for _ in range(sessions):
        launches = [([s["command"], *s["args"]], {**env, **s["env"]}, project) for s in found.values()]
        took, cs = start_session(launches)
        starts.append(took)
        conns += cs
    pids = settle(lambda: tree(c.proc.pid for c in conns))
    report("direct", starts, pids)
    for c in conns:
        c.close()


def cold_call(server, project, tool, arguments):
    """The server started directly and cold: spawn, initialize, then the call; seconds."""
    t0 = time.monotonic()
    c = Conn([server["command"], *server["args"]], {**os.environ, **server["env"]}, project)
    try:
        c.send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "fleet", "version": "1"}}})
        c.answer(0, 120)
        c.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        c.call(tool, arguments)
        return time.monotonic() - t0
    finally:
        c.close()


def first_calls(coogle, work, found, project, conns):
    """A call on an open session whose child is parked, against a cold direct start. The two
    take turns going first: whichever starts second finds the server's files and the runtime's
    caches warm from the first (40-50 ms of a Node start here), so a fixed order would charge
    that to one side. The difference is the mean of the median difference in each order."""
    names = list(found)
    for name, (tool, arguments) in HARMLESS.items():
        if name not in found:
            continue
        parked, cold, diffs = [], [], ([], [])
        for round_ in range(FIRST_CALL_ROUNDS):
            wait_idle(coogle, work)
            # A different open session each round; conns are per session, in `names` order.
            session = round_ % (len(conns) // len(names))
            conn = conns[session * len(names) + names.index(name)]
            if round_ % 2 == 0:
                p = conn.call(tool, arguments)
                c = cold_call(found[name], project, tool, arguments)
            else:
                c = cold_call(found[name], project, tool, arguments)
                p = conn.call(tool, arguments)
            parked.append(p)
            cold.append(c)
            diffs[round_ % 2].append(p - c)
        balanced = statistics.mean(statistics.median(d) for d in diffs if d)
        print(json.dumps({"phase": "first-call", "server": name, "tool": tool,
                          "parked_ms": round(statistics.median(parked) * 1000, 1),
                          "cold_ms": round(statistics.median(cold) * 1000, 1),
                          "difference_ms": round(balanced * 1000, 1),
                          "rounds": FIRST_CALL_ROUNDS,
                          "parked_first_ms": [round(t * 1000) for t in diffs[0]],
                          "cold_first_ms": [round(t * 1000) for t in diffs[1]],
                          "parked_all_ms": [round(t * 1000) for t in parked],
                          "cold_all_ms": [round(t * 1000) for t in cold]}), flush=True)


def daemon_env(work):
    return {**os.environ, "COOGLE_CONFIG": os.path.join(work, "config.json"),
            "COOGLE_SOCKET": os.path.join(work, "s.sock")}


def control(coogle, work, *args):
    return subprocess.run([coogle, *args], env=daemon_env(work), capture_output=True, text=True)


def start_children(work, names):
    """Ask for every server's child, as a first uncached call would, and wait for them."""
    errors = []
    def one(name):
        try:
            s = socket.socket(socket.AF_UNIX)
            s.settimeout(120)
            s.connect(os.path.join(work, "s.sock"))
            s.sendall((json.dumps({"id": 1, "method": "start_child", "params": {"server": name}}) + "\n").encode())
            answer = s.makefile("rb").readline()
            s.close()
            if not json.loads(answer).get("ok"):
                errors.append(f"{name}: {answer!r}")
        except OSError as e:
            errors.append(f"{name}: {e}")
    threads = [threading.Thread(target=one, args=(n,)) for n in names]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise RuntimeError("start_child failed: " + "; ".join(errors))


def upstream_pids(coogle, work):
    status = json.loads(control(coogle, work, "status", "--json").stdout)
    return status["daemon"]["pid"], [u["pid"] for u in status["upstreams"] if u.get("pid")]


def wait_idle(coogle, work, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        _, children = upstream_pids(coogle, work)
        if not children:
            return
        time.sleep(0.2)
    raise RuntimeError("the children did not idle-stop")


def coogle_phases(coogle, work, found, project, sessions):
    # Every session here works in one project, where per-project sharing (filesystem's
    # default) also makes one child; `shared` says so outright, and lets `start_child` (which
    # addresses a server's unbound instance) wake the very child the sessions use.
    config = {"idleStopMs": IDLE_STOP_MS, "servers": {
        name: {**s, "credentials": {"source": "none"}, "sharing": "shared"}
        for name, s in found.items()}}
    with open(os.path.join(work, "config.json"), "w") as f:
        json.dump(config, f)
    daemon = subprocess.Popen([coogle, "serve"], env=daemon_env(work), stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
    # Closed before the daemon stops: a shim left open would start a new daemon (as it should).
    conns = []
    try:
        env = {**daemon_env(work), "CLAUDE_PROJECT_DIR": project}
        launch = lambda: [([coogle, "mcp", "--server", name], env, project) for name in found]
        # Earlier use: each server has run once, so its tools are in the cache on disk.
        _, cs = start_session(launch())
        start_children(work, found)
        for c in cs:
            c.close()
        wait_idle(coogle, work)
        daemon_pid, _ = upstream_pids(coogle, work)
        report("coogle-idle", [], tree([daemon_pid]), daemon_rss_mib=round(rss_kib(daemon_pid) / 1024, 1))
        starts = []
        for _ in range(sessions):
            took, cs = start_session(launch())
            starts.append(took)
            conns += cs
        shims = [c.proc.pid for c in conns]
        report("coogle-cold", starts, tree([daemon_pid, *shims]))
        start_children(work, found)
        pids = settle(lambda: tree([daemon_pid, *shims]), 5.0)
        report("coogle-busy", [], pids, shim_pss_mib=round(pss_kib(shims) / 1024, 1))
        # Quiet with every session still open: each child parks after idleStopMs.
        wait_idle(coogle, work)
        pids = settle(lambda: tree([daemon_pid, *shims]), 1.0)
        report("coogle-parked", [], pids, shim_pss_mib=round(pss_kib(shims) / 1024, 1))
        first_calls(coogle, work, found, project, conns)
        for c in conns:
            c.close()
        conns = []
        wait_idle(coogle, work)
        report("coogle-after", [], tree([daemon_pid]))
    finally:
        for c in conns:
            c.close()
        control(coogle, work, "stop")
        try:
            daemon.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(daemon.pid, signal.SIGKILL)


def main():
    coogle, work = sys.argv[1], sys.argv[2]
    sessions = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    found, project = servers(work)
    print(json.dumps({"phase": "servers", "names": list(found), "sessions": sessions}), flush=True)
    if os.environ.get("FLEET_SKIP_DIRECT") != "1":
        direct(found, project, sessions)
    coogle_phases(coogle, work, found, project, sessions)


if __name__ == "__main__":
    main()
