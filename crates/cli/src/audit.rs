//! `postern audit ...`, `postern sessions`, `postern activity`: they read the home's SQLite
//! file directly (WAL lets them read while the engine writes) and the audit keys from the OS
//! keychain.

use std::io::Write;
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand, ValueEnum};
use postern_engine::Home;
use postern_engine::answer::ControlCommand;
use postern_engine::audit::{self, AnchorCheck, AuditError, JournalCheck};
use postern_store::{ActivityFilter, SessionFilter, Store};
use postern_vault::{Keychain, VaultKey};

/// `postern audit <command>`.
#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// Verify the whole log: structure and chain hashes, against the anchor kept in the OS
    /// keychain (so a cut or rolled-back log is caught), and, with the keychain's key, every
    /// body. Exits non-zero at the first bad record, naming its sequence number.
    Verify {
        /// Check structure, hashes and anchor only; do not open the bodies.
        #[arg(long)]
        no_open: bool,
    },
    /// Print every event, one JSON object per line (needs the key from the keychain).
    Export {
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Jsonl)]
        format: Format,
        /// Include tool-call argument values (by default only their shape).
        #[arg(long)]
        with_arguments: bool,
    },
    /// Accept the log as it is now (after a deliberate restore or cut): verify it, then make
    /// its head the anchor. A log with an altered record still fails. What the records cut may
    /// have narrowed cannot be read again, so no credential stays bound and no launch stays
    /// approved: bind them again after the next unlock. Engine must be stopped; the
    /// re-anchoring is recorded in the log.
    Reanchor {
        /// Yes, records cut from the log's end are gone for good.
        #[arg(long)]
        yes: bool,
    },
    /// Rebuild the Sessions and Activity journals from the log (needs the key). Engine must
    /// be stopped.
    RebuildJournals,
}

/// Export formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// One JSON object per line.
    Jsonl,
}

/// `postern sessions` filters.
#[derive(Debug, Args)]
pub struct SessionsArgs {
    /// Only sessions of this server.
    #[arg(long)]
    server: Option<String>,
    /// Only sessions in this state.
    #[arg(long, value_parser = ["running", "ended", "interrupted"])]
    status: Option<String>,
    /// At most this many (newest first).
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..))]
    limit: u32,
    /// Only sessions older than this id (the next page).
    #[arg(long, value_name = "ID")]
    before: Option<i64>,
    /// One JSON object per line.
    #[arg(long)]
    json: bool,
}

/// `postern activity` filters.
#[derive(Debug, Args)]
pub struct ActivityArgs {
    /// Only calls of this session: the ID `postern sessions` shows, or `#N`, a running
    /// session's number as `postern server status` shows it.
    #[arg(long, value_name = "ID", value_parser = parse_session)]
    session: Option<SessionRef>,
    /// Only calls to this server.
    #[arg(long, value_name = "LABEL")]
    server: Option<String>,
    /// Only calls under this execution epoch.
    #[arg(long)]
    epoch: Option<String>,
    /// Only calls of this tool.
    #[arg(long)]
    tool: Option<String>,
    /// `allowed`, `denied` (any refusal), or one refusal code.
    #[arg(long)]
    decision: Option<String>,
    /// At or after this time: unix milliseconds, RFC 3339, or YYYY-MM-DD (UTC).
    #[arg(long, value_name = "TIME", value_parser = parse_time)]
    since: Option<i64>,
    /// Before this time: unix milliseconds, RFC 3339, or YYYY-MM-DD (UTC).
    #[arg(long, value_name = "TIME", value_parser = parse_time)]
    until: Option<i64>,
    /// At most this many (newest first).
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..))]
    limit: u32,
    /// Only calls recorded before this seq (the next page).
    #[arg(long, value_name = "SEQ")]
    before: Option<i64>,
    /// One JSON object per line.
    #[arg(long)]
    json: bool,
}

