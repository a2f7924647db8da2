//! `postern`: the stdio shim agents launch (`postern mcp <label>`), the headless
//! engine (`postern daemon`), and management commands.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand};
use postern_domain::{RestartPolicy, ServerLabel};
use postern_engine::answer::{AskError, ControlAnswer, ControlCommand, ControlError};
use postern_engine::servers::{self, Existing, ServerForm};
use postern_engine::{Engine, Home};
use postern_store::{AddOutcome, Store};
use tracing_subscriber::EnvFilter;

mod audit;
mod builtin;
mod credential;
mod demo;
mod gate;
mod import;
mod mcp_server;
mod proof;
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
    Server(ServerCommand),
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

#[derive(Debug, Subcommand)]
enum ServerCommand {
    /// Add a server, or replace the one with the same label.
    Add {
        /// The label agents use: `postern mcp <label>` (a-z, 0-9, '-', '_', '.').
        label: String,
        /// The working directory to launch it in.
        #[arg(long, value_name = "DIR")]
        cwd: Option<PathBuf>,
        /// An environment variable for the server (repeatable).
        #[arg(long = "env", value_name = "KEY=VALUE")]
        env: Vec<String>,
        /// A file, or a directory hashed as a tree, that is part of the server's identity
        /// (e.g. dist/ or node_modules); relative to --cwd (repeatable).
        #[arg(long = "identity", value_name = "PATH")]
        identity: Vec<PathBuf>,
        /// When its files change: `manual` (keep running; status says the files are newer)
        /// or `on-change` (restart it: a new epoch).
        #[arg(long, value_name = "POLICY", default_value = "manual")]
        restart: RestartPolicy,
        /// The server reloads its own code when its files change (nodemon-style): a change
        /// ends its epoch at once.
        #[arg(long)]
        self_reloading: bool,
        /// A method Postern does not know that agents may send this server all the same
        /// (repeatable): it is decided like resources/read (vault, caller, admission) and
        /// journaled. Other unknown methods are refused (-32601).
        #[arg(long = "pass-method", value_name = "METHOD", value_parser = pass_method)]
        pass_methods: Vec<String>,
        /// Run it outside the OS sandbox: it can read every file you can (~/.ssh, the
        /// Postern home) and connect anywhere. Every surface then says "unconfined", and its
        /// next launch is a new identity to approve.
        #[arg(long)]
        unconfined: bool,
        /// Where a confined launch may write besides its working directory and a private
        /// /tmp (a cache); relative to --cwd (repeatable).
        #[arg(long = "writable", value_name = "PATH")]
        writable: Vec<PathBuf>,
        /// The command and its arguments, after `--`.
        #[arg(last = true, required = true, value_name = "COMMAND")]
        command: Vec<String>,
    },
    /// List configured servers.
    List,
    /// Show each server's state, execution epoch and record, catalog revision, and
    /// whether its files are newer than the running process.
    Status {
        /// Only this server.
        label: Option<String>,
    },
    /// Restart a server's running processes (each gets a new execution epoch).
    Restart {
        /// The server to restart.
        label: String,
    },
    /// Remove a server.
    Remove {
        /// The label to remove.
        label: String,
    },
    /// Import the stdio servers of an agent's MCP configuration (Claude Desktop, Claude Code,
    /// Cursor), and print the configuration that points the agent at Postern instead.
    Import {
        /// The configuration file (default: every known one found in your home directory).
        file: Option<PathBuf>,
        /// Show what would be imported; change nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Bind a credential to a server (needs the human; its launches get it once a human
    /// approves their identity for it).
    Bind {
        /// The server.
        label: String,
        /// The credential's scope name.
        credential: String,
    },
    /// Unbind a credential from a server.
    Unbind {
        /// The server.
        label: String,
        /// The credential's scope name.
        credential: String,
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
        Command::Server(cmd) => server(&home, cmd),
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

fn server(home: &Home, cmd: ServerCommand) -> Result<()> {
    match cmd {
        ServerCommand::Bind { label, credential } => {
            return credential::bind(home, label, credential, true);
        }
        ServerCommand::Unbind { label, credential } => {
            return credential::bind(home, label, credential, false);
        }
        _ => {}
    }
    home.prepare()?;
    let store = Store::open(home.path())?;
    let mut out = terminal::out();
    match cmd {
        ServerCommand::Add {
            label,
            cwd,
            env,
            identity,
            restart,
            self_reloading,
            pass_methods,
            unconfined,
            writable,
            command,
        } => {
            let cwd = cwd
                .map(|dir| {
                    std::path::absolute(&dir).with_context(|| format!("--cwd {}", dir.display()))
                })
                .transpose()?;
            let form = ServerForm {
                label,
                command,
                cwd,
                env,
            };
            let mut config = form.config()?;
            config.identity_paths = identity;
            config.restart = restart;
            config.self_reloading = self_reloading;
            config.pass_methods = pass_methods;
            if unconfined {
                config.confinement = postern_domain::Confinement::Unconfined;
            }
            config.writable = writable;
            servers::check(&store, &config, Existing::Replace)?;
            if store.server(&config.label)?.is_some() {
                human_only(home, &format!("replace server '{}'", config.label))?;
            }
            let verb = match servers::add(&store, &config, Existing::Replace)? {
                AddOutcome::Added => "added",
                AddOutcome::Replaced => "replaced",
            };
            writeln!(
                out,
                "{verb} server '{}': {}",
                config.label,
                shell_words(&config.command)
            )?;
            writeln!(out, "agents reach it with: postern mcp {}", config.label)?;
            tell_engine_config_changed(home);
        }
        ServerCommand::List => {
            let servers = store.servers()?;
            if servers.is_empty() {
                writeln!(
                    out,
                    "no servers configured; add one with: postern server add <label> -- <command> [args...]"
                )?;
            }
            for s in servers {
                let cwd = s
                    .cwd
                    .as_ref()
                    .map(|d| format!("  (in {})", d.display()))
                    .unwrap_or_default();
                let env = if s.env.is_empty() {
                    String::new()
                } else {
                    format!(
                        "  env: {}",
                        s.env
                            .iter()
                            .map(|v| v.name.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                };
                writeln!(
                    out,
                    "{}\t{}{cwd}{env}  [{}]",
                    s.label,
                    shell_words(&s.command),
                    status::confinement(&s.confinement.to_string())
                )?;
            }
            writeln!(
                out,
                "{}\t{}",
                postern_domain::BUILTIN_LABEL,
                status::BUILTIN_SUMMARY
            )?;
        }
        ServerCommand::Status { label } => {
            let label = label.map(|l| l.parse::<ServerLabel>()).transpose()?;
            let answer = runtime()?.block_on(postern_engine::answer::ask(
                &home.socket_path(),
                ControlCommand::Status,
                None,
            ));
            match answer {
                Ok(ControlAnswer::Status(status)) => {
                    if !status::print(&mut out, &status, label.as_ref())?
                        && let Some(label) = &label
                    {
                        bail!("no server is configured as '{label}'");
                    }
                }
                Ok(other) => return Err(gate::mismatch(&other)),
                Err(AskError::Control(e @ ControlError::NotRunning(_))) => {
                    let servers = store.servers()?;
                    let shown: Vec<_> = servers
                        .iter()
                        .filter(|s| label.as_ref().is_none_or(|l| *l == s.label))
                        .collect();
                    if let Some(label) = &label
                        && shown.is_empty()
                        && label.as_str() != postern_domain::BUILTIN_LABEL
                    {
                        bail!("no server is configured as '{label}'");
                    }
                    writeln!(out, "{e}\nconfigured servers (none running):")?;
                    for s in shown {
                        writeln!(
                            out,
                            "  {}\t{}  (restart {})",
                            s.label,
                            shell_words(&s.command),
                            s.restart
                        )?;
                    }
                }
                Err(e) => return Err(e.into()),
            }
        }
        ServerCommand::Restart { label } => {
            let label: ServerLabel = label.parse()?;
            if label.as_str() != postern_domain::BUILTIN_LABEL && store.server(&label)?.is_none() {
                bail!("no server is configured as '{label}'");
            }
            let command = ControlCommand::Restart {
                server: label.to_string(),
            };
            let restarted = match gate::ask(home, command)? {
                ControlAnswer::Restart { restarted } => restarted,
                other => return Err(gate::mismatch(&other)),
            };
            match restarted {
                0 => writeln!(
                    out,
                    "'{label}' is not running; it starts with a new epoch on its next call"
                )?,
                n => writeln!(
                    out,
                    "restarting {n} process(es) of '{label}': each gets a new execution epoch"
                )?,
            }
        }
        ServerCommand::Remove { label } => {
            let label: ServerLabel = label.parse()?;
            human_only(home, &format!("remove server '{label}'"))?;
            if !store.remove_server(&label)? {
                bail!("no server is configured as '{label}'");
            }
            writeln!(out, "removed server '{label}'")?;
            tell_engine_config_changed(home);
        }
        ServerCommand::Import { file, dry_run } => {
            import::import(home, &store, file, dry_run, &mut out)?;
        }
        ServerCommand::Bind { .. } | ServerCommand::Unbind { .. } => {}
    }
    Ok(())
}

/// Refuses a server environment variable that a credential bound to the server sets at
/// launch too (one would silently win); `postern server bind` refuses the same the other way.
/// A `--pass-method` value: one the gate does not route already.
fn pass_method(method: &str) -> Result<String, String> {
    postern_gateway::method::passable(method).map(|()| method.to_owned())
}

/// The command as a shell would need it typed.
pub(crate) use postern_engine::import::shell_words;

/// Refuses `what` (a configuration change that destroys something: removing or replacing a
/// server) when it comes from inside an agent's process tree. The engine judges when it
/// answers; when none does, this process judges by the process table: refused when an engine
/// holds the home all the same (its socket is out of reach), or when this process or an
/// ancestor is a `postern mcp` shim or launched one.
fn human_only(home: &Home, what: &str) -> Result<()> {
    let err = match gate::ask(home, ControlCommand::Prove { what: what.into() }) {
        Ok(_) => return Ok(()),
        Err(err) => err,
    };
    if !matches!(
        err.downcast_ref::<ControlError>(),
        Some(ControlError::NotRunning(_))
    ) {
        return Err(err);
    }
    if engine_holds(home) {
        bail!(
            "refused to {what}: an engine holds {} but does not answer on its socket, so it cannot tell who is asking",
            home.path().display()
        );
    }
    let chain = postern_supervisor::ancestry(std::process::id());
    if let Some(agent) = postern_supervisor::agent_among(&chain, None) {
        bail!("{}", postern_engine::inside_agent_tree(what, agent));
    }
    proof::offline(home, what)
}

/// Whether an engine holds `home`'s single-owner lock.
fn engine_holds(home: &Home) -> bool {
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
