//! Capturing executable identity at launch (docs/refresh-contract.md §2): resolve the
//! program as the launch will, follow `#!` wrappers to the real interpreter, find the
//! entry file and the lockfiles, hash everything, and say when the result proves less
//! than it seems (unpinned).

use std::collections::HashMap;
use std::ffi::OsStr;
use std::io::Read;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use postern_domain::{Artifact, Digest, Pinning, ServerConfig};

use sha2::{Digest as _, Sha256};

/// Variables every launch gets from the host, over its configuration's: Python writes no
/// bytecode cache beside what it imports, so the caches hashed with a tree stay as they were
/// when a person approved it (Python loads a cached `.pyc` whose header matches its source's
/// size and time, so a planted one is code, and is hashed like any other file).
pub const HOST_ENV: [(&str, &str); 1] = [("PYTHONDONTWRITEBYTECODE", "1")];

/// Extensions of the files an interpreter loads as code, hashed in a server's own source
/// tree.
const CODE_EXTENSIONS: [&str; 20] = [
    "py", "pyc", "pyd", "so", "pth", "js", "mjs", "cjs", "jsx", "ts", "mts", "cts", "tsx", "node",
    "wasm", "rb", "pl", "pm", "php", "dylib",
];
/// Extensions of the files a runtime loads besides code ([`CODE_EXTENSIONS`]): archives it
/// imports from, and configuration that names modules to load.
const RUNTIME_EXTENSIONS: [&str; 4] = ["zip", "egg", "whl", "cnf"];
/// Files hashed in a source tree by name: they say how Node and TypeScript runners resolve
/// and load the package's files (other data the server reads or writes is not its code).
const CODE_NAMES: [&str; 2] = ["package.json", "tsconfig.json"];
/// How many entries a server's source tree may hold: beyond that it is not walked at every
/// launch, and the server is partly pinned (`--identity` names its code instead).
pub const SOURCE_ENTRIES: usize = 20_000;

/// How many entries a runtime's own library may hold: its files are fingerprinted by their
/// metadata at each launch (no content is read), so a developer's runtime with tens of
/// thousands of installed files is covered; beyond this the server is partly pinned.
pub const RUNTIME_ENTRIES: usize = 200_000;

/// The largest file whose content a capture reads: one beyond is fingerprinted by its metadata.
const CONTENT_MAX: u64 = 4 << 30;
/// From this size a file with fewer than half its bytes on disk (a sparse file) is
/// fingerprinted by its metadata.
const SPARSE_FROM: u64 = 64 << 20;

/// Lockfiles looked for in the working directory, in this order.
pub const LOCKFILES: [&str; 9] = [
    "package-lock.json",
    "pnpm-lock.yaml",
    "yarn.lock",
    "bun.lockb",
    "uv.lock",
    "poetry.lock",
    "Pipfile.lock",
    "Cargo.lock",
    "requirements.txt",
];

/// Programs that run an entry file given as an argument.
const INTERPRETERS: [&str; 8] = ["node", "python", "deno", "bun", "ruby", "perl", "php", "uv"];
/// Programs that fetch and run a package by name.
const PACKAGE_RUNNERS: [&str; 6] = ["npx", "uvx", "pipx", "bunx", "pnpx", "npm"];
/// How many `#!` hops are followed before giving up.
const MAX_WRAPPERS: usize = 8;

/// Everything in an execution record that the host observes before launch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observed {
    /// The command with the program resolved to an absolute path.
    pub launch_command: Vec<String>,
    /// The resolved program (what is exec'd): for a version manager's shim, the interpreter
    /// it would choose.
    pub program: PathBuf,
    /// What the shim would have exported before it exec'd the program (`PYENV_VERSION`,
    /// `PATH`): the launch sets it over the configured environment.
    pub selected_env: Vec<(String, String)>,
    /// The real executable at the end of the `#!` chain.
    pub executable: Artifact,
    /// `#!` scripts on the way, outermost first.
    pub wrappers: Vec<Artifact>,
    /// The entry file of an interpreter.
    pub entry: Option<Artifact>,
    /// Lockfiles in the working directory.
    pub lockfiles: Vec<Artifact>,
    /// User-configured identity paths.
    pub extra_paths: Vec<Artifact>,
    /// The interpreter's version line.
    pub runtime: Option<String>,
    /// The resolved working directory.
    pub working_directory: PathBuf,
    /// Names of the environment the process gets, sorted.
    pub env_names: Vec<String>,
    /// The values of the variables that change what loads (`NAME=value`, sorted).
    pub loader_env: Vec<String>,
    /// Pinned or not.
    pub pinning: Pinning,
    /// The sandbox it will run in; `None`: unconfined.
    pub sandbox: Option<postern_domain::Sandbox>,
    /// Fingerprinted trees not watched while the server runs: a runtime's installation (tens
    /// of thousands of directories would take as many of the user's inotify watches); a
    /// change there shows at the next launch.
    pub unwatched: Vec<PathBuf>,
    /// Directories of the unwatched trees watched without what lies below them: where a
    /// runtime reads what runs at its start (its `lib`, standard library and site
    /// directories).
    pub shallow: Vec<PathBuf>,
}