/// Runs `postern audit <command>`.
pub fn audit(home: &Home, command: AuditCommand) -> Result<()> {
    home.prepare()?;
    let keychain = Keychain::for_home(home.path());
    let mut out = crate::terminal::out();
    match command {
        AuditCommand::Verify { no_open } => {
            // Bodies whose key is sealed open with the passphrase; with no terminal to ask on,
            // the chain is verified without them (the report says so).
            let vault = match no_open {
                true => None,
                false => sealed_vault(&keychain, "open the audit log's records")
                    .ok()
                    .flatten(),
            };
            let report =
                audit::verify(home, &keychain, vault.as_ref(), !no_open).map_err(failed)?;
            let head = report
                .head
                .map_or_else(|| "none".to_owned(), |h| h.to_string());
            writeln!(out, "verified {} records, head {head}", report.records)?;
            match &report.anchor {
                AnchorCheck::Checked(anchor) => writeln!(
                    out,
                    "anchor: the log reaches the keychain's anchor {anchor}"
                )?,
                AnchorCheck::Empty => writeln!(out, "anchor: none recorded yet (empty log)")?,
                AnchorCheck::Unavailable(why) => writeln!(
                    out,
                    "anchor: NOT CHECKED, the keychain is unavailable ({why}); truncation and \
                     rollback were not ruled out"
                )?,
            }
            match (&report.bodies_opened, &report.key_note) {
                (true, _) => writeln!(out, "bodies: every one opened and parsed")?,
                (false, Some(why)) => writeln!(out, "bodies: not opened ({why})")?,
                (false, None) => writeln!(out, "bodies: not opened")?,
            }
            match report.journals {
                JournalCheck::Matched { through } => writeln!(
                    out,
                    "journals: the Sessions and Activity journals are what the log gives, \
                     through record {through}"
                )?,
                JournalCheck::NotChecked => writeln!(
                    out,
                    "journals: not compared with the log (that needs the bodies opened)"
                )?,
            }
        }
        AuditCommand::Export {
            format: Format::Jsonl,
            with_arguments,
        } => {
            let vault = sealed_vault(&keychain, "export the audit log")?;
            audit::export(home, &keychain, vault.as_ref(), with_arguments, &mut out)
                .map_err(failed)?;
        }
        AuditCommand::Reanchor { yes: false } => bail!(
            "re-anchoring accepts the log as it is now: records missing from its end stay missing, and the check that caught it stops complaining. What they narrowed (an unbind, a removal) cannot be read again, so no credential stays bound and no launch stays approved: bind them again after the next unlock. Run again with --yes"
        ),
        AuditCommand::Reanchor { yes: true } => {
            let vault = match postern_engine::authority::passphrase_known(&keychain) {
                true => Some(crate::proof::vault_key(
                    &keychain,
                    "re-anchor the audit log",
                )?),
                false => None,
            };
            let head = audit::reanchor(home, Arc::new(keychain.clone()), vault.as_ref())
                .map_err(failed)?;
            writeln!(
                out,
                "anchored the log at {head}, after the record of the re-anchoring"
            )?;
            writeln!(
                out,
                "no credential stays bound and no launch approved: bind them again after the next unlock"
            )?;
        }
        AuditCommand::RebuildJournals => {
            let vault = sealed_vault(&keychain, "rebuild the journals from the audit log")?;
            let n = audit::rebuild_journals(home, &keychain, vault.as_ref()).map_err(failed)?;
            writeln!(out, "rebuilt the journals from {n} records")?;
        }
    }
    Ok(())
}

/// The vault key, asked for on the terminal, when the log's opening key is sealed under it
/// (`None`: it is not, and nothing is asked).
fn sealed_vault(keychain: &Keychain, why: &str) -> Result<Option<VaultKey>> {
    if !audit::opening_key_sealed(keychain) {
        return Ok(None);
    }
    crate::proof::vault_key(keychain, why).map(Some)
}

/// Asks a running engine to bring the journals up to date with its audit log (they trail it
/// by a few milliseconds): what an agent just did shows. Without an engine they are (the
/// engine writes them before it stops), and an engine that cannot be asked leaves them as
/// they are: reading goes on either way.
fn journals_up_to_date(home: &Home) {
    if let Err(e) = crate::gate::ask(home, ControlCommand::Journals) {
        tracing::debug!("the journals were read as they are: {e:#}");
    }
}

