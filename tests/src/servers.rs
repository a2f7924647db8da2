//! The MCP servers the tests run, and how to launch each one directly.
//!
//! The third-party servers are installed by `scripts/setup-test-deps.sh` into `tests/.deps`
//! (gitignored). When one is missing the test fails, saying how to install it: a test that is
//! skipped because its peer is absent would pass without testing anything.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use anyhow::{Result, bail};

use crate::binaries;

/// A command that starts an MCP server on stdio.
#[derive(Debug, Clone)]
pub struct ServerCommand {
    /// The program (an absolute path).
    pub program: PathBuf,
    /// Its arguments.
    pub args: Vec<OsString>,
}

impl ServerCommand {
    /// A `tokio` command that starts this server, for a direct client.
    pub fn command(&self) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new(&self.program);
        cmd.args(&self.args);
        cmd
    }

    /// The words after `--` in `postern server add <label> -- ...`.
    pub fn argv(&self) -> Vec<OsString> {
        let mut argv = vec![self.program.clone().into_os_string()];
        argv.extend(self.args.iter().cloned());
        argv
    }
}

/// `@modelcontextprotocol/server-everything` in stdio mode (`node .../dist/index.js stdio`).
pub fn everything() -> Result<ServerCommand> {
    let script =
        deps_dir().join("node/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    require(&script, "@modelcontextprotocol/server-everything")?;
    Ok(ServerCommand {
        program: find_on_path("node")?,
        args: vec![script.into_os_string(), "stdio".into()],
    })
}

/// `mcp-server-time` from PyPI, in the test venv, with its zone pinned to UTC.
pub fn time() -> Result<ServerCommand> {
    let program = deps_dir().join("venv/bin/mcp-server-time");
    require(&program, "mcp-server-time")?;
    Ok(ServerCommand {
        program,
        args: vec!["--local-timezone".into(), "UTC".into()],
    })
}

/// The project's own fixture server (`target/<profile>/fixture_server`).
pub fn fixture() -> Result<ServerCommand> {
    fixture_with(&[])
}

/// The fixture server with arguments (e.g. [`crate::fixture::TWO_FACED`]).
pub fn fixture_with(args: &[&str]) -> Result<ServerCommand> {
    Ok(ServerCommand {
        program: binaries::fixture_server()?,
        args: args.iter().map(Into::into).collect(),
    })
}

/// `tests/.deps`, where the setup script installs the third-party servers.
pub fn deps_dir() -> PathBuf {
    binaries::workspace_root().join("tests/.deps")
}

fn require(path: &Path, what: &str) -> Result<()> {
    if path.is_file() {
        return Ok(());
    }
    bail!(
        "the end-to-end test peer {what} is not installed ({} is missing).\n\
         Install the test dependencies with `scripts/setup-test-deps.sh` \
         (`scripts/test.sh` runs it for you), then run the tests again.",
        path.display()
    )
}

/// Resolves a program name on PATH to an absolute path, so the engine launches exactly the
/// program the direct comparison launched.
pub fn find_on_path(name: &str) -> Result<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    for dir in std::env::split_paths(&path) {
        let candidate = dir.join(name);
        if candidate.is_file() {
            return Ok(candidate);
        }
    }
    bail!(
        "`{name}` is not on PATH; the end-to-end tests need it \
         (run `scripts/setup-test-deps.sh`, which installs it on Debian/Ubuntu)"
    )
}
