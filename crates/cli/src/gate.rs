//! The human's side of the gate from a terminal: approvals, grants, the vault lock and the
//! settings. Every command goes through the running engine, which refuses authority-widening
//! requests from inside an agent's process tree.

use std::io::Write;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand, ValueEnum};
use postern_domain::decision::{
    ApprovalCard, ArgumentSource, AskFor, CatalogSince, EveryUse, EveryUseSetting, GrantChoice,
    IdentitySince, Reply, SessionMode, SettingTarget, SettingsUpdate,
};
use postern_domain::text::one_line;
use postern_domain::{CredentialName, Grant, GrantEnd, ServerLabel, ToolScope};
use postern_engine::Home;
use postern_engine::answer::{AskError, ControlAnswer, ControlCommand};

use crate::runtime;

/// `postern approvals`.
#[derive(Debug, Args)]
pub struct ApprovalsArgs {
    /// Print the cards as JSON.
    #[arg(long)]
    json: bool,
    /// Wait up to this many seconds for a request to arrive.
    #[arg(long, value_name = "SECS")]
    wait: Option<u64>,
}

/// `postern approve`.
#[derive(Debug, Args)]
pub struct ApproveArgs {
    /// The request's id (from `postern approvals`).
    id: String,
    /// Allow this call only (the default when the request is about a call).
    #[arg(long, conflicts_with_all = ["run", "minutes"])]
    once: bool,
    /// Allow this tool for the rest of the agent run (this epoch of the server only).
    #[arg(long, conflicts_with = "minutes")]
    run: bool,
    /// Allow this tool for N minutes (this epoch of the server only).
    #[arg(long, value_name = "N")]
    minutes: Option<u32>,
}

/// `postern dismiss-leaks`.
pub fn dismiss_leaks(home: &Home) -> Result<()> {
    let dismissed = match ask(home, ControlCommand::DismissLeaks)? {
        ControlAnswer::DismissLeaks { dismissed } => dismissed,
        other => return Err(mismatch(&other)),
    };
    writeln!(
        crate::terminal::out(),
        "{}",
        match dismissed {
            0 => "no leak notices".to_owned(),
            n => format!("dismissed {n} leak notice(s)"),
        }
    )?;
    Ok(())
}

