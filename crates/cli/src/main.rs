//! `postern`: the stdio shim agents launch (`postern mcp <label>`), the headless
//! engine (`postern daemon`), and management commands.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand};
use postern_domain::{EnvVar, ServerConfig, ServerLabel};
use postern_engine::{Engine, Home};
use postern_store::{AddOutcome, Store};
use tracing_subscriber::EnvFilter;

/// Postern: a gate between AI agents and the MCP servers and credentials they use.
#[derive(Debug, Parser)]
#[command(name = "postern", version, about)]
struct Cli {
    /// The Postern home (default: $POSTERN_HOME, else the platform data directory).
    #[arg(long, global = true, value_name = "DIR")]
    home: Option<PathBuf>,
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
        /// The command and its arguments, after `--`.
        #[arg(last = true, required = true, value_name = "COMMAND")]
        command: Vec<String>,
    },
    /// List configured servers.
    List,
    /// Remove a server.
    Remove {
        /// The label to remove.
        label: String,
    },
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("postern: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<()> {
    let home = Home::resolve(cli.home)?;
    match cli.command {
        Command::Mcp { label } => {
            init_logging("warn");
            let label: ServerLabel = label.parse().context("postern mcp")?;
            runtime()?.block_on(postern_gateway::shim::run(
                home.socket_path(),
                label.to_string(),
                tokio::io::stdin(),
                tokio::io::stdout(),
            ));
            Ok(())
        }
        Command::Daemon => {
            init_logging("info");
            runtime()?.block_on(daemon(home))
        }
        Command::Server(cmd) => server(&home, cmd),
    }
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
    home.prepare()?;
    let store = Store::open(home.path())?;
    let mut out = std::io::stdout().lock();
    match cmd {
        ServerCommand::Add { label, cwd, env, command } => {
            let label = ServerLabel::parse_configurable(&label)?;
            let cwd = match cwd {
                Some(dir) => Some(
                    std::fs::canonicalize(&dir)
                        .with_context(|| format!("--cwd {}", dir.display()))?,
                ),
                None => None,
            };
            let env = env.iter().map(|e| e.parse::<EnvVar>()).collect::<Result<Vec<_>, _>>()?;
            let config = ServerConfig::new(label, command, cwd, env)?;
            let verb = match store.add_server(&config)? {
                AddOutcome::Added => "added",
                AddOutcome::Replaced => "replaced",
            };
            writeln!(out, "{verb} server '{}': {}", config.label, shell_words(&config.command))?;
            writeln!(out, "agents reach it with: postern mcp {}", config.label)?;
        }
        ServerCommand::List => {
            let servers = store.servers()?;
            if servers.is_empty() {
                writeln!(out, "no servers configured; add one with: postern server add <label> -- <command> [args...]")?;
            }
            for s in servers {
                let cwd = s.cwd.as_ref().map(|d| format!("  (in {})", d.display())).unwrap_or_default();
                let env = if s.env.is_empty() {
                    String::new()
                } else {
                    format!("  env: {}", s.env.iter().map(|v| v.name.as_str()).collect::<Vec<_>>().join(", "))
                };
                writeln!(out, "{}\t{}{cwd}{env}", s.label, shell_words(&s.command))?;
            }
        }
        ServerCommand::Remove { label } => {
            let label: ServerLabel = label.parse()?;
            if !store.remove_server(&label)? {
                bail!("no server is configured as '{label}'");
            }
            writeln!(out, "removed server '{label}'")?;
        }
    }
    Ok(())
}

/// The command as a shell would need it typed.
fn shell_words(words: &[String]) -> String {
    words
        .iter()
        .map(|w| {
            if !w.is_empty() && w.chars().all(|c| c.is_ascii_alphanumeric() || "-_./=:@+,".contains(c)) {
                w.clone()
            } else {
                format!("'{}'", w.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread().enable_all().build()?)
}

fn init_logging(default: &str) {
    let filter = EnvFilter::try_from_env("POSTERN_LOG").unwrap_or_else(|_| EnvFilter::new(default));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
}
