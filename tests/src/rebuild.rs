//! The rebuildable fixture server (`tests/fixtures/rebuildable`): a Python MCP server on the
//! official SDK, run from a private working copy that a test "rebuilds" by copying a revision's
//! files over it, so the files of a running server change on disk the way a developer's build
//! changes them.
//!
//! A working copy is `<tmp>/app/` (the server's working directory): `server.py` (the entry,
//! revision A at first), `requirements.txt` (its lockfile) and `lib/` (the runtime and a
//! dependency). Side effects of its write tools land in `<tmp>/effects/effects.txt`, outside
//! every watched path (the one directory outside its own the confined server may write).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use anyhow::{Context, Result, bail};
use tempfile::TempDir;

use crate::Gate;
use crate::binaries;
use crate::servers;

/// A private working copy of the fixture, deleted on drop.
#[derive(Debug)]
pub struct Fixture {
    root: PathBuf,
    builds: AtomicUsize,
    _dir: TempDir,
}

impl Fixture {
    /// A working copy at revision A.
    pub fn new() -> Result<Fixture> {
        let dir = tempfile::Builder::new()
            .prefix("postern-rebuildable-")
            .tempdir()
            .context("creating a working copy of the rebuildable fixture")?;
        // Postern reports canonical paths (it canonicalizes --cwd).
        let root = std::fs::canonicalize(dir.path())?;
        let fixture = Fixture {
            root,
            builds: AtomicUsize::new(0),
            _dir: dir,
        };
        let source = source_dir();
        std::fs::create_dir_all(fixture.app())?;
        copy_tree(&source.join("lib"), &fixture.lib())?;
        std::fs::copy(source.join("requirements.txt"), fixture.lockfile())?;
        copy_tree(&source.join("revisions/a"), &fixture.app())?;
        Ok(fixture)
    }

    /// The server's working directory.
    pub fn app(&self) -> PathBuf {
        self.root.join("app")
    }

    /// The entry file (`app/server.py`).
    pub fn entry(&self) -> PathBuf {
        self.app().join("server.py")
    }

    /// The runtime and its dependency (`app/lib`), a tree the entry loads code from.
    pub fn lib(&self) -> PathBuf {
        self.app().join("lib")
    }

    /// The lockfile in the working directory (`app/requirements.txt`).
    pub fn lockfile(&self) -> PathBuf {
        self.app().join("requirements.txt")
    }

    /// Where the write tools record their effects, one line each.
    pub fn effects_path(&self) -> PathBuf {
        self.root.join("effects/effects.txt")
    }