/// `postern settings`.
#[derive(Debug, Args)]
pub struct SettingsArgs {
    /// `prompt`: a human admits each new agent run; `observe`: admitted and journaled.
    #[arg(long, value_name = "MODE")]
    session_mode: Option<Mode>,
    /// Seconds a human has to answer an approval request.
    #[arg(long, value_name = "SECS")]
    approval_timeout: Option<u64>,
    /// Minutes without a call before the vault locks itself (0: never).
    #[arg(long, value_name = "MIN")]
    auto_lock: Option<u64>,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Mode {
    Prompt,
    Observe,
}

/// `postern every-use`.
#[derive(Debug, Subcommand)]
pub enum EveryUseCommand {
    /// List where per-call approval is on.
    List,
    /// Ask a human for every call of a tool, a server, or using a credential.
    On(TargetArgs),
    /// Stop asking for every call there (needs the human).
    Off(TargetArgs),
}

/// Where an every-use setting applies.
#[derive(Debug, Args)]
pub struct TargetArgs {
    /// The server (with --tool: one of its tools).
    #[arg(long, value_name = "LABEL", required_unless_present = "credential")]
    server: Option<String>,
    /// One tool of --server.
    #[arg(long, requires = "server")]
    tool: Option<String>,
    /// A credential scope.
    #[arg(long, value_name = "NAME", conflicts_with_all = ["server", "tool"])]
    credential: Option<String>,
}

/// Sends `command` to the running engine and returns its answer (the variant named like
/// `command`); a refusal becomes the error. A command that widens authority or destroys
/// configuration carries the person's proof, asked on the terminal.
pub(crate) fn ask(home: &Home, command: ControlCommand) -> Result<ControlAnswer> {
    // With `--os-auth`, the terminal's authentication agent lives until the engine answers.
    let (proof, _agent) = if command.need().needs_proof() {
        let (proof, agent) = crate::proof::wire(&command.act())?;
        (Some(proof), agent)
    } else {
        (None, None)
    };
    ask_with(home, command, proof)
}

/// [`ask`] with the proof already in hand.
pub(crate) fn ask_with(
    home: &Home,
    command: ControlCommand,
    proof: Option<postern_engine::answer::WireProof>,
) -> Result<ControlAnswer> {
    let answer = runtime()?.block_on(postern_engine::answer::ask(
        &home.socket_path(),
        command,
        proof,
    ));
    match answer {
        Ok(answer) => Ok(answer),
        // The control error itself, so callers can tell "not running" apart.
        Err(AskError::Control(e)) => Err(e.into()),
        // The stable code (docs/errors.md) after the sentence, for scripts and agents.
        Err(AskError::Refused(refusal)) => match refusal.code {
            Some(code) => bail!("{} ({code})", refusal.error),
            None => bail!("{}", refusal.error),
        },
    }
}

/// The error for an answer that is not the one its request has: [`ask`] checks the answer's
/// name, so this would be a variant named twice.
pub(crate) fn mismatch(answer: &ControlAnswer) -> anyhow::Error {
    anyhow::anyhow!(
        "the engine gave no usable answer: `{}` is not the answer to this request",
        answer.name()
    )
}

/// The open approval requests.
fn cards(home: &Home) -> Result<Vec<ApprovalCard>> {
    match ask(home, ControlCommand::Approvals)? {
        ControlAnswer::Approvals(cards) => Ok(cards),
        other => Err(mismatch(&other)),
    }
}

/// The live grants.
fn live_grants(home: &Home) -> Result<Vec<Grant>> {
    match ask(home, ControlCommand::Grants)? {
        ControlAnswer::Grants(grants) => Ok(grants),
        other => Err(mismatch(&other)),
    }
}

/// `postern approvals`.
pub fn approvals(home: &Home, args: ApprovalsArgs) -> Result<()> {
    let deadline = args.wait.map(|s| Instant::now() + Duration::from_secs(s));
    let cards: Vec<ApprovalCard> = loop {
        let cards = cards(home)?;
        match deadline {
            Some(deadline) if cards.is_empty() && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(100));
            }
            _ => break cards,
        }
    };
    let mut out = crate::terminal::out();
    if args.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&cards)?)?;
        return Ok(());
    }
    if cards.is_empty() {
        writeln!(out, "no approval requests are waiting")?;
    }
    for card in &cards {
        print_card(&mut out, card)?;
    }
    Ok(())
}

/// `postern approve`.
pub fn approve(home: &Home, args: ApproveArgs) -> Result<()> {
    let choice = if args.run {
        Some(GrantChoice::UntilRunEnds)
    } else if let Some(minutes) = args.minutes {
        Some(GrantChoice::ForMinutes { minutes })
    } else if args.once {
        Some(GrantChoice::ThisCall)
    } else {
        // The narrowest choice the card allows (an unknown id is refused by the engine).
        cards(home)?
            .iter()
            .find(|c| c.id.to_string() == args.id)
            .map_or(Some(GrantChoice::ThisCall), ApprovalCard::narrowest)
    };
    ask(
        home,
        ControlCommand::Answer {
            approval: args.id.clone(),
            reply: Reply::Approve { choice },
        },
    )?;
    let how = match choice {
        None => "the agent run is admitted".to_owned(),
        Some(GrantChoice::ThisCall) => "this call only".to_owned(),
        Some(choice) => format!("for {} (this epoch only)", choice.label()),
    };
    writeln!(crate::terminal::out(), "approved {}: {how}", args.id)?;
    Ok(())
}

