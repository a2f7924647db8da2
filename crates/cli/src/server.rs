//! `postern server ...`: the configured MCP servers, in the store, and what the engine says
//! of the running ones.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::Subcommand;
use postern_domain::{RestartPolicy, ServerLabel};
use postern_engine::Home;
use postern_engine::answer::{AskError, ControlAnswer, ControlCommand, ControlError};
use postern_engine::servers::{self, Existing, ServerForm};
use postern_store::{AddOutcome, Store};

use crate::{credential, engine_holds, gate, import, proof, shell_words, status, terminal};
use crate::{runtime, tell_engine_config_changed};

#[derive(Debug, Subcommand)]
pub(crate) enum ServerCommand {
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

/// Carries out one `postern server` command.
pub(crate) fn run(home: &Home, cmd: ServerCommand) -> Result<()> {
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
            let mut config = ServerForm {
                label,
                command,
                cwd,
                env,
            }
            .config()?;
            config.identity_paths = identity;
            config.restart = restart;
            config.self_reloading = self_reloading;
            config.pass_methods = pass_methods;
            if unconfined {
                config.confinement = postern_domain::Confinement::Unconfined;
            }
            config.writable = writable;
            add(home, &open(home)?, &mut out, &config)
        }
        ServerCommand::List => list(&open(home)?, &mut out),
        ServerCommand::Status { label } => {
            let label = label.map(|l| l.parse::<ServerLabel>()).transpose()?;
            show_status(home, &mut out, label.as_ref())
        }
        ServerCommand::Restart { label } => restart(home, &open(home)?, &mut out, &label.parse()?),
        ServerCommand::Remove { label } => remove(home, &open(home)?, &mut out, &label.parse()?),
        ServerCommand::Import { file, dry_run } => {
            import::import(home, &open(home)?, file, dry_run, &mut out)
        }
        ServerCommand::Bind { label, credential } => credential::bind(home, label, credential),
        ServerCommand::Unbind { label, credential } => credential::unbind(home, label, credential),
    }
}

/// The home's store, the home made first if it is new.
fn open(home: &Home) -> Result<Store> {
    home.prepare()?;
    Ok(Store::open(home.path())?)
}

/// `server add`: a new server, or one replacing the server of the same label (which takes
/// the person: it destroys the old configuration).
fn add(
    home: &Home,
    store: &Store,
    out: &mut impl Write,
    config: &postern_domain::ServerConfig,
) -> Result<()> {
    servers::check(store, config, Existing::Replace)?;
    if store.server(&config.label)?.is_some() {
        human_only(home, &format!("replace server '{}'", config.label))?;
    }
    let verb = match servers::add(store, config, Existing::Replace)? {
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
    Ok(())
}

/// `server list`: the configured servers, and the built-in one.
fn list(store: &Store, out: &mut impl Write) -> Result<()> {
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
            let names: Vec<&str> = s.env.iter().map(|v| v.name.as_str()).collect();
            format!("  env: {}", names.join(", "))
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
    Ok(())
}

/// `server status`: what the engine says of each server (or of `label`); with no engine
/// running, what is configured.
fn show_status(home: &Home, out: &mut impl Write, label: Option<&ServerLabel>) -> Result<()> {
    let answer = runtime()?.block_on(postern_engine::answer::ask(
        &home.socket_path(),
        ControlCommand::Status,
        None,
    ));
    match answer {
        Ok(ControlAnswer::Status(status)) => {
            if !status::print(out, &status, label)?
                && let Some(label) = label
            {
                bail!("no server is configured as '{label}'");
            }
            Ok(())
        }
        Ok(other) => Err(gate::mismatch(&other)),
        Err(AskError::Control(e @ ControlError::NotRunning(_))) => {
            let servers = open(home)?.servers()?;
            let shown: Vec<_> = servers
                .iter()
                .filter(|s| label.is_none_or(|l| *l == s.label))
                .collect();
            if let Some(label) = label
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
            Ok(())
        }
        Err(e) => Err(e.into()),
    }
}

/// `server restart`: the server's running processes end, each next launch a new epoch.
fn restart(home: &Home, store: &Store, out: &mut impl Write, label: &ServerLabel) -> Result<()> {
    if label.as_str() != postern_domain::BUILTIN_LABEL && store.server(label)?.is_none() {
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
    Ok(())
}

/// `server remove` (takes the person).
fn remove(home: &Home, store: &Store, out: &mut impl Write, label: &ServerLabel) -> Result<()> {
    human_only(home, &format!("remove server '{label}'"))?;
    if !store.remove_server(label)? {
        bail!("no server is configured as '{label}'");
    }
    writeln!(out, "removed server '{label}'")?;
    tell_engine_config_changed(home);
    Ok(())
}

/// A `--pass-method` value: one the gate does not route already.
fn pass_method(method: &str) -> Result<String, String> {
    postern_gateway::method::passable(method).map(|()| method.to_owned())
}

/// Refuses `what` (a configuration change that destroys something: removing or replacing a
/// server) when it comes from inside an agent's process tree. The engine judges when it
/// answers; when none does, this process judges by the process table: refused when an engine
/// holds the home all the same (its socket is out of reach), or when this process or an
/// ancestor is a `postern mcp` shim or launched one.
pub(crate) fn human_only(home: &Home, what: &str) -> Result<()> {
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