    /// The effects recorded so far.
    pub fn effects(&self) -> Vec<String> {
        std::fs::read_to_string(self.effects_path())
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    /// "Builds" `revision`: every file under `revisions/<revision>/` replaces the file at the
    /// same path in the working copy, each with an atomic rename (as build tools write), so a
    /// watcher never sees half a file. Returns the paths replaced.
    pub fn rebuild(&self, revision: &str) -> Result<Vec<PathBuf>> {
        let from = source_dir().join("revisions").join(revision);
        if !from.is_dir() {
            bail!(
                "the rebuildable fixture has no revision {revision} ({} is missing)",
                from.display()
            );
        }
        let mut replaced = Vec::new();
        for file in files_under(&from)? {
            let rel = file.strip_prefix(&from)?;
            let target = self.app().join(rel);
            // Staged outside app/, so nothing under a watched path appears but the result.
            let n = self.builds.fetch_add(1, Ordering::Relaxed);
            let staged = self.root.join(format!(".build-{n}"));
            std::fs::copy(&file, &staged).with_context(|| format!("staging {}", file.display()))?;
            std::fs::rename(&staged, &target)
                .with_context(|| format!("replacing {}", target.display()))?;
            replaced.push(target);
        }
        Ok(replaced)
    }

    /// Removes the lockfile (for a server that cannot be pinned).
    pub fn remove_lockfile(&self) -> Result<()> {
        std::fs::remove_file(self.lockfile()).context("removing the fixture's lockfile")
    }

    /// `postern server add <label> --cwd app --env FIXTURE_EFFECTS=... <options> -- python
    /// <python_args>`, with the test venv's python (which has the MCP SDK).
    pub fn add(
        &self,
        gate: &Gate,
        label: &str,
        options: &[&str],
        python_args: &[&str],
    ) -> Result<()> {
        self.add_with(gate, label, options, &python()?, python_args)
    }

    /// [`Fixture::add`] with another interpreter.
    pub fn add_with(
        &self,
        gate: &Gate,
        label: &str,
        options: &[&str],
        python: &Path,
        python_args: &[&str],
    ) -> Result<()> {
        let mut args: Vec<OsString> = vec!["server".into(), "add".into(), label.into()];
        args.push("--cwd".into());
        args.push(self.app().into());
        let mut effects = OsString::from("FIXTURE_EFFECTS=");
        effects.push(self.effects_path());
        args.push("--env".into());
        args.push(effects);
        let effects_dir = self.root.join("effects");
        std::fs::create_dir_all(&effects_dir).context("the effects directory")?;
        args.push("--writable".into());
        args.push(effects_dir.into());
        args.extend(options.iter().map(OsString::from));
        args.push("--".into());
        args.push(python.into());
        args.extend(python_args.iter().map(OsString::from));
        gate.cli(args).map(drop)
    }

    /// A gate with the engine's defaults (every new agent run and call asks the person) and
    /// this fixture configured as `label`, its entry run as `server.py`, restarting on its own
    /// file changes when `restart` is `on-change` (or left to the person: `manual`).
    pub async fn gate(&self, label: &str, restart: &str) -> Result<Gate> {
        let gate = Gate::start_prompting(&[]).await?;
        self.add(&gate, label, &["--restart", restart], &["-B", "server.py"])?;
        Ok(gate)
    }
}

/// The test venv's packages (`lib/python3.X/site-packages`), for an interpreter run outside it.
pub fn site_packages() -> Result<PathBuf> {
    let lib = servers::deps_dir().join("venv/lib");
    std::fs::read_dir(&lib)
        .with_context(|| format!("the test venv's {}", lib.display()))?
        .filter_map(|entry| entry.ok().map(|e| e.path().join("site-packages")))
        .find(|dir| dir.is_dir())
        .with_context(|| format!("no site-packages under {}", lib.display()))
}

/// The test venv's python, where `scripts/setup-test-deps.sh` installs the MCP SDK.
pub fn python() -> Result<PathBuf> {
    let python = servers::deps_dir().join("venv/bin/python");
    if !python.is_file() {
        bail!(
            "the rebuildable fixture needs the test venv's python with the MCP SDK ({} is \
             missing).\nInstall the test dependencies with `scripts/setup-test-deps.sh`, then \
             run the tests again.",
            python.display()
        );
    }
    Ok(python)
}

/// `tests/fixtures/rebuildable` in the source tree.
pub fn source_dir() -> PathBuf {
    binaries::workspace_root().join("tests/fixtures/rebuildable")
}

fn files_under(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(dir) = stack.pop() {
        for entry in
            std::fs::read_dir(&dir).with_context(|| format!("reading {}", dir.display()))?
        {
            let path = entry?.path();
            if path.is_dir() {
                if path.file_name().is_some_and(|n| n != "__pycache__") {
                    stack.push(path);
                }
            } else {
                files.push(path);
            }
        }
    }
    files.sort();
    Ok(files)
}

fn copy_tree(from: &Path, to: &Path) -> Result<()> {
    for file in files_under(from)? {
        let target = to.join(file.strip_prefix(from)?);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::copy(&file, &target).with_context(|| format!("copying {}", file.display()))?;
    }
    Ok(())
}
