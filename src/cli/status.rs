//! The human form of the daemon's `status`.

use crate::wire::{SessionStatus, Stats, Status};

fn fmt_duration_ms(ms: u64) -> String {
    let s = ms / 1000;
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m{:02}s", s / 60, s % 60),
        3600..86400 => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
        _ => format!("{}d{:02}h", s / 86400, (s % 86400) / 3600),
    }
}

fn fmt_stats(stats: &Stats) -> String {
    let mut s = format!(
        "{} calls ({} ok, {} errors, {} timeouts, {} cancelled)",
        stats.calls, stats.ok, stats.errors, stats.timeouts, stats.cancelled
    );
    if let (Some(p50), Some(p99)) = (stats.p50_ms, stats.p99_ms) {
        s.push_str(&format!(" · p50 {p50:.1} ms · p99 {p99:.1} ms"));
    }
    s
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// The human form of `status`.
pub(super) fn render_status(status: &Status) -> String {
    let d = &status.daemon;
    let mut out = format!(
        "coogle daemon {} · pid {} · up {} (since {}) · {}\n",
        d.version,
        d.pid,
        fmt_duration_ms(d.uptime_ms),
        crate::date::utc_time(d.started_at_ms),
        d.socket.display(),
    );
    if let Some(why) = &d.hand_over_failed {
        out.push_str(&format!("  last hand-over not done: {why}\n"));
    }
    for u in &status.upstreams {
        let mut line = match u.parked_since_ms {
            // Parked: stopped for idling, back at the next request that needs it.
            Some(at) => format!(
                "\n{} · parked for {}",
                u.name,
                fmt_duration_ms(now_ms().saturating_sub(at))
            ),
            None => format!("\n{} · {}", u.name, u.state.as_str()),
        };
        if let Some(instance) = &u.instance {
            line.push_str(&format!(" · {instance}"));
        }
        if let Some(pid) = u.pid {
            line.push_str(&format!(" · pid {pid}"));
        }
        if let Some(up) = u.uptime_ms {
            line.push_str(&format!(" · up {}", fmt_duration_ms(up)));
        }
        // A child older than the daemon's binary was kept across an upgrade in place.
        if let Some(at) = u.started_at_ms {
            line.push_str(&format!(" (since {})", crate::date::utc_time(at)));
        }
        if let Some(t) = u.tools {
            line.push_str(&format!(" · {t} tool{}", if t == 1 { "" } else { "s" }));
        }
        if let Some(era) = u.era {
            line.push_str(&format!(" · {} era", era_name(era)));
        }
        out.push_str(&line);
        out.push('\n');
        out.push_str(&format!("  command: {}\n", u.command));
        out.push_str(&format!(
            "  waiting {} (calls queued {}) · in flight {}/{} · restarts {}",
            u.waiting, u.queue, u.in_flight, u.max_concurrent, u.restarts
        ));
        if let Some(next) = u.next_restart_in_ms {
            out.push_str(&format!(
                " · next start in {:.1}s (failures in a row: {})",
                next as f64 / 1000.0,
                u.consecutive_failures
            ));
        }
        out.push('\n');
        out.push_str(&format!("  {}\n", fmt_stats(&u.stats)));
        match u.capabilities_from.as_deref() {
            Some("config") => out.push_str(
                "  capabilities: the config's clientCapabilities (a handshake-era child sees one set for every session)\n",
            ),
            Some("session") => out.push_str("  capabilities: each session's own\n"),
            _ => {}
        }
        if let Some(e) = &u.last_error {
            out.push_str(&format!("  last error: {e}\n"));
        }
        for s in &u.sign_in {
            let account = if s.account.is_empty() {
                String::new()
            } else {
                format!(" for {}", s.account)
            };
            out.push_str(&format!("  sign-in required{account}: {}\n", s.url));
        }
        out.push_str(&format!("  sessions: {}\n", u.sessions.len()));
        for s in &u.sessions {
            out.push_str(&session_line(s));
            out.push('\n');
        }
    }
    out
}

fn session_line(s: &SessionStatus) -> String {
    let client = s
        .client_name()
        .or(s.client.as_deref())
        .unwrap_or("unknown client");
    let version = s.client_version().unwrap_or("");
    let mut line = format!("    #{} {client} {version}", s.id);
    if let Some(pid) = s.pid {
        line.push_str(&format!(" · pid {pid}"));
    }
    if let Some(era) = s.era {
        line.push_str(&format!(" · {}", era_name(era)));
    }
    line.push_str(&format!(
        " · up {} · waiting {} · in flight {} · {}",
        fmt_duration_ms(s.uptime_ms),
        s.waiting,
        s.in_flight,
        fmt_stats(&s.stats)
    ));
    line.trim_end().to_string()
}

/// How an era reads in `status`: the protocol it means.
fn era_name(era: crate::wire::Era) -> &'static str {
    match era {
        crate::wire::Era::Modern => "2026-07-28",
        crate::wire::Era::Legacy => "handshake",
    }
}