/// Why identity could not be captured (the server is then not launched).
#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    /// The program is not on PATH, or not executable.
    #[error("cannot find `{program}`{where_}")]
    NotFound { program: String, where_: String },
    /// A file could not be read for hashing.
    #[error("cannot hash {path}: {source}")]
    Unreadable {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A link whose meaning depends on the process that opens it.
    #[error(
        "{path} is a link through /proc (such as /proc/self/cwd or /dev/fd), which names one file when Postern looks and another when the server opens it: its code cannot be identified, so the server is not launched. Replace the link with a relative one or a copy"
    )]
    ThroughProc { path: PathBuf },
}

impl IdentityError {
    /// Whether what could not be read is gone: removed since the walk that found it listed
    /// it (a build at work in the tree).
    fn vanished(&self) -> bool {
        matches!(self, IdentityError::Unreadable { source, .. }
            if source.kind() == std::io::ErrorKind::NotFound)
    }
}

/// Digests keyed on file metadata, so a relaunch of an unchanged server costs a few
/// `stat` calls; a file whose metadata changed is always re-hashed.
#[derive(Debug, Default)]
pub struct DigestCache {
    files: Mutex<HashMap<PathBuf, (FileKey, Digest)>>,
    runtimes: Mutex<HashMap<Digest, String>>,
    /// What every confined launch's sandbox is made of (issue 16): its profile is observed
    /// with the rest of the identity.
    sandbox: crate::SandboxHost,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FileKey {
    dev: u64,
    ino: u64,
    size: u64,
    mtime_ns: i128,
    ctime_ns: i128,
}

impl DigestCache {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty cache for launches confined on `host` (the engine's: its home, the user's
    /// home, the relay).
    pub fn with_sandbox(host: crate::SandboxHost) -> Self {
        Self {
            sandbox: host,
            ..Self::default()
        }
    }

    /// The host confined launches are made on.
    pub fn sandbox_host(&self) -> &crate::SandboxHost {
        &self.sandbox
    }

    /// Observes everything about `config` that identity needs, as the launch will see it.
    pub fn observe(&self, config: &ServerConfig) -> Result<Observed, IdentityError> {
        let working_directory = match &config.cwd {
            Some(dir) => dir.clone(),
            None => std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/")),
        };
        let sandbox = crate::sandbox::profile(config, &working_directory, &self.sandbox);
        // A variable as the launch will have it: configured, else the engine's (of which a
        // confined launch keeps a few).
        let launch_var = |name: &str| {
            config
                .env
                .iter()
                .rev()
                .find(|v| v.name == name)
                .map(|v| v.value.clone())
                .or_else(|| {
                    (sandbox.is_none() || crate::sandbox::kept(name))
                        .then(|| std::env::var(name).ok())
                        .flatten()
                })
        };
        let path_var = config
            .env
            .iter()
            .rev()
            .find(|v| v.name == "PATH")
            .map(|v| v.value.clone().into())
            .or_else(|| std::env::var_os("PATH"));
        let program = resolve_program(config.program(), &working_directory, path_var.as_deref())?;
        // A version manager's shim is not what runs: the interpreter it would choose is,
        // launched in its place, and that is what the identity is taken of.
        let confined = sandbox.is_some();
        let selected = shim::select(
            &program,
            config.args(),
            &working_directory,
            confined,
            launch_var,
        );
        let (program, path_var) = match &selected {
            Some(selected) => (
                selected.program.clone(),
                selected
                    .env
                    .iter()
                    .find(|(name, _)| name == "PATH")
                    .map(|(_, value)| value.into())
                    .or(path_var),
            ),
            None => (program, path_var),
        };
        let selected_env = selected.map(|s| s.env).unwrap_or_default();
        // The program, or a file among the arguments, reached through /proc names one file
        // here and another for the server.
        if let Some(path) = std::iter::once(program.clone())
            .chain(config.args().iter().map(|a| working_directory.join(a)))
            .find(|p| p.symlink_metadata().is_ok() && through_proc(p))
        {
            return Err(IdentityError::ThroughProc { path });
        }
        let chain = self.follow_shebangs(&program, &working_directory, path_var.as_deref())?;
        let executable = self.artifact(&chain.current)?;
        let kind = match program_kind(&program) {
            Kind::PackageRunner => Kind::PackageRunner,
            _ if chain.interpreter.is_some()
                || program_kind(&chain.current) == Kind::Interpreter =>
            {
                Kind::Interpreter
            }
            other => other,
        };
        let configured: Vec<(String, String)> = config
            .env
            .iter()
            .map(|v| (v.name.clone(), v.value.clone()))
            .collect();
        let found = Found {
            config,
            cwd: &working_directory,
            kind,
            interpreter_name: chain
                .interpreter
                .as_deref()
                .unwrap_or(&chain.current)
                .file_name()
                .and_then(OsStr::to_str)
                .unwrap_or_default()
                .to_owned(),
            binary: chain.current.clone(),
            launched: chain
                .interpreter
                .clone()
                .unwrap_or_else(|| chain.current.clone()),
            loader_env: loads::loader_env(&configured),
        };
        let loaded = self.loads(&found, chain.entry)?;
        let shell_wrapper = chain.through_shell
            || (chain.wrappers.is_empty() && program_kind(&chain.current) == Kind::Shell);
        let lockfiles = LOCKFILES
            .iter()
            .map(|name| working_directory.join(name))
            .filter(|p| p.is_file())
            .map(|p| self.artifact(&p))
            .collect::<Result<Vec<_>, _>>()?;
        let probe = Probe {
            sandbox: sandbox.as_ref(),
            cwd: &working_directory,
            env: configured.iter().chain(&selected_env).collect(),
            binary: &chain.current,
            digest: executable.digest,
        };
        let runtime = match (&chain.interpreter, kind) {
            (Some(interp), _) => self.runtime_version(interp, &probe),
            (None, Kind::Interpreter) => self.runtime_version(&chain.current, &probe),
            _ => None,
        };
        let environment = chain.interpreter.as_deref().and_then(python_environment);
        let trees = self.code_trees(&found, &loaded, environment.as_deref(), runtime.as_deref())?;
        let pinning = pinning(
            config,
            kind,
            match (shell_wrapper, chain.wrappers.last()) {
                (false, _) => Dispatch::Direct,
                (true, Some(script)) => Dispatch::Script(script),
                (true, None) => Dispatch::Shell,
            },
            &Hashed {
                entry: loaded.entry.as_ref(),
                environment: environment.as_deref(),
                source_too_large: trees.source_too_large.as_deref(),
                runtime_too_large: trees.runtime_too_large.as_deref(),
                lockfile: !lockfiles.is_empty(),
                // The user's own paths: an environment holds packages, not the server's code.
                named: !config.identity_paths.is_empty(),
            },
        );
        let mut env_names = env_names(config, sandbox.is_some());
        env_names.extend(selected_env.iter().map(|(name, _)| name.clone()));
        env_names.sort();
        env_names.dedup();
        let mut launch_command = vec![program.to_string_lossy().into_owned()];
        launch_command.extend(config.args().iter().cloned());
        let loader_env = found.loader_env;
        Ok(Observed {
            sandbox,
            selected_env,
            launch_command,
            program,
            executable,
            wrappers: chain.wrappers,
            entry: loaded.entry,
            lockfiles,
            extra_paths: trees.hashed,
            shallow: trees
                .runtime
                .iter()
                .flat_map(|root| {
                    let mut dirs = vec![root.clone()];
                    dirs.extend(loads::site_dirs(root));
                    dirs.extend(
                        std::fs::read_dir(root)
                            .into_iter()
                            .flatten()
                            .flatten()
                            .map(|e| e.path())
                            .filter(|p| p.join("os.py").is_file())
                            .flat_map(|std| [std.join("encodings"), std]),
                    );
                    dirs
                })
                .collect(),
            unwatched: trees.runtime,
            runtime,
            working_directory,
            env_names,
            loader_env,
            pinning,
        })
    }

    /// Follows `#!` scripts from `program` to the binary that finally runs. A script whose
    /// `#!` names an interpreter is that interpreter's entry; other scripts are wrappers.
    fn follow_shebangs(
        &self,
        program: &Path,
        cwd: &Path,
        path_var: Option<&OsStr>,
    ) -> Result<Chain, IdentityError> {
        let mut chain = Chain {
            wrappers: Vec::new(),
            entry: None,
            interpreter: (program_kind(program) == Kind::Interpreter).then(|| program.to_owned()),
            current: std::fs::canonicalize(program).unwrap_or_else(|_| program.to_owned()),
            through_shell: false,
        };
        while let Some(next_name) = shebang(&chain.current) {
            if chain.wrappers.len() == MAX_WRAPPERS {
                break;
            }
            let script = self.artifact(&chain.current)?;
            let next = resolve_program(&next_name, cwd, path_var)?;
            match program_kind(Path::new(&next_name)) {
                Kind::Interpreter if chain.entry.is_none() && chain.interpreter.is_none() => {
                    chain.entry = Some(script);
                    chain.interpreter = Some(next.clone());
                }
                kind => {
                    chain.through_shell = kind == Kind::Shell;
                    chain.wrappers.push(script);
                }
            }
            chain.current = std::fs::canonicalize(&next).unwrap_or(next);
        }
        Ok(chain)
    }

    /// What an interpreter loads, as it resolves it: the entry after its options (unless a
    /// `#!` script is the entry: it takes the arguments as its own), the files its options
    /// (and NODE_OPTIONS) preload, and where it imports the server's own code from first.
    fn loads(&self, found: &Found<'_>, entry: Option<Artifact>) -> Result<Loads, IdentityError> {
        let mut loaded = Loads {
            entry,
            preloads: Vec::new(),
            source: None,
        };
        if found.kind != Kind::Interpreter {
            return Ok(loaded);
        }
        let config = found.config;
        let node_options = found
            .loader_env
            .iter()
            .find_map(|v| v.strip_prefix("NODE_OPTIONS="));
        let args: &[String] = if loaded.entry.is_some() {
            &[]
        } else {
            config.args()
        };
        match loads::plan(&found.interpreter_name, args, found.cwd, node_options) {
            Some(plan) => {
                if loaded.entry.is_none()
                    && let Some(file) = plan.entry
                {
                    loaded.entry = Some(self.artifact(&file)?);
                }
                loaded.preloads = plan.preloads;
                loaded.source = plan.source;
            }
            None => {
                if loaded.entry.is_none()
                    && let Some(file) = entry_argument(config.args(), found.cwd)
                {
                    loaded.entry = Some(self.artifact(&file)?);
                }
            }
        }
        // The server's own code, where the interpreter imports it from first: the modules
        // beside its entry are as much what runs as the entry is.
        if loaded.source.is_none() {
            loaded.source = loaded
                .entry
                .as_ref()
                .and_then(|e| loads::source_root(&found.interpreter_name, &real(&e.path)));
        }
        Ok(loaded)
    }

    /// The trees and files hashed besides the program, its wrappers, entry and lockfiles: the
    /// configured identity paths, then the interpreter's own environment (a Python virtual
    /// environment's installed packages are code the server loads: a `.pth` file there even
    /// runs at every start), the packages Node resolves from the entry's place and those it
    /// loads from the user's home, the preloaded files and libraries, and last the server's
    /// own source tree; with the source root when it was too large to hash.
    fn code_trees(
        &self,
        found: &Found<'_>,
        loaded: &Loads,
        environment: Option<&Path>,
        runtime: Option<&str>,
    ) -> Result<Trees, IdentityError> {
        let config = found.config;
        let node_tree = found
            .interpreter_name
            .starts_with("node")
            .then(|| {
                loaded
                    .entry
                    .as_ref()
                    .and_then(|e| loads::node_modules(&real(&e.path)))
            })
            .flatten();
        let home = config
            .env
            .iter()
            .rev()
            .find(|v| v.name == "HOME")
            .map(|v| PathBuf::from(&v.value))
            .or_else(|| std::env::var_os("HOME").map(PathBuf::from));
        let user_packages = match found.kind {
            Kind::Interpreter => loads::user_packages(
                &found.interpreter_name,
                &found.binary,
                runtime,
                &found.loader_env,
                home.as_deref(),
            ),
            _ => Vec::new(),
        };
        let trees: Vec<PathBuf> = config
            .identity_paths
            .iter()
            .map(|p| {
                if p.is_absolute() {
                    p.clone()
                } else {
                    found.cwd.join(p)
                }
            })
            .chain(environment.map(Path::to_owned))
            .chain(node_tree)
            .chain(user_packages)
            .collect();
        let extra_paths = trees
            .iter()
            .chain(&loaded.preloads)
            .cloned()
            .chain(loads::preloaded_libraries(&found.loader_env, found.cwd))
            .map(|p| self.artifact(&p))
            .collect::<Result<Vec<_>, _>>()?;
        // What is hashed on its own is not hashed again: a change names the one file.
        let apart: Vec<PathBuf> = trees
            .iter()
            .chain(&loaded.preloads)
            .cloned()
            .chain(
                loaded
                    .entry
                    .iter()
                    .flat_map(|e| [e.path.clone(), real(&e.path)]),
            )
            .collect();
        // A runtime library the user can write to (its code files' metadata), then the
        // server's own source tree, the directories the loader variables put first on the
        // search path and those the `.pth` files of the site directories add (their code).
        let runtime_code = loads::runtime_code(
            &found.launched,
            &found.binary,
            &found.interpreter_name,
            &found.loader_env,
            found.cwd,
        );
        let site_dirs: Vec<PathBuf> = environment
            .into_iter()
            .map(Path::to_owned)
            .chain(runtime_code.roots.iter().cloned())
            .flat_map(|root| loads::site_dirs(&root))
            .chain(
                trees
                    .iter()
                    .filter(|t| t.ends_with("site-packages"))
                    .cloned(),
            )
            .collect();
        let walked = runtime_code
            .roots
            .iter()
            .cloned()
            .map(|root| (root, true))
            .chain(
                loaded
                    .source
                    .iter()
                    .cloned()
                    .chain(loads::search_paths(&found.loader_env, found.cwd))
                    .chain(loads::pth_paths(&site_dirs))
                    .map(|root| (root, false)),
            );
        let mut done: Vec<PathBuf> = Vec::new();
        let mut out = Trees {
            hashed: extra_paths,
            runtime: runtime_code.roots.clone(),
            source_too_large: None,
            runtime_too_large: None,
        };
        for probe in &runtime_code.probes {
            out.hashed.push(Artifact {
                path: probe.clone(),
                digest: presence(probe),
            });
        }
        for (root, of_runtime) in walked {
            if trees.iter().chain(&done).any(|tree| root.starts_with(tree)) {
                continue;
            }
            let digest = if of_runtime {
                runtime_fingerprint(&root)?
            } else if root.is_dir() {
                self.source_digest(&root, &apart, &found.interpreter_name)?
            } else {
                Some(self.artifact(&root)?.digest)
            };
            match digest {
                Some(digest) => {
                    out.hashed.push(Artifact {
                        path: root.clone(),
                        digest,
                    });
                    done.push(root);
                }
                None if of_runtime => {
                    out.runtime_too_large.get_or_insert(root);
                }
                None => {
                    out.source_too_large.get_or_insert(root);
                }
            }
        }
        Ok(out)
    }

    /// The digest of a file, or of a directory as a tree.
    pub fn artifact(&self, path: &Path) -> Result<Artifact, IdentityError> {
        if through_proc(path) {
            return Err(IdentityError::ThroughProc {
                path: path.to_owned(),
            });
        }
        let unreadable = |source| IdentityError::Unreadable {
            path: path.to_owned(),
            source,
        };
        let meta = std::fs::metadata(path).map_err(unreadable)?;
        let digest = if meta.is_dir() {
            self.tree_digest(path)?
        } else {
            self.file_digest(path, &meta)?
        };
        Ok(Artifact {
            path: path.to_owned(),
            digest,
        })
    }

    fn file_digest(&self, path: &Path, meta: &std::fs::Metadata) -> Result<Digest, IdentityError> {
        let key = FileKey {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.size(),
            mtime_ns: i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec()),
            ctime_ns: i128::from(meta.ctime()) * 1_000_000_000 + i128::from(meta.ctime_nsec()),
        };
        if let Some((cached_key, digest)) =
            self.files.lock().ok().and_then(|f| f.get(path).copied())
            && cached_key == key
        {
            return Ok(digest);
        }
        let unreadable = |source| IdentityError::Unreadable {
            path: path.to_owned(),
            source,
        };
        // Never blocking in `open` (a FIFO the server made in its tree would hold the capture
        // for good): what is not a regular file once open counts by its kind alone.
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(nix::fcntl::OFlag::O_NONBLOCK.bits())
            .open(path)
            .map_err(unreadable)?;
        let opened = file.metadata().map_err(unreadable)?;
        if !opened.is_file() {
            use std::os::unix::fs::FileTypeExt;
            let kind = opened.file_type();
            let kind = if kind.is_fifo() {
                "fifo"
            } else if kind.is_socket() {
                "socket"
            } else if kind.is_char_device() {
                "character device"
            } else if kind.is_block_device() {
                "block device"
            } else {
                "directory"
            };
            return Ok(Digest::of(format!("special:{kind}").as_bytes()));
        }
        // A file mostly of holes (a confined server can make one of terabytes in its own
        // directory in an instant, which read would hold every capture for hours) or beyond
        // what a capture reads counts by its metadata, as a runtime's files do: written or
        // replaced, it has a new change time (review 7, N4).
        let size = opened.size();
        if size > CONTENT_MAX || (size > SPARSE_FROM && opened.blocks() * 512 < size / 2) {
            return Ok(Digest::of(format!("stamped:{}", stamp(&opened)).as_bytes()));
        }
        let mut hasher = Sha256::new();
        let mut buf = vec![0u8; 256 * 1024];
        loop {
            let n = file.read(&mut buf).map_err(unreadable)?;
            if n == 0 {
                break;
            }
            hasher.update(&buf[..n]);
        }
        let digest = Digest::from_bytes(hasher.finalize().into());
        if let Ok(mut files) = self.files.lock() {
            files.insert(path.to_owned(), (key, digest));
        }
        Ok(digest)
    }