/// `postern deny`.
pub fn deny(home: &Home, id: String) -> Result<()> {
    ask(
        home,
        ControlCommand::Answer {
            approval: id.clone(),
            reply: Reply::Deny,
        },
    )?;
    writeln!(
        crate::terminal::out(),
        "denied {id}: the agent gets approval_denied"
    )?;
    Ok(())
}

/// `postern grants`.
pub fn grants(home: &Home, json: bool) -> Result<()> {
    let grants = live_grants(home)?;
    let mut out = crate::terminal::out();
    if json {
        writeln!(out, "{}", serde_json::to_string_pretty(&grants)?)?;
        return Ok(());
    }
    if grants.is_empty() {
        writeln!(out, "no live grants")?;
    }
    for g in &grants {
        let tools = match &g.tool_scope {
            ToolScope::Tools(tools) => tools.iter().cloned().collect::<Vec<_>>().join(", "),
            ToolScope::AllToolsOfCatalog(rev) => format!("every tool of catalog {rev}"),
        };
        let end = match g.end {
            GrantEnd::ThisCallOnly { call } => format!("call {call} only"),
            GrantEnd::UntilRunEnds => "until the agent run ends".into(),
            GrantEnd::Until { unix_ms } => {
                format!("{} s left", unix_ms.saturating_sub(now_ms()) / 1000)
            }
        };
        writeln!(
            out,
            "{}  agent pid {}  {}  epoch {}  tools: {tools}  {end}",
            g.id, g.agent_run.pid, g.server_label, g.execution_epoch
        )?;
    }
    Ok(())
}

/// `postern revoke <grant>` and `postern revoke --agent <pid>`.
pub fn revoke(home: &Home, grant: Option<String>, agent: Option<u32>) -> Result<()> {
    let mut out = crate::terminal::out();
    if let Some(grant) = grant {
        let grant = match ask(home, ControlCommand::Revoke { grant })? {
            ControlAnswer::Revoke { grant, changed } => {
                if !changed {
                    bail!("no live grant {grant}");
                }
                grant
            }
            other => return Err(mismatch(&other)),
        };
        writeln!(out, "revoked {grant}")?;
        return Ok(());
    }
    let pid = agent.context("name a grant, or an agent with --agent PID")?;
    // The run (pid and start time) of the live grants: a pid alone could be reused.
    let grants = live_grants(home)?;
    let runs: std::collections::BTreeSet<_> = grants
        .iter()
        .map(|g| g.agent_run)
        .filter(|run| run.pid == pid)
        .collect();
    if runs.is_empty() {
        bail!("no live grant of an agent with pid {pid}");
    }
    for run in runs {
        let revoked = match ask(home, ControlCommand::RevokeRun { run })? {
            ControlAnswer::RevokeRun { revoked } => revoked,
            other => return Err(mismatch(&other)),
        };
        for id in revoked {
            writeln!(out, "revoked {id}")?;
        }
    }
    Ok(())
}

/// `postern lock` / `postern unlock`.
pub fn lock(home: &Home, lock: bool) -> Result<()> {
    let command = if lock {
        ControlCommand::Lock
    } else {
        ControlCommand::Unlock
    };
    let changed = match ask(home, command)? {
        ControlAnswer::Lock { changed } | ControlAnswer::Unlock { changed } => changed,
        other => return Err(mismatch(&other)),
    };
    let text = match (lock, changed) {
        (true, true) => "vault locked: every call is refused until a human unlocks it",
        (true, false) => "the vault was already locked",
        (false, true) => "vault unlocked",
        (false, false) => "the vault was not locked",
    };
    writeln!(crate::terminal::out(), "{text}")?;
    Ok(())
}

