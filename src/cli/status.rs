//! The human form of the daemon's `status`. Moved here as it was: it still reads the status
//! JSON by key, until the typed `wire::Status` replaces these reads.

use serde_json::Value;

fn fmt_duration_ms(ms: u64) -> String {
    let s = ms / 1000;
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m{:02}s", s / 60, s % 60),
        3600..86400 => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
        _ => format!("{}d{:02}h", s / 86400, (s % 86400) / 3600),
    }
}

fn fmt_stats(stats: &Value) -> String {
    let n = |k: &str| stats.get(k).and_then(Value::as_u64).unwrap_or(0);
    let mut s = format!(
        "{} calls ({} ok, {} errors, {} timeouts, {} cancelled)",
        n("calls"),
        n("ok"),
        n("errors"),
        n("timeouts"),
        n("cancelled")
    );
    if let (Some(p50), Some(p99)) = (
        stats.get("p50Ms").and_then(Value::as_f64),
        stats.get("p99Ms").and_then(Value::as_f64),
    ) {
        s.push_str(&format!(" · p50 {p50:.1} ms · p99 {p99:.1} ms"));
    }
    s
}

/// The human form of `status`.
pub(super) fn render_status(status: &Value) -> String {
    let d = &status["daemon"];
    let mut out = format!(
        "coogle daemon {} · pid {} · up {} · {}\n",
        d["version"].as_str().unwrap_or("?"),
        d["pid"],
        fmt_duration_ms(d["uptimeMs"].as_u64().unwrap_or(0)),
        d["socket"].as_str().unwrap_or("?"),
    );
    for u in status["upstreams"].as_array().into_iter().flatten() {
        let mut line = format!(
            "\n{} · {}",
            u["name"].as_str().unwrap_or("?"),
            u["state"].as_str().unwrap_or("?")
        );
        if let Some(pid) = u["pid"].as_u64() {
            line.push_str(&format!(" · pid {pid}"));
        }
        if let Some(up) = u["uptimeMs"].as_u64() {
            line.push_str(&format!(" · up {}", fmt_duration_ms(up)));
        }
        if let Some(t) = u["tools"].as_u64() {
            line.push_str(&format!(" · {t} tool{}", if t == 1 { "" } else { "s" }));
        }
        out.push_str(&line);
        out.push('\n');
        out.push_str(&format!(
            "  command: {}\n",
            u["command"].as_str().unwrap_or("")
        ));
        out.push_str(&format!(
            "  queue {} · in flight {}/{} · restarts {}",
            u["queue"], u["inFlight"], u["maxConcurrent"], u["restarts"]
        ));
        if let Some(next) = u["nextRestartInMs"].as_u64() {
            out.push_str(&format!(
                " · next start in {:.1}s (failures in a row: {})",
                next as f64 / 1000.0,
                u["consecutiveFailures"]
            ));
        }
        out.push('\n');
        out.push_str(&format!("  {}\n", fmt_stats(&u["stats"])));
        if let Some(e) = u["lastError"].as_str() {
            out.push_str(&format!("  last error: {e}\n"));
        }
        for s in u["signIn"].as_array().into_iter().flatten() {
            let account = s["account"].as_str().filter(|a| !a.is_empty());
            out.push_str(&format!(
                "  sign-in required{}: {}\n",
                account.map(|a| format!(" for {a}")).unwrap_or_default(),
                s["url"].as_str().unwrap_or("?")
            ));
        }
        let sessions = u["sessions"].as_array().cloned().unwrap_or_default();
        out.push_str(&format!("  sessions: {}\n", sessions.len()));
        for s in sessions {
            let client = s["clientInfo"]["name"]
                .as_str()
                .or(s["client"].as_str())
                .unwrap_or("unknown client");
            let version = s["clientInfo"]["version"].as_str().unwrap_or("");
            let mut line = format!("    #{} {client} {version}", s["id"]);
            if let Some(pid) = s["pid"].as_u64() {
                line.push_str(&format!(" · pid {pid}"));
            }
            if let Some(cs) = s["claudeSessionId"].as_str() {
                line.push_str(&format!(" · session {cs}"));
            }
            line.push_str(&format!(
                " · up {} · queued {} · in flight {} · {}",
                fmt_duration_ms(s["uptimeMs"].as_u64().unwrap_or(0)),
                s["queued"],
                s["inFlight"],
                fmt_stats(&s["stats"])
            ));
            out.push_str(line.trim_end());
            out.push('\n');
        }
    }
    out
}