    /// A tree digest: for every entry under `root` in sorted order, its relative path,
    /// its kind and mode, and its content digest (symlinks by target, not followed). Python's
    /// bytecode caches are hashed too: launches write none ([`HOST_ENV`]), and one planted
    /// there would be loaded.
    fn tree_digest(&self, root: &Path) -> Result<Digest, IdentityError> {
        let entries = walk(root, usize::MAX, |_| Walk::Into)?.unwrap_or_default();
        self.entries_digest(root, entries)
    }

    /// The digest of the server's own code under `root` ([`loads::source_root`]), as
    /// `interpreter` (its file name) would load it: the files it loads as code
    /// ([`CODE_EXTENSIONS`], [`CODE_NAMES`]; for Node also files without an extension, which
    /// it tries before `x.js`), and what links name (a linked file's content, a linked
    /// directory walked), without what is hashed on its own (`skip`: the entry, the trees), a
    /// repository's history, another filesystem, a directory that cannot be read (the server
    /// cannot import from it either), and, for Python, `node_modules` and virtual environments
    /// whose names cannot be imported (`.venv`; a `venv` or `mcp` with a `pyvenv.cfg` in it is
    /// walked like any package). Files the server writes as it runs (a log, a database) are not
    /// its code and are left out. `None` when `root` holds more than [`SOURCE_ENTRIES`]
    /// entries.
    fn source_digest(
        &self,
        root: &Path,
        skip: &[PathBuf],
        interpreter: &str,
    ) -> Result<Option<Digest>, IdentityError> {
        let node = interpreter.starts_with("node");
        let device = std::fs::metadata(root).map(|m| m.dev()).ok();
        // Directories walked, by (device, inode): a link back up the tree is walked once.
        let mut walked = std::collections::HashSet::new();
        let entries = walk(root, SOURCE_ENTRIES, |entry| {
            let path = entry.path();
            let name = entry.file_name();
            if skip.contains(&path) {
                return Walk::Leave;
            }
            // What a link names, as the interpreter opening it sees it; a link that names
            // nothing here is recorded as the link it is (its text).
            let Ok(meta) = std::fs::metadata(&path) else {
                return match entry.file_type() {
                    Ok(kind) if kind.is_symlink() => Walk::Take,
                    _ => Walk::Leave,
                };
            };
            if meta.is_dir() {
                let foreign = device.is_some_and(|d| d != meta.dev());
                let history = name == ".git";
                let unimportable = !node
                    && (name == "node_modules"
                        || (path.join("pyvenv.cfg").is_file()
                            && !name.to_str().is_some_and(importable)));
                return if foreign
                    || history
                    || unimportable
                    || !walked.insert((meta.dev(), meta.ino()))
                {
                    Walk::Leave
                } else {
                    Walk::Through
                };
            }
            let extension = Path::new(&name).extension().and_then(OsStr::to_str);
            let code = CODE_NAMES.iter().any(|n| name == *n)
                || extension.is_some_and(|e| CODE_EXTENSIONS.contains(&e))
                || (node && extension.is_none());
            if code && meta.is_file() {
                Walk::Take
            } else {
                Walk::Leave
            }
        })?;
        entries
            .map(|entries| self.entries_digest(root, entries))
            .transpose()
    }