/// `postern settings`.
pub fn settings(home: &Home, args: SettingsArgs) -> Result<()> {
    let answer = ask(
        home,
        ControlCommand::Settings {
            change: SettingsUpdate {
                session_mode: args.session_mode.map(|m| match m {
                    Mode::Prompt => SessionMode::Prompt,
                    Mode::Observe => SessionMode::Observe,
                }),
                approval_timeout_ms: args.approval_timeout.map(|s| s.saturating_mul(1000)),
                auto_lock_ms: args.auto_lock.map(|m| m.saturating_mul(60_000)),
                click_window_ms: None,
            },
        },
    )?;
    let ControlAnswer::Settings(s) = answer else {
        return Err(mismatch(&answer));
    };
    let mut out = crate::terminal::out();
    writeln!(
        out,
        "session approval: {}",
        postern_engine::authority::mode_name(s.session_mode)
    )?;
    writeln!(out, "approval timeout: {} s", s.approval_timeout_ms / 1000)?;
    if s.auto_lock_ms == 0 {
        writeln!(out, "auto-lock: never")?;
    } else {
        writeln!(out, "auto-lock: after {} min idle", s.auto_lock_ms / 60_000)?;
    }
    Ok(())
}

/// `postern every-use`.
pub fn every_use(home: &Home, command: EveryUseCommand) -> Result<()> {
    let set = match command {
        EveryUseCommand::List => None,
        EveryUseCommand::On(target) => Some(EveryUseSetting {
            target: target.into_target()?,
            level: EveryUse::Confirm,
        }),
        EveryUseCommand::Off(target) => Some(EveryUseSetting {
            target: target.into_target()?,
            level: EveryUse::Off,
        }),
    };
    let (settings, warning) = match ask(home, ControlCommand::EveryUse { set })? {
        ControlAnswer::EveryUse { settings, warning } => (settings, warning),
        other => return Err(mismatch(&other)),
    };
    if let Some(warning) = warning {
        eprintln!("warning: {}", crate::terminal::clean(&warning));
    }
    let mut out = crate::terminal::out();
    if settings.is_empty() {
        writeln!(out, "per-call approval is off everywhere")?;
    }
    for s in settings {
        writeln!(out, "every use: {}", s.target)?;
    }
    Ok(())
}

impl TargetArgs {
    fn into_target(self) -> Result<SettingTarget> {
        if let Some(name) = self.credential {
            let name: CredentialName = name.parse()?;
            return Ok(SettingTarget::Credential {
                name: name.to_string(),
            });
        }
        let server: ServerLabel = self
            .server
            .context("--server or --credential is required")?
            .parse()?;
        Ok(match self.tool {
            Some(tool) => SettingTarget::Tool { server, tool },
            None => SettingTarget::Server { server },
        })
    }
}

/// How many arguments a card shows in the terminal, and how many characters of each.
const SHOWN_ARGUMENTS: usize = 40;
const SHOWN_CHARS: usize = 200;

/// `text` cut to [`SHOWN_CHARS`] characters, saying how long it was.
fn shortened(text: &str) -> std::borrow::Cow<'_, str> {
    match text.char_indices().nth(SHOWN_CHARS) {
        None => text.into(),
        Some((cut, _)) => format!(
            "{}… ({} bytes in all; postern approvals --json shows it whole)",
            &text[..cut],
            text.len()
        )
        .into(),
    }
}

