//! `postern server status`: the refresh contract's state, readable in a terminal.

use std::io::Write;

use postern_domain::ServerLabel;
use postern_engine::{ArtifactView, PinningView, SessionState, SessionStatus, Status};

/// What `postern server list` and `status` say of the built-in server, which is always there.
pub const BUILTIN_SUMMARY: &str = "built-in: http_request (HTTPS, header credentials bound to it)";

/// Prints every server (or one), then each of its running processes; the built-in server
/// too, when it is asked for or runs. Returns whether there was anything to print.
pub fn print(
    out: &mut impl Write,
    status: &Status,
    only: Option<&ServerLabel>,
) -> std::io::Result<bool> {
    let wanted = |label: &str| only.is_none_or(|l| l.as_str() == label);
    let builtin = postern_domain::BUILTIN_LABEL;
    let mut any = false;
    if only.is_some_and(|l| l.as_str() == builtin)
        || (only.is_none() && status.sessions.iter().any(|s| s.server == builtin))
    {
        any = true;
        writeln!(out, "{builtin}  ({BUILTIN_SUMMARY})")?;
        print_sessions(out, status, builtin)?;
    }
    for server in status.servers.iter().filter(|s| wanted(&s.label)) {
        any = true;
        let self_reloading = if server.self_reloading {
            ", self-reloading"
        } else {
            ""
        };
        writeln!(
            out,
            "{}  (restart {}{self_reloading}, {})",
            server.label,
            server.restart,
            confinement(&server.confinement)
        )?;
        writeln!(out, "  command: {}", server.command.join(" "))?;
        if !server.writable.is_empty() {
            writeln!(out, "  may write to: {}", server.writable.join(" "))?;
        }
        for leak in status
            .gate
            .leaks
            .iter()
            .filter(|l| l.server == server.label)
        {
            writeln!(
                out,
                "  REFUSED: a launch sent the placeholder of {} toward {} ({} request(s), last {}); its next launch gets {} only after you approve again. Seen it? postern dismiss-leaks",
                leak.credentials.join(", "),
                leak.host,
                leak.count,
                crate::audit::rfc3339(leak.at_ms as i64),
                if leak.credentials.len() == 1 {
                    "it"
                } else {
                    "them"
                }
            )?;
        }
        if !server.pass_methods.is_empty() {
            writeln!(
                out,
                "  passes (decided, journaled): {}",
                server.pass_methods.join(" ")
            )?;
        }
        print_sessions(out, status, &server.label)?;
    }
    if !any && only.is_none() {
        writeln!(out, "no servers configured")?;
    }
    Ok(any)
}

/// A server's confinement as the list says it: "confined", or a warning.
pub fn confinement(value: &str) -> &'static str {
    if value == "unconfined" {
        "UNCONFINED: it can read every file you can"
    } else {
        "confined"
    }
}

/// The running processes of server `label`, or that none runs.
fn print_sessions(out: &mut impl Write, status: &Status, label: &str) -> std::io::Result<()> {
    let mut sessions = status
        .sessions
        .iter()
        .filter(|s| s.server == label)
        .peekable();
    if sessions.peek().is_none() {
        writeln!(out, "  not running (starts on an agent's first call)")?;
    }
    sessions.try_for_each(|session| print_session(out, session))
}