    /// The digest of `entries` (paths under `root`, sorted): a line each of the relative
    /// path, the mode and the content's digest (a link's target, a directory's kind).
    /// An entry removed between the walk and its hashing counts as never listed: the capture
    /// after the launch's watch began sees the tree as it is then.
    fn entries_digest(&self, root: &Path, entries: Vec<PathBuf>) -> Result<Digest, IdentityError> {
        let mut lines = String::new();
        for path in entries {
            match self.entry_line(root, &path) {
                Ok(line) => lines.push_str(&line),
                Err(e) if e.vanished() => {}
                Err(e) => return Err(e),
            }
        }
        Ok(Digest::of(lines.as_bytes()))
    }

    /// One line of [`Self::entries_digest`].
    fn entry_line(&self, root: &Path, path: &Path) -> Result<String, IdentityError> {
        let rel = path.strip_prefix(root).unwrap_or(path).to_string_lossy();
        let meta = std::fs::symlink_metadata(path).map_err(|source| IdentityError::Unreadable {
            path: path.to_owned(),
            source,
        })?;
        let mode = meta.permissions().mode() & 0o7777;
        let content = if meta.file_type().is_symlink() {
            let target = std::fs::read_link(path)
                .map(|t| t.to_string_lossy().into_owned())
                .unwrap_or_default();
            // A link to a file is what opening it runs: its content counts too.
            match std::fs::metadata(path) {
                Ok(followed) if followed.is_file() => {
                    format!("link:{target}\t{}", self.file_digest(path, &followed)?)
                }
                _ => format!("link:{target}"),
            }
        } else if meta.is_dir() {
            "dir".to_owned()
        } else {
            self.file_digest(path, &meta)?.to_string()
        };
        Ok(format!("{rel}\t{mode:o}\t{content}\n"))
    }