fn print_card(out: &mut impl Write, card: &ApprovalCard) -> Result<()> {
    let what = match card.what {
        AskFor::Session => "admit this agent run",
        AskFor::Call => "allow this call",
        AskFor::SessionAndCall => "admit this agent run and allow this call",
    };
    let left = card.expires_at.saturating_sub(now_ms()) / 1000;
    writeln!(out, "{}  {what}  (times out in {left} s)", card.id)?;
    if card.agent_stopped_waiting {
        writeln!(
            out,
            "  note:    the agent stopped waiting for this call; your answer decides the same call when it tries again within 10 minutes"
        )?;
    }
    let exe = card
        .agent
        .executable
        .as_ref()
        .map(|a| {
            format!(
                "{} sha256:{}",
                a.path.display(),
                short(&a.digest.to_string())
            )
        })
        .unwrap_or_else(|| "executable unreadable".into());
    writeln!(
        out,
        "  agent:   {} (pid {})  {}",
        one_line(&card.agent.chain_text()),
        card.agent.pid,
        one_line(&exe)
    )?;
    writeln!(
        out,
        "  server:  {}  epoch {}",
        card.server, card.epoch.epoch
    )?;
    let since = match &card.epoch.since {
        IdentitySince::FirstApproval => "first approval for this server".to_owned(),
        IdentitySince::SameEpoch => "the epoch a human approved".to_owned(),
        IdentitySince::Unchanged { approved_epoch } => {
            format!("same code as approved epoch {approved_epoch}")
        }
        IdentitySince::Changed {
            approved_epoch,
            changed_artifacts,
            changed_facts,
        } => {
            let mut what: Vec<String> = changed_artifacts
                .iter()
                .map(|p| p.display().to_string())
                .collect();
            what.extend(changed_facts.iter().cloned());
            format!(
                "CODE CHANGED since approved epoch {approved_epoch}: {}",
                what.join(", ")
            )
        }
    };
    // Each field on its own line: a newline in a path or a tool name must not forge the next.
    writeln!(out, "  code:    {}", one_line(&since))?;
    let catalog = match &card.catalog {
        CatalogSince::FirstApproval { revision } => {
            format!("revision {}", short(&revision.to_string()))
        }
        CatalogSince::Unchanged { revision } => {
            format!(
                "revision {} (unchanged since approval)",
                short(&revision.to_string())
            )
        }
        CatalogSince::Changed { diff } => {
            format!("changed since approval: {}", diff.lines().join("; "))
        }
    };
    writeln!(out, "  catalog: {}", one_line(&catalog))?;
    writeln!(out, "  tool:    {}", one_line(&card.tool.name))?;
    // An agent must not push the rest of the card off the screen with its arguments.
    for arg in card.arguments.iter().take(SHOWN_ARGUMENTS) {
        let default = match arg.source {
            ArgumentSource::Sent => "",
            ArgumentSource::Default => "   (default: not sent by the agent)",
        };
        let value = arg.value.to_string();
        writeln!(
            out,
            "    {} = {}{default}",
            one_line(&shortened(&arg.pointer)),
            shortened(&value)
        )?;
    }
    if let Some(more) = card.arguments.len().checked_sub(SHOWN_ARGUMENTS)
        && more > 0
    {
        writeln!(
            out,
            "    … and {more} more (postern approvals --json shows them all)"
        )?;
    }
    if let Some(hints) = &card.annotations {
        writeln!(
            out,
            "  hints:   {} ({})",
            serde_json::Value::Object(hints.hints.clone()),
            hints.note
        )?;
    }
    if !card.credentials.is_empty() {
        let names: Vec<&str> = card.credentials.iter().map(String::as_str).collect();
        writeln!(out, "  credentials: {}", names.join(", "))?;
    }
    let choices: Vec<&str> = card.choices.iter().map(|c| c.flag()).collect();
    let mut seen = Vec::new();
    for c in choices {
        if !seen.contains(&c) {
            seen.push(c);
        }
    }
    writeln!(
        out,
        "  answer:  postern approve {} {}  |  postern deny {}",
        card.id,
        if seen.is_empty() {
            String::new()
        } else {
            format!("[{}]", seen.join(" | "))
        },
        card.id
    )?;
    Ok(())
}

fn short(digest: &str) -> &str {
    let hex = digest.strip_prefix("sha256:").unwrap_or(digest);
    hex.get(..12).unwrap_or(hex)
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_argument_is_cut_and_says_how_long_it_was() {
        assert_eq!(shortened("short"), "short");
        let long = "é".repeat(5000);
        let shown = shortened(&long);
        assert!(shown.starts_with(&"é".repeat(SHOWN_CHARS)), "{shown}");
        assert!(
            shown.ends_with("… (10000 bytes in all; postern approvals --json shows it whole)"),
            "{shown}"
        );
    }
}
