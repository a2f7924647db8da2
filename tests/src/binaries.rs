//! Finding the binaries under test: `postern` (package `postern-cli`) and the fixture server.
//!
//! `CARGO_BIN_EXE_*` only exists for a package's own binaries, and `postern` lives in another
//! package. So the harness asks cargo for it: under `cargo test`/`cargo run` (which set `CARGO`),
//! it runs `cargo build -p postern-cli --bin postern` once per process and takes the executable
//! path from cargo's JSON messages. That is a no-op when the binary is fresh, and it means a test
//! never runs a stale `postern` left over from an older build. The profile follows the caller's:
//! a release benchmark drives a release `postern`.
//!
//! Overrides: `POSTERN_BIN` / `FIXTURE_SERVER_BIN` name the executables outright (e.g. to test an
//! installed build). Without `CARGO` (a test binary run by hand), the harness falls back to the
//! target directory the running executable lives in.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use anyhow::{Context, Result, bail};
use serde_json::Value;

/// The `postern` executable, built fresh for this process.
pub fn postern() -> Result<PathBuf> {
    static CELL: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    cached(&CELL, "POSTERN_BIN", "postern-cli", "postern")
}

/// The project's fixture MCP server (`tests/src/bin/fixture_server.rs`), built fresh for this
/// process. Fails when the fixture does not exist (yet).
pub fn fixture_server() -> Result<PathBuf> {
    static CELL: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    cached(&CELL, "FIXTURE_SERVER_BIN", "postern-e2e", "fixture_server")
}

/// The workspace root (the directory with the top-level Cargo.toml).
pub fn workspace_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ lives inside the workspace")
}

pub(crate) fn cached(
    cell: &OnceLock<Result<PathBuf, String>>,
    override_var: &str,
    package: &str,
    bin: &str,
) -> Result<PathBuf> {
    cell.get_or_init(|| locate(override_var, package, bin).map_err(|e| format!("{e:#}")))
        .clone()
        .map_err(anyhow::Error::msg)
}

fn locate(override_var: &str, package: &str, bin: &str) -> Result<PathBuf> {
    if let Some(path) = std::env::var_os(override_var) {
        let path = PathBuf::from(path);
        if !path.is_file() {
            bail!("{override_var}={} does not name a file", path.display());
        }
        return Ok(path);
    }
    match std::env::var_os("CARGO") {
        Some(cargo) => build(Path::new(&cargo), package, bin),
        None => beside_current_exe(bin),
    }
}

/// `cargo build -p PACKAGE --bin BIN` in the caller's profile; returns the built executable.
fn build(cargo: &Path, package: &str, bin: &str) -> Result<PathBuf> {
    let mut cmd = Command::new(cargo);
    cmd.current_dir(workspace_root())
        .args(["build", "--quiet", "--message-format=json"])
        .args(["-p", package, "--bin", bin])
        .stdin(Stdio::null());
    if !cfg!(debug_assertions) {
        cmd.arg("--release");
    }
    let out = cmd
        .output()
        .with_context(|| format!("running {} build -p {package}", cargo.display()))?;
    if !out.status.success() {
        bail!(
            "`cargo build -p {package} --bin {bin}` failed ({}):\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    stdout
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|msg| msg["reason"] == "compiler-artifact" && msg["target"]["name"] == bin)
        .find_map(|msg| msg["executable"].as_str().map(PathBuf::from))
        .with_context(|| format!("cargo built {package} but reported no `{bin}` executable"))
}

fn beside_current_exe(bin: &str) -> Result<PathBuf> {
    let exe = std::env::current_exe().context("locating the running executable")?;
    // A test binary lives in target/<profile>/deps/, a binary in target/<profile>/.
    for dir in exe.ancestors().skip(1).take(2) {
        let candidate = dir.join(bin);
        if candidate.is_file() {
            return Ok(candidate);
        }
    }
    bail!(
        "cannot find `{bin}` next to {} and CARGO is not set: run through cargo \
         (`cargo test -p postern-e2e`), or build it and set the path in the environment",
        exe.display()
    )
}