    /// The interpreter's version line, asked as the launch will run it: in its working
    /// directory, with its configured environment, and for a confined launch inside its
    /// sandbox (the interpreter may be a file the server wrote: a `venv/bin/python` in its
    /// directory). An answer is kept for the executable's digest only when that executable
    /// gave it: when the interpreter is the binary hashed (links followed), it is asked by its
    /// real path, which the launch's sandbox cannot write, and the binary is as it was after
    /// the answer. One from a script or a link on the way, or from a binary the server may
    /// replace, is the server's own word, and kept it would be every other server's runtime
    /// with that executable (review 6 F1).
    fn runtime_version(&self, interpreter: &Path, probe: &Probe<'_>) -> Option<String> {
        let direct = std::fs::canonicalize(interpreter).is_ok_and(|real| real == probe.binary);
        let writable = probe
            .sandbox
            .is_some_and(|s| s.writable.iter().any(|w| probe.binary.starts_with(w)));
        // A loader variable of the server's own (`LD_PRELOAD`) runs code of its choosing in
        // the interpreter it asks: that answer is its word too (review 12).
        let own_loader = probe
            .env
            .iter()
            .any(|(name, _)| LOADER_VARIABLES.contains(&name.as_str()));
        let keep = direct && !writable && !own_loader;
        if keep
            && let Some(known) = self
                .runtimes
                .lock()
                .ok()
                .and_then(|r| r.get(&probe.digest).cloned())
        {
            return Some(known);
        }
        let asked = if direct { probe.binary } else { interpreter };
        let before = std::fs::metadata(probe.binary).ok().map(|m| stamp(&m));
        let vars: Vec<(&str, &str)> = probe
            .env
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .chain(HOST_ENV)
            .collect();
        let mut command = match probe.sandbox {
            None => {
                let mut command = std::process::Command::new(asked);
                command.arg("--version").envs(vars);
                command
            }
            Some(sandbox) => {
                let env = crate::sandbox::confined_env(&vars, &[]);
                let args = ["--version".to_owned()];
                let host = &self.sandbox;
                let inside =
                    crate::sandbox::probe(sandbox, host, probe.cwd, asked, &args, &env.inside);
                // When the sandbox cannot be made, the launch fails the same way.
                let (program, args) = inside.ok()?;
                let mut command = std::process::Command::new(program);
                command.args(args).env_clear().envs(env.outside);
                command
            }
        };
        command.current_dir(probe.cwd);
        let version = run_version(command, interpreter)?;
        let after = std::fs::metadata(probe.binary).ok().map(|m| stamp(&m));
        if keep
            && before.is_some()
            && before == after
            && let Ok(mut runtimes) = self.runtimes.lock()
        {
            runtimes.insert(probe.digest, version.clone());
        }
        Some(version)
    }
}

/// How a launch's interpreter is asked its version ([`DigestCache::runtime_version`]).
struct Probe<'a> {
    /// The launch's sandbox, if confined.
    sandbox: Option<&'a postern_domain::Sandbox>,
    /// Its working directory.
    cwd: &'a Path,
    /// Its configured environment, and what a version manager's shim would export.
    env: Vec<&'a (String, String)>,
    /// The binary at the end of its `#!` chain, links followed, and its digest.
    binary: &'a Path,
    digest: Digest,
}