/// Runs `postern sessions`.
pub fn sessions(home: &Home, args: SessionsArgs) -> Result<()> {
    home.prepare()?;
    journals_up_to_date(home);
    let store = Store::open(home.path())?;
    let rows = store.sessions(&SessionFilter {
        server: args.server,
        status: args.status,
        before: args.before,
        limit: args.limit,
    })?;
    let mut out = crate::terminal::out();
    if args.json {
        return json_lines(&mut out, &rows);
    }
    if rows.is_empty() {
        writeln!(out, "no agent sessions recorded")?;
        return Ok(());
    }
    // LIVE: a running session's number in `postern server status` (`--session '#N'`).
    writeln!(
        out,
        "{:>8}  {:>5}  {:<24}  {:<12}  {:<11}  {:<8}  {:>5}  {:>6}  {:>6}  {:>6}  {:>6}  AGENT",
        "ID",
        "LIVE",
        "STARTED",
        "SERVER",
        "STATUS",
        "APPROVED",
        "CALLS",
        "DENIED",
        "FAILED",
        "EPOCHS",
        "GRANTS"
    )?;
    for r in &rows {
        writeln!(
            out,
            "{:>8}  {:>5}  {:<24}  {:<12}  {:<11}  {:<8}  {:>5}  {:>6}  {:>6}  {:>6}  {:>6}  {}",
            r.id,
            if r.status == "running" {
                format!("#{}", r.session)
            } else {
                "-".into()
            },
            rfc3339(r.started),
            r.server,
            r.status,
            r.approved.as_deref().unwrap_or("-"),
            r.calls,
            r.denied,
            r.failed,
            r.epochs.len(),
            r.grants.len(),
            r.agent.as_deref().or(r.client.as_deref()).unwrap_or("-")
        )?;
    }
    if rows.len() == args.limit as usize
        && let Some(last) = rows.last()
    {
        writeln!(out, "more: --before {}", last.id)?;
    }
    Ok(())
}

/// Runs `postern activity`.
pub fn activity(home: &Home, args: ActivityArgs) -> Result<()> {
    home.prepare()?;
    journals_up_to_date(home);
    let store = Store::open(home.path())?;
    let session = match args.session {
        None => None,
        Some(SessionRef::Journal(id)) => Some(id),
        Some(SessionRef::Live(n)) => Some(
            store
                .sessions(&SessionFilter {
                    server: None,
                    status: Some("running".into()),
                    before: None,
                    limit: 10_000,
                })?
                .into_iter()
                .find(|s| s.session == n)
                .map(|s| s.id)
                .with_context(|| {
                    format!("no running session #{n}: `postern sessions` lists them all")
                })?,
        ),
    };
    let rows = store.activity(&ActivityFilter {
        session,
        server: args.server,
        epoch: args.epoch,
        tool: args.tool,
        decision: args.decision,
        since: args.since,
        until: args.until,
        before: args.before,
        limit: args.limit,
    })?;
    let mut out = crate::terminal::out();
    if args.json {
        return json_lines(&mut out, &rows);
    }
    if rows.is_empty() {
        writeln!(out, "no calls recorded that match")?;
        return Ok(());
    }
    writeln!(
        out,
        "{:>8}  {:<24}  {:>8}  {:<12}  {:<26}  {:<16}  {:<22}  {:<16}  {:>8}",
        "SEQ", "TIME", "SESSION", "SERVER", "EPOCH", "TOOL", "DECISION", "OUTCOME", "MS"
    )?;
    for r in &rows {
        writeln!(
            out,
            "{:>8}  {:<24}  {:>8}  {:<12}  {:<26}  {:<16}  {:<22}  {:<16}  {:>8}",
            r.seq,
            rfc3339(r.time),
            r.session,
            r.server,
            r.epoch.as_deref().unwrap_or("-"),
            r.tool,
            r.decision,
            r.outcome.as_deref().unwrap_or("(no result)"),
            r.duration_ms.map_or_else(|| "-".into(), |d| d.to_string())
        )?;
    }
    if rows.len() == args.limit as usize
        && let Some(last) = rows.last()
    {
        writeln!(out, "more: --before {}", last.seq)?;
    }
    Ok(())
}

/// A session as people name it: its journal ID, or `#N`, a running session's number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionRef {
    /// The ID `postern sessions` shows.
    Journal(i64),
    /// `#N`: the number `postern server status` shows for a running session.
    Live(i64),
}

fn parse_session(text: &str) -> Result<SessionRef, String> {
    let (live, digits) = match text.strip_prefix('#') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let n: i64 = digits
        .parse()
        .map_err(|_| "a session ID (27) or a running session's number (#3)".to_owned())?;
    Ok(if live {
        SessionRef::Live(n)
    } else {
        SessionRef::Journal(n)
    })
}

fn failed(e: AuditError) -> anyhow::Error {
    anyhow::anyhow!("{e} [{}]", e.code())
}

