//! Running a gate's processes as another user. polkit treats uid 0 as always authorized, so
//! the OS-authentication tests (tests/os_auth.rs), which run as root, run the engine, the CLI
//! and their helpers as a dedicated user with a known password (created by
//! `scripts/setup-polkit-test.sh`). Everything those processes execute or write is put where
//! that user can reach it: the gate's temporary directory is given to them, and the binaries
//! under test are copied into it (the build directory may sit under root's home).

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

/// Another user the gate's processes run as.
#[derive(Debug, Clone)]
pub struct RunAs {
    /// The user's name.
    pub name: String,
    /// Their uid.
    pub uid: u32,
    /// Their primary gid.
    pub gid: u32,
    /// Where their processes start and what `HOME` says (the gate's directory, set by
    /// [`RunAs::settle`]).
    home: Option<PathBuf>,
}

impl RunAs {
    /// The user `name`, which must exist.
    pub fn user(name: &str) -> Result<RunAs> {
        let user = nix::unistd::User::from_name(name)
            .with_context(|| format!("looking up user {name}"))?
            .with_context(|| format!("there is no user {name}"))?;
        Ok(RunAs {
            name: name.to_owned(),
            uid: user.uid.as_raw(),
            gid: user.gid.as_raw(),
            home: None,
        })
    }

    /// Gives `dir` (recursively) to this user and makes it their processes' `HOME` and
    /// working directory.
    pub fn settle(&mut self, dir: &Path) -> Result<()> {
        self.give(dir)?;
        self.home = Some(dir.to_owned());
        Ok(())
    }

    /// Gives `path` and everything under it to this user.
    pub fn give(&self, path: &Path) -> Result<()> {
        std::os::unix::fs::chown(path, Some(self.uid), Some(self.gid))
            .with_context(|| format!("chown {}", path.display()))?;
        if path.is_dir() {
            for entry in std::fs::read_dir(path)? {
                self.give(&entry?.path())?;
            }
        }
        Ok(())
    }

    /// Copies the executable `binary` into `dir` (which this user can reach) and returns the
    /// copy's path.
    pub fn install(&self, binary: &Path, dir: &Path) -> Result<PathBuf> {
        let Some(name) = binary.file_name() else {
            bail!("{} names no file", binary.display());
        };
        std::fs::create_dir_all(dir)?;
        let copy = dir.join(name);
        std::fs::copy(binary, &copy)
            .with_context(|| format!("copying {} into {}", binary.display(), dir.display()))?;
        self.give(&copy)?;
        Ok(copy)
    }

    /// Makes `cmd` run as this user, in their `HOME`.
    pub fn apply(&self, cmd: &mut std::process::Command) {
        cmd.uid(self.uid).gid(self.gid);
        for (key, value) in self.env() {
            cmd.env(key, value);
        }
        if let Some(home) = &self.home {
            cmd.current_dir(home);
        }
    }

    /// [`RunAs::apply`] for a tokio command.
    pub fn apply_tokio(&self, cmd: &mut tokio::process::Command) {
        self.apply(cmd.as_std_mut());
    }

    fn env(&self) -> Vec<(OsString, OsString)> {
        let mut env = vec![
            ("USER".into(), self.name.clone().into()),
            ("LOGNAME".into(), self.name.clone().into()),
        ];
        if let Some(home) = &self.home {
            env.push(("HOME".into(), home.clone().into_os_string()));
        }
        env
    }
}