/// The `#!` chain from the program to the binary that finally runs.
struct Chain {
    /// `#!` scripts on the way, outermost first.
    wrappers: Vec<Artifact>,
    /// A `#!` script its interpreter runs as its entry.
    entry: Option<Artifact>,
    /// The interpreter, as launched (before links are followed).
    interpreter: Option<PathBuf>,
    /// The binary at the end, links followed.
    current: PathBuf,
    /// The last hand-over was a shell's.
    through_shell: bool,
}

/// What the phases of [`DigestCache::observe`] after the `#!` chain work from.
struct Found<'a> {
    config: &'a ServerConfig,
    cwd: &'a Path,
    kind: Kind,
    /// The interpreter's file name (`node`, `python3.11`), or the binary's.
    interpreter_name: String,
    /// The binary that runs, links followed.
    binary: PathBuf,
    /// The interpreter as launched (before links are followed), or the binary.
    launched: PathBuf,
    /// The values of the variables that change what loads.
    loader_env: Vec<String>,
}

/// The trees [`DigestCache::code_trees`] hashed, and those too large to hash.
struct Trees {
    hashed: Vec<Artifact>,
    /// The runtime's trees among them.
    runtime: Vec<PathBuf>,
    /// Server code (its source tree, a search path) with more than [`SOURCE_ENTRIES`] entries.
    source_too_large: Option<PathBuf>,
    /// A runtime library the user can write to, with more than [`SOURCE_ENTRIES`] entries.
    runtime_too_large: Option<PathBuf>,
}