fn print_session(out: &mut impl Write, s: &SessionStatus) -> std::io::Result<()> {
    let state = match s.state {
        SessionState::Stopped => "stopped",
        SessionState::Starting => "starting",
        SessionState::IdentityPending => "identity-pending",
        SessionState::CatalogReady => "catalog-ready",
        SessionState::CatalogRefreshing => "catalog-refreshing",
    };
    let client = s.client.as_deref().unwrap_or("agent");
    writeln!(out, "  session {} ({client}): {state}", s.id)?;
    match &s.agent {
        Some(agent) => {
            writeln!(
                out,
                "    agent {}  pid {}",
                agent.chain.join(" -> "),
                agent.pid
            )?;
            if let Some(exe) = &agent.executable {
                artifact(out, "agent exe", exe)?;
            }
        }
        None => writeln!(out, "    agent unidentified")?,
    }
    if let Some(e) = &s.execution {
        let running = if s.server_pid.is_some() {
            "running"
        } else {
            "last"
        };
        let launch = e
            .launch
            .map(|n| format!("  launch {n}"))
            .unwrap_or_default();
        writeln!(
            out,
            "    {running} epoch {}  pid {}{launch}",
            e.epoch, e.pid
        )?;
        writeln!(out, "    identity {}", e.identity)?;
        match &e.pinning {
            PinningView::Pinned => writeln!(out, "    pinned")?,
            PinningView::Partly { covered, uncovered } => {
                writeln!(out, "    partly pinned: covers {covered}, not {uncovered}")?;
            }
            PinningView::Unpinned { reason } => writeln!(out, "    UNPINNED: {reason}")?,
        }
        artifact(out, "executable", &e.executable)?;
        for w in &e.wrappers {
            artifact(out, "wrapper", w)?;
        }
        if let Some(entry) = &e.entry {
            artifact(out, "entry", entry)?;
        }
        for l in &e.lockfiles {
            artifact(out, "lockfile", l)?;
        }
        for x in &e.extra_paths {
            artifact(out, "identity", x)?;
        }
        if let Some(runtime) = &e.runtime {
            writeln!(out, "    runtime {runtime}")?;
        }
        writeln!(out, "    cwd {}", e.working_directory)?;
        match &e.sandbox {
            Some(sandbox) => writeln!(
                out,
                "    confined ({}): writes {}; network {}",
                sandbox.tool,
                if sandbox.writable.is_empty() {
                    "only a private /tmp".to_owned()
                } else {
                    format!("{} and a private /tmp", sandbox.writable.join(", "))
                },
                sandbox.network
            )?,
            None => writeln!(
                out,
                "    UNCONFINED: it can read every file you can and connect anywhere"
            )?,
        }
    }
    if let Some(c) = &s.catalog {
        writeln!(out, "    catalog {} ({} tools)", c.revision, c.tools.len())?;
        match &c.presented_revision {
            Some(shown) if *shown != c.revision => writeln!(
                out,
                "    agent was shown {shown}: its next calls to changed tools are refused"
            )?,
            _ => {}
        }
        for change in &c.changes {
            writeln!(out, "      changed: {change}")?;
        }
    }
    if !s.artifacts_newer.is_empty() {
        writeln!(
            out,
            "    FILES NEWER THAN THE RUNNING PROCESS (restart to use them):"
        )?;
        for path in &s.artifacts_newer {
            writeln!(out, "      {path}")?;
        }
    }
    if !s.credentials.released.is_empty() {
        let held: Vec<String> = s
            .credentials
            .released
            .iter()
            .map(|name| {
                if s.credentials.brokered.contains(name) {
                    format!("{name} (a placeholder; the broker adds the value for its hosts)")
                } else {
                    format!("{name} (the value, exposed to the server's code)")
                }
            })
            .collect();
        writeln!(out, "    credentials held: {}", held.join(", "))?;
    }
    if !s.credentials.withheld.is_empty() {
        writeln!(
            out,
            "    credential withheld: {} ({})",
            s.credentials.withheld.join(", "),
            s.credentials.reason.as_deref().unwrap_or("not approved")
        )?;
    }
    if let Some(exit) = &s.last_exit {
        writeln!(out, "    last exit: {exit}")?;
    }
    if let Some(since) = s.unresponsive_since_ms {
        let seconds = (now_ms() - since).max(0) / 1000;
        writeln!(
            out,
            "    not answering: Postern's pings have gone unanswered for {seconds}s"
        )?;
    }
    Ok(())
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

fn artifact(out: &mut impl Write, what: &str, a: &ArtifactView) -> std::io::Result<()> {
    writeln!(out, "    {what:<10} {}  {}", a.digest, a.path)
}
