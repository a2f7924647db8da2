//! `postern`: the stdio shim agents launch (`postern mcp <label>`), the headless
//! engine (`postern daemon`), and management commands.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand};
use postern_domain::ServerLabel;
use postern_engine::answer::{ControlAnswer, ControlCommand};
use postern_engine::{Engine, Home};
use tracing_subscriber::EnvFilter;

mod audit;
mod builtin;
mod credential;
mod demo;
mod gate;
mod import;
mod mcp_server;
mod proof;
mod server;
mod status;
mod terminal;

/// Postern: a gate between AI agents and the MCP servers and credentials they use.
#[derive(Debug, Parser)]
#[command(name = "postern", version, about)]
struct Cli {
    /// The Postern home (default: $POSTERN_HOME, else the platform data directory).
    #[arg(long, global = true, value_name = "DIR")]
    home: Option<PathBuf>,
    /// Prove your presence with system authentication (polkit: the desktop's dialog, or your
    /// login password on this terminal) instead of the Postern passphrase. Works while the
    /// vault is unlocked: unlocking, and changing the passphrase, need the passphrase.
    #[arg(long, global = true)]
    os_auth: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Carry an agent's MCP session to the engine (what an agent's MCP config launches).
    Mcp {
        /// The configured server to reach.
        label: String,
    },
    /// Run the engine headless in the foreground (logs to stderr; POSTERN_LOG sets the filter).
    Daemon,
    /// Configure MCP servers.
    #[command(subcommand)]
    Server(server::ServerCommand),
    /// The audit log: verify, export, repair.
    #[command(subcommand)]
    Audit(audit::AuditCommand),
    /// The Sessions journal: one entry per agent session, newest first.
    Sessions(audit::SessionsArgs),
    /// The Activity journal: one entry per tool call, newest first, with filters.
    Activity(audit::ActivityArgs),
    /// Approval requests waiting for a human.
    Approvals(gate::ApprovalsArgs),
    /// Approve a request: asks for the Postern passphrase on this terminal (with --os-auth,
    /// system authentication instead).
    Approve(gate::ApproveArgs),
    /// Deny a request: the agent gets `approval_denied`.
    Deny {
        /// The request's id.
        id: String,
    },
    /// Live grants: which agent run may use which tools of which epoch, until when.
    Grants {
        /// Print them as JSON.
        #[arg(long)]
        json: bool,
    },
    /// End a grant now, or every grant of one agent (`--agent PID`).
    Revoke {
        /// The grant's id (from `postern grants`).
        #[arg(required_unless_present = "agent")]
        grant: Option<String>,
        /// End every grant of the agent run with this process id instead.
        #[arg(long, value_name = "PID", conflicts_with = "grant")]
        agent: Option<u32>,
    },
    /// Lock the vault: every call is refused, grants end, requests are withdrawn.
    Lock,
    /// Unlock the vault: asks for the Postern passphrase on this terminal.
    Unlock,
    /// Dismiss the notices of requests the egress broker refused (`postern server status`
    /// shows them), once you have looked: asks for the Postern passphrase on this terminal;
    /// the approvals they withdrew stay withdrawn.
    DismissLeaks,
    /// Set the Postern passphrase (the first one unlocks the vault), or change it: asked on
    /// this terminal, never read from standard input, arguments or the environment.
    Passphrase,
    /// Show or change the session approval mode, the approval timeout, the auto-lock.
    Settings(gate::SettingsArgs),
    /// Per-call ("every use") approval for a tool, a server or a credential.
    #[command(subcommand)]
    EveryUse(gate::EveryUseCommand),
    /// Credentials: values in the OS keychain, released only under a human's approval.
    #[command(subcommand)]
    Credential(credential::CredentialCommand),
    /// Postern's built-in MCP servers, as the engine launches them (`postern mcp postern`).
    #[command(subcommand, hide = true)]
    Builtin(builtin::BuiltinCommand),
    /// Play the rebuild story against the running Postern: a bundled server, an agent, two
    /// approvals in the app, a rebuild and its refused stale call.
    Demo,
    /// Delete this home's entries from the OS keychain (the audit log's key and anchor, the
    /// credentials' values), before deleting the home: its audit log can never be opened
    /// again. Refused while an engine owns the home.
    ForgetKeychain {
        /// Yes, the audit log of this home may become unreadable.
        #[arg(long)]
        yes: bool,
    },
    /// The bundled demo server (run by the engine, not by people).
    #[command(hide = true)]
    DemoServer(demo::ServerArgs),
    /// Inside a confined launch's sandbox: serves the egress broker's socket on the loopback
    /// port the proxy variables name, and runs the server (run by the engine, not by people).
    #[command(hide = true)]
    SandboxRun {
        /// The loopback port to listen on.
        #[arg(long)]
        port: u16,
        /// The broker's Unix socket.
        #[arg(long)]
        socket: PathBuf,
        /// The server's command.
        #[arg(last = true, required = true)]
        command: Vec<std::ffi::OsString>,
    },
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        // A reader that stopped reading (`postern activity | head`) is not a failure.
        Err(e)
            if e.chain().any(|cause| {
                cause
                    .downcast_ref::<std::io::Error>()
                    .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            }) =>
        {
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("postern: {}", terminal::clean(&format!("{e:#}")));
            std::process::ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<()> {
    if let Command::Builtin(cmd) = cli.command {
        // Launched by the engine over stdio; it needs no home.
        return builtin::run(cmd);
    }
    if let Command::SandboxRun {
        port,
        socket,
        command,
    } = cli.command
    {
        let code =
            postern_supervisor::run_relayed(port, &socket, &command).context("sandbox-run")?;
        std::process::exit(code);
    }
    proof::use_os_auth(cli.os_auth);
    let home = Home::resolve(cli.home)?;
    match cli.command {
        Command::Mcp { label } => {
            init_logging("warn");
            let label: ServerLabel = label.parse().context("postern mcp")?;
            // One thread: the shim's tasks hand each line to one another, never across threads.
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?
                .block_on(postern_gateway::shim::run_on_stdio(
                    home.socket_path(),
                    label.to_string(),
                ));
            Ok(())
        }
        Command::Daemon => {
            postern_engine::harden::protect_process();
            init_logging("info");
            // macOS delivers screen-lock and sleep notifications on the main thread's run
            // loop: the engine runs beside it (elsewhere, right here).
            postern_engine::with_main_run_loop(|| runtime()?.block_on(daemon(home)))
        }
        Command::Server(cmd) => server::run(&home, cmd),
        Command::Audit(cmd) => audit::audit(&home, cmd),
        Command::Sessions(args) => audit::sessions(&home, args),
        Command::Activity(args) => audit::activity(&home, args),
        Command::Approvals(args) => gate::approvals(&home, args),
        Command::Approve(args) => gate::approve(&home, args),
        Command::Deny { id } => gate::deny(&home, id),
        Command::Grants { json } => gate::grants(&home, json),
        Command::Revoke { grant, agent } => gate::revoke(&home, grant, agent),
        Command::Lock => gate::lock(&home, true),
        Command::Unlock => gate::lock(&home, false),
        Command::DismissLeaks => gate::dismiss_leaks(&home),
        Command::Settings(args) => gate::settings(&home, args),
        Command::EveryUse(cmd) => gate::every_use(&home, cmd),
        Command::Credential(cmd) => credential::credential(&home, cmd),
        Command::Builtin(_) => Ok(()), // served above
        Command::Demo => demo::run(&home),
        Command::DemoServer(args) => demo::server(args),
        Command::SandboxRun { .. } => Ok(()), // served above
        Command::ForgetKeychain { yes } => forget_keychain(&home, yes),
        Command::Passphrase => passphrase(&home),
    }
}

/// `postern passphrase`: the first passphrase (the vault unlocks), or a new one after the
/// current one.
fn passphrase(home: &Home) -> Result<()> {
    let status = match gate::ask(home, ControlCommand::Status)? {
        ControlAnswer::Status(status) => status,
        other => return Err(gate::mismatch(&other)),
    };
    let proof = if status.gate.passphrase_set {
        Some(proof::wire_passphrase("change the Postern passphrase")?)
    } else {
        None
    };
    let passphrase = postern_engine::answer::SecretText(proof::new_passphrase()?);
    gate::ask_with(home, ControlCommand::SetPassphrase { passphrase }, proof)?;
    writeln!(
        terminal::out(),
        "{}",
        if status.gate.passphrase_set {
            "passphrase changed"
        } else {
            "passphrase set; the vault is unlocked"
        }
    )?;
    Ok(())
}

fn forget_keychain(home: &Home, yes: bool) -> Result<()> {
    if !yes {
        bail!(
            "this deletes the keychain entries of {}: its audit log can never be opened again, and its credentials' values are gone. Run again with --yes",
            home.path().display()
        );
    }
    if engine_holds(home) {
        // The same refusal `forget_secrets` gives, before asking for a passphrase in vain.
        return Err(postern_engine::EngineError::AlreadyRunning {
            home: home.path().to_owned(),
        }
        .into());
    }
    proof::offline(home, "forget this home's keychain entries")?;
    let keychain = postern_vault::Keychain::for_home(home.path());
    let forgotten = postern_engine::forget_secrets(home, &keychain)?;
    if forgotten.is_empty() {
        writeln!(
            terminal::out(),
            "no keychain entries for {}",
            home.path().display()
        )?;
    }
    for name in forgotten {
        writeln!(terminal::out(), "deleted {}", keychain.user(&name))?;
    }
    Ok(())
}

async fn daemon(home: Home) -> Result<()> {
    let engine = Engine::start(home).await?;
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    tracing::info!("stopping");
    engine.shutdown().await;
    Ok(())
}

/// The command as a shell would need it typed.
pub(crate) use postern_engine::import::shell_words;

/// Whether an engine holds `home`'s single-owner lock.
pub(crate) fn engine_holds(home: &Home) -> bool {
    std::fs::File::options()
        .read(true)
        .write(true)
        .open(home.lock_path())
        .is_ok_and(|file| matches!(file.try_lock(), Err(std::fs::TryLockError::WouldBlock)))
}

pub(crate) fn tell_engine_config_changed(home: &Home) {
    if let Ok(rt) = runtime() {
        let _ = rt.block_on(postern_engine::answer::ask(
            &home.socket_path(),
            ControlCommand::ConfigChanged,
            None,
        ));
    }
}

pub(crate) fn runtime() -> Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?)
}

fn init_logging(default: &str) {
    let filter = EnvFilter::try_from_env("POSTERN_LOG").unwrap_or_else(|_| EnvFilter::new(default));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
}