/// What an interpreter loads besides its own binary.
struct Loads {
    entry: Option<Artifact>,
    /// Files it loads before the entry.
    preloads: Vec<PathBuf>,
    /// Where it imports the server's own code from first.
    source: Option<PathBuf>,
}

/// The names of the environment a launch of `config` gets, sorted: the engine's variables
/// (for a `sandboxed` launch the few it keeps), the configured ones, each bound credential's
/// (part of the identity whether or not a launch is given its value: releasing it never makes
/// the code look different), and the host's own ([`HOST_ENV`]).
fn env_names(config: &ServerConfig, sandboxed: bool) -> Vec<String> {
    let mut names: Vec<String> = std::env::vars_os()
        .map(|(k, _)| k.to_string_lossy().into_owned())
        .filter(|name| !sandboxed || crate::sandbox::kept(name))
        .chain(config.env.iter().map(|v| v.name.clone()))
        .chain(
            config
                .credentials
                .iter()
                .filter_map(|c| c.env_var().map(str::to_owned)),
        )
        .chain(HOST_ENV.iter().map(|(name, _)| (*name).to_owned()))
        .collect();
    names.sort();
    names.dedup();
    names
}

/// What a file that matters by being there at all (a `pyvenv.cfg`) is now: its metadata, as
/// [`runtime_fingerprint`] takes a file's, or its absence.
fn presence(path: &Path) -> Digest {
    // A link is stamped with what it names too: that is what CPython reads.
    let stamps: Vec<String> = [std::fs::symlink_metadata(path), std::fs::metadata(path)]
        .iter()
        .map(|meta| meta.as_ref().map_or_else(|_| "absent".to_owned(), stamp))
        .collect();
    Digest::of(stamps.join("\n").as_bytes())
}

/// What a file's metadata says of its content: mode, inode, size, modification and change
/// times. Writing or replacing the file gives it a new change time, which no process but
/// root's can set back.
fn stamp(meta: &std::fs::Metadata) -> String {
    format!(
        "{:o}\t{}\t{}\t{}.{}\t{}.{}",
        meta.mode(),
        meta.ino(),
        meta.size(),
        meta.mtime(),
        meta.mtime_nsec(),
        meta.ctime(),
        meta.ctime_nsec()
    )
}

/// The fingerprint of a runtime's own library under `root`: for each code file
/// ([`CODE_EXTENSIONS`], [`CODE_NAMES`]) and link, in sorted order, its relative path, mode,
/// inode, size and modification and change times, and a link's target. No content is read: a
/// file written or replaced gets a new change time, which no process but root's can set back,
/// so a planted or edited file shows as surely as by its content, for the price of one `stat`
/// per file. `None` beyond [`RUNTIME_ENTRIES`] entries.
fn runtime_fingerprint(root: &Path) -> Result<Option<Digest>, IdentityError> {
    let entries = walk(root, RUNTIME_ENTRIES, |entry| {
        let Ok(kind) = entry.file_type() else {
            return Walk::Leave;
        };
        let name = entry.file_name();
        let extension = Path::new(&name).extension().and_then(OsStr::to_str);
        // Versioned shared libraries (`libpython3.11.so.1.0`), archives on the import path
        // (`python311.zip`, eggs, wheels), OpenSSL's configuration (it can load a module).
        let loaded = name
            .to_str()
            .is_some_and(|n| n.contains(".so.") || n == "pyvenv.cfg")
            || extension.is_some_and(|e| RUNTIME_EXTENSIONS.contains(&e));
        // Directories are recorded too (a file created and removed again leaves its directory
        // a new change time), and linked ones walked (Homebrew links `site-packages`).
        if kind.is_dir() || (kind.is_symlink() && entry.path().is_dir()) {
            Walk::Follow
        } else if kind.is_symlink()
            || loaded
            || CODE_NAMES.iter().any(|n| name == *n)
            || extension.is_some_and(|e| CODE_EXTENSIONS.contains(&e))
        {
            Walk::Take
        } else {
            Walk::Leave
        }
    })?;
    let Some(entries) = entries else {
        return Ok(None);
    };
    let mut lines = String::new();
    for path in entries {
        let meta = match std::fs::symlink_metadata(&path) {
            Ok(meta) => meta,
            // Removed since the walk listed it: as if it had not been there.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(source) => return Err(IdentityError::Unreadable { path, source }),
        };
        let rel = path.strip_prefix(root).unwrap_or(&path).to_string_lossy();
        let target = if meta.file_type().is_symlink() {
            std::fs::read_link(&path)
                .map(|t| t.to_string_lossy().into_owned())
                .unwrap_or_default()
        } else {
            String::new()
        };
        lines.push_str(&format!("{rel}\t{}\t{target}\n", stamp(&meta)));
    }
    Ok(Some(Digest::of(lines.as_bytes())))
}

