//! A Postern home: the directory holding the database, the lock and the socket.

use std::path::{Path, PathBuf};

/// The environment variable that selects a home when `--home` is not given.
pub const HOME_ENV: &str = "POSTERN_HOME";

/// A resolved Postern home directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Home {
    root: PathBuf,
}

/// Why no home could be chosen.
#[derive(Debug, thiserror::Error)]
pub enum HomeError {
    /// Neither `--home`, `POSTERN_HOME` nor a platform data directory is available.
    #[error("no Postern home: pass --home DIR or set POSTERN_HOME")]
    NoDefault,
    /// The home directory could not be created or secured.
    #[error("cannot prepare the Postern home {path}: {source}")]
    Prepare {
        path: PathBuf,
        source: std::io::Error,
    },
}

impl Home {
    /// Chooses the home: `explicit` (from `--home`), else `POSTERN_HOME`, else the
    /// platform's application-data directory (`~/.local/share/postern`,
    /// `~/Library/Application Support/postern`).
    pub fn resolve(explicit: Option<PathBuf>) -> Result<Self, HomeError> {
        let root = explicit
            .or_else(|| {
                std::env::var_os(HOME_ENV)
                    .filter(|v| !v.is_empty())
                    .map(PathBuf::from)
            })
            .or_else(|| dirs::data_dir().map(|d| d.join("postern")))
            .ok_or(HomeError::NoDefault)?;
        Ok(Self { root })
    }

    /// A home at exactly this path.
    pub fn at(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    /// Whether this is the platform's default home, the one `postern` finds without
    /// `--home` or `POSTERN_HOME`.
    pub fn is_default(&self) -> bool {
        dirs::data_dir().is_some_and(|d| d.join("postern") == self.root)
    }

    /// Creates the home (mode 0700) if it does not exist.
    pub fn prepare(&self) -> Result<(), HomeError> {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.root)
            .map_err(|source| HomeError::Prepare {
                path: self.root.clone(),
                source,
            })
    }

    /// The home directory.
    pub fn path(&self) -> &Path {
        &self.root
    }

    /// The private directory holding the socket (mode 0700).
    pub fn run_dir(&self) -> PathBuf {
        self.root.join("run")
    }

    /// The engine's local socket (mode 0600) that shims connect to.
    pub fn socket_path(&self) -> PathBuf {
        self.run_dir().join("engine.sock")
    }

    /// The single-owner lock file.
    pub fn lock_path(&self) -> PathBuf {
        self.root.join("engine.lock")
    }
}