/// Unix milliseconds, RFC 3339 (`2026-01-02T03:04:05Z`, fractions and offsets allowed), or a
/// date (`2026-01-02`, midnight UTC).
fn parse_time(text: &str) -> Result<i64> {
    if let Ok(ms) = text.parse::<i64>() {
        return Ok(ms);
    }
    let bad = || format!("{text:?} is not unix milliseconds, RFC 3339 or YYYY-MM-DD");
    let num = |s: &str| -> Result<i64> {
        if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
            bail!(bad());
        }
        s.parse::<i64>().with_context(bad)
    };
    let (date, rest) = text.split_at(text.len().min(10));
    let parts: Vec<&str> = date.split('-').collect();
    if parts.len() != 3 || parts[0].len() != 4 || parts[1].len() != 2 || parts[2].len() != 2 {
        bail!(bad());
    }
    let (y, m, d) = (num(parts[0])?, num(parts[1])?, num(parts[2])?);
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) {
        bail!(bad());
    }
    let mut ms = days_from_civil(y, m, d) * 86_400_000;
    if rest.is_empty() {
        return Ok(ms);
    }
    let rest = rest.strip_prefix(['T', 't', ' ']).with_context(bad)?;
    if rest.len() < 8 || &rest[2..3] != ":" || &rest[5..6] != ":" {
        bail!(bad());
    }
    let (h, min, s) = (num(&rest[..2])?, num(&rest[3..5])?, num(&rest[6..8])?);
    if h > 23 || min > 59 || s > 60 {
        bail!(bad());
    }
    ms += ((h * 60 + min) * 60 + s) * 1000;
    let mut rest = &rest[8..];
    if let Some(frac) = rest.strip_prefix('.') {
        let digits = frac.bytes().take_while(u8::is_ascii_digit).count();
        let padded = format!("{:0<3}", &frac[..digits.min(3)]);
        ms += num(&padded)?;
        rest = &frac[digits..];
    }
    let offset = match rest {
        "Z" | "z" => 0,
        _ if rest.len() == 6 && &rest[3..4] == ":" => {
            let sign = match &rest[..1] {
                "+" => 1,
                "-" => -1,
                _ => bail!(bad()),
            };
            sign * (num(&rest[1..3])? * 60 + num(&rest[4..6])?) * 60_000
        }
        _ => bail!(bad()),
    };
    Ok(ms - offset)
}

/// Unix milliseconds as `YYYY-MM-DDTHH:MM:SS.mmmZ`.
pub(crate) fn rfc3339(ms: i64) -> String {
    let (days, rem) = (ms.div_euclid(86_400_000), ms.rem_euclid(86_400_000));
    let (y, m, d) = civil_from_days(days);
    let (s, milli) = (rem / 1000, rem % 1000);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{milli:03}Z",
        s / 3600,
        s / 60 % 60,
        s % 60
    )
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// One JSON object per line (`--json`).
fn json_lines(out: &mut impl Write, rows: &[impl serde::Serialize]) -> Result<()> {
    for row in rows {
        writeln!(out, "{}", serde_json::to_string(row)?)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_parse_and_print_in_utc() {
        assert_eq!(parse_time("1700000000123").unwrap(), 1_700_000_000_123);
        assert_eq!(parse_time("1970-01-01").unwrap(), 0);
        assert_eq!(
            parse_time("2023-11-14T22:13:20Z").unwrap(),
            1_700_000_000_000
        );
        assert_eq!(
            parse_time("2023-11-14T22:13:20.5Z").unwrap(),
            1_700_000_000_500
        );
        assert_eq!(
            parse_time("2023-11-15T00:13:20+02:00").unwrap(),
            1_700_000_000_000
        );
        assert_eq!(
            parse_time("2024-02-29T00:00:00Z").unwrap(),
            1_709_164_800_000
        );
        for bad in [
            "",
            "yesterday",
            "2023-13-01",
            "2023-11-14T25:00:00Z",
            "2023-11-14T22:13:20",
        ] {
            assert!(parse_time(bad).is_err(), "{bad}");
        }
        assert_eq!(rfc3339(1_700_000_000_123), "2023-11-14T22:13:20.123Z");
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(1_709_164_800_000), "2024-02-29T00:00:00.000Z");
        for ms in [0, 951_782_400_000, 1_709_164_800_000, 4_102_444_800_000] {
            assert_eq!(parse_time(&rfc3339(ms)).unwrap(), ms);
        }
    }
}