/// `path` with its links followed: Python puts the directory of the script's real path first
/// on its import path, and Node resolves a module from its real path.
fn real(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_owned())
}

/// Whether Python can import a directory named `name` (an identifier).
fn importable(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c == '_' || c.is_alphabetic())
        && chars.all(|c| c == '_' || c.is_alphanumeric())
}

/// Whether this process owns `path` (and so could open it to anyone, or put code in it).
fn ours(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|meta| meta.uid() == nix::unistd::geteuid().as_raw())
}

/// What a tree walk does with an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Walk {
    /// Hash it, and walk it when it is a directory.
    Into,
    /// Walk it, a directory, without hashing it: only what it holds counts.
    Through,
    /// Hash it (a file or a link).
    Take,
    /// Neither.
    Leave,
    /// Hash it (its own stamp, a link's target) and walk what it names when that is a
    /// directory, links followed, each directory once.
    Follow,
}

/// Whether resolving `path` goes through `/proc` (directly, or by a link on the way:
/// `/proc/self/cwd`, `/dev/fd`, `/dev/stdin`): what such a path names depends on the process
/// that opens it (`/proc/self/cwd` is the engine's working directory when the engine looks,
/// the server's when the server opens it). Each link on the way is read as the kernel follows
/// it, up to 40 of them.
fn through_proc(path: &Path) -> bool {
    use std::path::Component;
    let mut todo: Vec<std::ffi::OsString> = Vec::new();
    let push = |todo: &mut Vec<std::ffi::OsString>, path: &Path| {
        for part in path.components().rev() {
            match part {
                Component::Normal(name) => todo.push(name.to_owned()),
                Component::ParentDir => todo.push("..".into()),
                Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
            }
        }
    };
    let mut at = if path.is_absolute() {
        PathBuf::from("/")
    } else {
        std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"))
    };
    push(&mut todo, path);
    let mut links = 0;
    while let Some(part) = todo.pop() {
        if part == ".." {
            at.pop();
            continue;
        }
        let next = at.join(&part);
        if next.starts_with("/proc") {
            return true;
        }
        match std::fs::read_link(&next) {
            Ok(target) if links < 40 => {
                links += 1;
                if target.is_absolute() {
                    at = PathBuf::from("/");
                }
                push(&mut todo, &target);
            }
            _ => at = next,
        }
    }
    false
}

/// The entries under `root` that `choose` takes, sorted; `None` once more than `limit`
/// entries were looked at. A link on the way through `/proc` ([`through_proc`]) is refused.
fn walk(
    root: &Path,
    limit: usize,
    mut choose: impl FnMut(&std::fs::DirEntry) -> Walk,
) -> Result<Option<Vec<PathBuf>>, IdentityError> {
    if through_proc(root) {
        return Err(IdentityError::ThroughProc {
            path: root.to_owned(),
        });
    }
    let mut stack = vec![root.to_owned()];
    let mut entries = Vec::new();
    let mut seen = 0usize;
    // Directories followed into, by (device, inode): a link back up is walked once.
    let mut followed: std::collections::HashSet<(u64, u64)> = std::fs::metadata(root)
        .map(|m| (m.dev(), m.ino()))
        .into_iter()
        .collect();
    while let Some(dir) = stack.pop() {
        let unreadable = |source| IdentityError::Unreadable {
            path: dir.clone(),
            source,
        };
        let listing = match std::fs::read_dir(&dir) {
            Ok(listing) => listing,
            // A directory below the root that cannot be read, another user's: nothing in it is
            // ours to change. One of ours is refused: CPython imports from a directory it may
            // search and not list (`chmod 311`), so what it holds would go unseen.
            Err(e)
                if dir != root
                    && e.kind() == std::io::ErrorKind::PermissionDenied
                    && !ours(&dir) =>
            {
                continue;
            }
            // A directory below the root removed since its parent was listed (a build at
            // work): as if it had not been there.
            Err(e) if dir != root && e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(unreadable(e)),
        };
        for entry in listing {
            let entry = entry.map_err(unreadable)?;
            seen += 1;
            if seen > limit {
                return Ok(None);
            }
            if entry.file_type().is_ok_and(|t| t.is_symlink()) && through_proc(&entry.path()) {
                return Err(IdentityError::ThroughProc { path: entry.path() });
            }
            match choose(&entry) {
                Walk::Into => {
                    if entry.file_type().is_ok_and(|t| t.is_dir()) {
                        stack.push(entry.path());
                    }
                    entries.push(entry.path());
                }
                Walk::Through => stack.push(entry.path()),
                Walk::Take => entries.push(entry.path()),
                Walk::Follow => {
                    let path = entry.path();
                    if std::fs::metadata(&path)
                        .is_ok_and(|m| m.is_dir() && followed.insert((m.dev(), m.ino())))
                    {
                        stack.push(path.clone());
                    }
                    entries.push(path);
                }
                Walk::Leave => {}
            }
        }
    }
    entries.sort();
    Ok(Some(entries))
}

mod loads;
mod pinning;
mod program;
mod shim;
pub(crate) use loads::LOADER_VARIABLES;
use pinning::{Dispatch, Hashed, pinning};
use program::{
    Kind, entry_argument, program_kind, python_environment, resolve_program, run_version, shebang,
};

#[cfg(test)]
mod tests;
