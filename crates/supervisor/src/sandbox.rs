//! Confinement (issue 16): each launch of a confined server runs in an OS sandbox whose profile
//! is part of its identity ([`postern_domain::Sandbox`], in the execution record).
//!
//! On Linux the sandbox is bubblewrap: new user, PID, IPC, UTS and network namespaces, every
//! capability dropped, the system read-only, a private `/tmp`, writes only to the server's
//! directory and its configured caches, the credential paths under the user's home, the
//! Postern home and the session bus's directory replaced by empty ones, the Unix sockets
//! listening at launch covered. Its network namespace has loopback only: the way out is the
//! egress broker's Unix socket, which a relay inside (`postern sandbox-run`, [`run_relayed`])
//! serves on the loopback port the proxy variables name. On macOS it is `sandbox-exec` with a
//! generated profile (compile-checked, untested).

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use postern_domain::{Confinement, ExecutionRecord, Sandbox, ServerConfig};

/// Paths under the user's home that hold credentials or sessions: a confined server never
/// sees them.
pub const CREDENTIAL_PATHS: &[&str] = &[
    ".ssh",
    ".aws",
    ".gnupg",
    ".azure",
    ".kube",
    ".docker",
    ".config/gcloud",
    ".config/gh",
    ".config/op",
    ".config/git/credentials",
    ".config/rclone",
    ".config/containers/auth.json",
    ".config/sops",
    ".config/age",
    ".local/share/keyrings",
    ".local/share/kwalletd",
    ".password-store",
    ".netrc",
    ".git-credentials",
    ".npmrc",
    ".pypirc",
    ".pgpass",
    ".vault-token",
    ".terraform.d",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    // Agents' own sessions and keys, and password managers' agent sockets.
    ".claude",
    ".claude.json",
    ".codex",
    ".gemini",
    ".1password",
    ".bitwarden-ssh-agent.sock",
    // Sockets of the user's own daemons kept in the home: container engines (a socket there is
    // root on the machine, or the user's every container), terminal multiplexers, sound.
    ".colima",
    ".lima",
    ".rd",
    ".orbstack",
    ".screen",
    ".config/pulse",
    ".emacs.d/server",
    // What a person typed, and where browsers keep their sessions.
    ".bash_history",
    ".zsh_history",
    ".local/share/fish",
    ".python_history",
    ".mozilla",
    ".config/google-chrome",
    ".config/chromium",
    ".config/BraveSoftware",
    ".var/app",
    "Library/Keychains",
    "Library/Application Support/Google/Chrome",
    "Library/Application Support/Firefox",
];

/// gnome-keyring's control directories in the user's cache, a name pattern: each directory
/// of that name there at launch is hidden.
const KEYRING_CONTROL: &str = "keyring-*";

/// Variables that move a credential path away from the home: what they name is hidden too.
/// (`XDG_CONFIG_HOME` and `XDG_DATA_HOME` move the `.config/` and `.local/share/` entries.)
const RELOCATING: &[&str] = &[
    "GNUPGHOME",
    "KUBECONFIG",
    "DOCKER_CONFIG",
    "AWS_SHARED_CREDENTIALS_FILE",
    "AWS_CONFIG_FILE",
    "PASSWORD_STORE_DIR",
    "CLAUDE_CONFIG_DIR",
    "CODEX_HOME",
];

/// The engine's variables a confined launch keeps: what programs need to run and format. The
/// rest (tokens in the environment, an agent's socket, the session bus's address) stay out;
/// the server's configured variables and released credentials come on top.
const KEPT_ENV: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "TERM",
    "TZ",
    "XDG_CONFIG_HOME",
    "XDG_CACHE_HOME",
    "XDG_DATA_HOME",
];

/// How the network looks from inside, in words (the profile's `network`).
const NETWORK: &str = "only through the egress broker";

/// What the host knows that every confined launch needs: set once by the engine.
#[derive(Debug, Clone, Default)]
pub struct SandboxHost {
    /// The Postern home: hidden.
    pub postern_home: Option<PathBuf>,
    /// The user's home, whose [`CREDENTIAL_PATHS`] are hidden.
    pub user_home: Option<PathBuf>,
    /// The user's cache (`XDG_CACHE_HOME`, else `~/.cache`), whose keyring control
    /// directories are hidden.
    pub user_cache: Option<PathBuf>,
    /// The `postern` executable, whose `sandbox-run` relays the broker inside (Linux).
    pub relay: Option<PathBuf>,
    /// Hidden paths a launch reads all the same (the broker's trust store and Node preload,
    /// kept in the Postern home): shown read-only.
    pub exposed: Vec<PathBuf>,
}

impl SandboxHost {
    /// The host as this process sees it: `HOME`, and the `postern` program at `relay`.
    pub fn new(postern_home: &Path, relay: Option<PathBuf>) -> Self {
        Self {
            postern_home: Some(postern_home.to_owned()),
            user_home: std::env::var_os("HOME").map(PathBuf::from),
            user_cache: std::env::var_os("XDG_CACHE_HOME")
                .map(PathBuf::from)
                .or_else(|| {
                    std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache"))
                }),
            relay,
            exposed: Vec::new(),
        }
    }
}

/// A launch's way out: the broker's loopback port (which the proxy variables name) and the
/// Unix socket that reaches the same broker from inside a network namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WayOut {
    /// The port the launch's proxy variables name.
    pub port: u16,
    /// The broker's socket for this launch.
    pub socket: PathBuf,
}

/// The sandbox `config`'s launch runs in on this platform; `None` when it is unconfined.
/// Its working directory is `cwd` (the record's).
pub fn profile(config: &ServerConfig, cwd: &Path, host: &SandboxHost) -> Option<Sandbox> {
    if config.confinement == Confinement::Unconfined {
        return None;
    }
    let tool = if cfg!(target_os = "macos") {
        "sandbox-exec"
    } else {
        "bubblewrap"
    };
    let mut hidden: Vec<PathBuf> = Vec::new();
    if let Some(home) = &host.user_home {
        hidden.extend(CREDENTIAL_PATHS.iter().map(|p| home.join(p)));
    }
    hidden.extend(relocated(CREDENTIAL_PATHS, |name| std::env::var_os(name)));
    hidden.extend(host.postern_home.iter().cloned());
    hidden.extend(runtime_dir());
    if cfg!(target_os = "linux") {
        // The system bus (polkit, logind): nothing a server needs.
        hidden.push(PathBuf::from("/run/dbus"));
        // gnome-keyring's control socket when it started without a runtime directory (a
        // headless machine, an SSH session): a way to test the login password and to stop
        // the keyring. The cache beside it (uv's, a browser download's) stays readable.
        hidden.extend(
            host.user_cache
                .as_ref()
                .map(|cache| cache.join(KEYRING_CONTROL)),
        );
    }
    hidden.sort();
    hidden.dedup();
    let cwd = normalized(cwd);
    let home = host.user_home.as_deref();
    let writable: Vec<PathBuf> = std::iter::once(cwd.clone())
        .chain(configured_writable(config, &cwd))
        .filter(|p| unwritable(p, home).is_none())
        .collect();
    Some(Sandbox {
        tool: tool.to_owned(),
        hidden,
        writable,
        network: NETWORK.to_owned(),
    })
}

/// The `--writable` paths of `config`, under its directory `cwd`, lexically normal.
fn configured_writable<'a>(
    config: &'a ServerConfig,
    cwd: &'a Path,
) -> impl Iterator<Item = PathBuf> + 'a {
    config.writable.iter().map(|p| normalized(&cwd.join(p)))
}

/// The first of `config`'s `--writable` paths a confined server may not write, and why
/// ([`unwritable`]): `server add` refuses it (a launch leaves it out).
pub fn refused_writable(
    config: &ServerConfig,
    user_home: Option<&Path>,
) -> Option<(PathBuf, &'static str)> {
    if config.confinement == Confinement::Unconfined {
        return None;
    }
    let cwd = config.cwd.clone().unwrap_or_default();
    configured_writable(config, &cwd).find_map(|p| unwritable(&p, user_home).map(|why| (p, why)))
}

/// Refuses a launch whose directory or writable paths lie in a hidden tree (a server kept in
/// the Postern home or under `~/.ssh`): inside, it would find an empty directory.
fn outside_hidden(sandbox: &Sandbox, cwd: &Path) -> Result<(), String> {
    let cwd = normalized(cwd);
    for path in std::iter::once(&cwd).chain(&sandbox.writable) {
        if let Some(hidden) = sandbox.hidden.iter().find(|h| path.starts_with(h)) {
            return Err(format!(
                "{} is inside {}, which a confined server cannot see (the Postern home, a credential path or the session's runtime directory): keep the server's files elsewhere, or mark it unconfined (`postern server add --unconfined ...`)",
                path.display(),
                hidden.display()
            ));
        }
    }
    Ok(())
}

/// What a confined launch was denied, in words, for an error when it fails.
pub fn denied(sandbox: &Sandbox) -> String {
    let writable: Vec<String> = sandbox
        .writable
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    format!(
        "it runs confined ({}): it cannot see credential paths such as ~/.ssh, the Postern home or the session bus{}, it may write only to {} and a private /tmp, and it reaches the network {}. If it needs more, add `--writable PATH`, or mark it unconfined (`postern server add --unconfined ...`)",
        sandbox.tool,
        if cfg!(target_os = "macos") {
            ""
        } else {
            " and is kept from the Unix sockets listening when it started"
        },
        if writable.is_empty() {
            "nothing of yours".to_owned()
        } else {
            writable.join(", ")
        },
        sandbox.network
    )
}

/// The program and arguments that run `program args` in `sandbox` for `record`'s launch.
pub(crate) fn command(
    sandbox: &Sandbox,
    record: &ExecutionRecord,
    host: &SandboxHost,
    way_out: Option<&WayOut>,
    program: &Path,
    args: &[String],
    setenv: &[(String, String)],
) -> Result<(PathBuf, Vec<OsString>), String> {
    let inside = Inside {
        cwd: &record.working_directory,
        setenv,
        shown: shown(record),
    };
    confined(sandbox, &inside, host, way_out, program, args)
}

/// The program and arguments that run `program args` in `sandbox` as a launch in `cwd` would
/// run, with no way out: how the engine asks a confined server's interpreter its version
/// before the launch. The interpreter may be a file the server wrote at an earlier launch (its
/// directory is writable), and what a confined server writes never runs outside its sandbox.
pub(crate) fn probe(
    sandbox: &Sandbox,
    host: &SandboxHost,
    cwd: &Path,
    program: &Path,
    args: &[String],
    setenv: &[(String, String)],
) -> Result<(PathBuf, Vec<OsString>), String> {
    let dirs = [
        program.to_owned(),
        std::fs::canonicalize(program).unwrap_or_default(),
    ]
    .into_iter()
    .filter_map(|p| p.parent().map(Path::to_owned))
    .chain([cwd.to_owned()]);
    let inside = Inside {
        cwd,
        setenv,
        shown: showing(dirs),
    };
    confined(sandbox, &inside, host, None, program, args)
}

/// Where a command runs inside a sandbox: its working directory, and what under a private
/// directory is shown to it again ([`shown`]).
struct Inside<'a> {
    cwd: &'a Path,
    /// Variables set inside with `--setenv` ([`ConfinedEnv::inside`]).
    #[cfg_attr(
        target_os = "macos",
        expect(dead_code, reason = "sandbox-exec passes its environment on as it is")
    )]
    setenv: &'a [(String, String)],
    #[cfg_attr(
        target_os = "macos",
        expect(dead_code, reason = "sandbox-exec hides no directory to show again")
    )]
    shown: Vec<PathBuf>,
}

#[cfg(target_os = "macos")]
fn confined(
    sandbox: &Sandbox,
    inside: &Inside<'_>,
    _host: &SandboxHost,
    way_out: Option<&WayOut>,
    program: &Path,
    args: &[String],
) -> Result<(PathBuf, Vec<OsString>), String> {
    outside_hidden(sandbox, inside.cwd)?;
    Ok(macos::command(sandbox, way_out, program, args))
}

#[cfg(not(target_os = "macos"))]
fn confined(
    sandbox: &Sandbox,
    inside: &Inside<'_>,
    host: &SandboxHost,
    way_out: Option<&WayOut>,
    program: &Path,
    args: &[String],
) -> Result<(PathBuf, Vec<OsString>), String> {
    let bwrap = find("bwrap").ok_or_else(|| {
        "a confined server runs in bubblewrap, which is not installed: install it (Debian/Ubuntu: `apt-get install bubblewrap`), or mark the server unconfined (`postern server add --unconfined ...`)".to_owned()
    })?;
    outside_hidden(sandbox, inside.cwd)?;
    resolved(sandbox)?;
    let sockets = reachable_sockets(sandbox, inside, way_out)?;
    let mut argv = bubblewrap(sandbox, inside, host, way_out, &sockets);
    if let (Some(way), Some(relay)) = (way_out, &host.relay) {
        argv.extend(
            [
                relay.as_os_str(),
                "sandbox-run".as_ref(),
                "--port".as_ref(),
                way.port.to_string().as_ref(),
                "--socket".as_ref(),
                way.socket.as_os_str(),
                "--".as_ref(),
            ]
            .map(OsString::from),
        );
    }
    argv.push(program.into());
    argv.extend(args.iter().map(OsString::from));
    Ok((bwrap, argv))
}

/// bubblewrap's options for a command run `inside`, up to the command, with the machine's
/// `sockets` covered ([`reachable_sockets`]).
#[cfg(not(target_os = "macos"))]
fn bubblewrap(
    sandbox: &Sandbox,
    inside: &Inside<'_>,
    host: &SandboxHost,
    way_out: Option<&WayOut>,
    sockets: &[PathBuf],
) -> Vec<OsString> {
    let mut argv: Vec<OsString> = Vec::new();
    let mut add = |words: &[&std::ffi::OsStr]| argv.extend(words.iter().map(OsString::from));
    add(&[
        "--unshare-all".as_ref(),
        "--die-with-parent".as_ref(),
        "--new-session".as_ref(),
        "--cap-drop".as_ref(),
        "ALL".as_ref(),
        "--ro-bind".as_ref(),
        "/".as_ref(),
        "/".as_ref(),
        "--dev".as_ref(),
        "/dev".as_ref(),
        "--proc".as_ref(),
        "/proc".as_ref(),
    ]);
    for private in PRIVATE_DIRS {
        if Path::new(private).is_dir() {
            add(&["--tmpfs".as_ref(), private.as_ref()]);
        }
    }
    // What the record names under a private directory (a server kept in /tmp) is shown
    // read-only again: its files, their directories, its environment's trees.
    for path in &inside.shown {
        add(&["--ro-bind-try".as_ref(), path.as_os_str(), path.as_os_str()]);
    }
    for path in &sandbox.writable {
        add(&["--bind-try".as_ref(), path.as_os_str(), path.as_os_str()]);
    }
    // A hidden path or a covered socket below a writable one: each directory between them is
    // a mount point too, so the server cannot rename the path's parent away (and find it
    // uncovered at its next launch, with its own files in its place, or the socket reachable
    // once it renames the directory back).
    for dir in between(&sandbox.writable, sandbox.hidden.iter().chain(sockets)) {
        add(&["--bind-try".as_ref(), dir.as_os_str(), dir.as_os_str()]);
    }
    for path in sandbox.hidden.iter().flat_map(|path| matching(path)) {
        let path = &path;
        // A link is followed: what it names is hidden (bubblewrap mounts over the target).
        let target = match std::fs::symlink_metadata(path) {
            Ok(meta) if meta.file_type().is_symlink() => std::fs::canonicalize(path).ok(),
            Ok(_) => Some(path.clone()),
            Err(_) => None,
        };
        let Some(target) = target else { continue };
        let Ok(meta) = std::fs::metadata(&target) else {
            continue;
        };
        if meta.is_dir() {
            add(&["--tmpfs".as_ref(), target.as_os_str()]);
        } else {
            add(&[
                "--ro-bind".as_ref(),
                "/dev/null".as_ref(),
                target.as_os_str(),
            ]);
        }
    }
    for path in &host.exposed {
        add(&["--ro-bind-try".as_ref(), path.as_os_str(), path.as_os_str()]);
    }
    for socket in sockets {
        add(&[
            "--ro-bind".as_ref(),
            "/dev/null".as_ref(),
            socket.as_os_str(),
        ]);
    }
    if let Some(way) = way_out {
        add(&[
            "--bind".as_ref(),
            way.socket.as_os_str(),
            way.socket.as_os_str(),
        ]);
        if let Some(relay) = &host.relay {
            add(&[
                "--ro-bind-try".as_ref(),
                relay.as_os_str(),
                relay.as_os_str(),
            ]);
        }
    }
    for (name, value) in inside.setenv {
        add(&["--setenv".as_ref(), name.as_ref(), value.as_ref()]);
    }
    add(&["--chdir".as_ref(), inside.cwd.as_os_str(), "--".as_ref()]);
    argv
}

/// The most mounts a launch makes to cover sockets: bubblewrap's time grows with the square of
/// its mounts (half a second at 500, about fourteen at 2,000) and it takes at most 9,000
/// arguments.
#[cfg(not(target_os = "macos"))]
const MOST_SOCKETS: usize = 256;

/// The Unix sockets of this machine a command run `inside` would otherwise reach: each socket
/// bound to a path in the engine's network namespace (`/proc/net/unix`: the user's daemons
/// and the system's) that this user may connect to and that lies where the sandbox shows the
/// host's files, outside its private and hidden directories, the launch's own way out
/// excepted. Each is covered with an empty device inside: a read-only mount does not stop a
/// `connect`, and a daemon's socket in the home (a container engine's in a VM manager's
/// directory is root there and writes the home through its mounts) is a way out of the
/// sandbox the hidden list cannot name in advance.
///
/// Refused: a table that cannot be read (the launch would cover nothing), and more than
/// [`MOST_SOCKETS`] mounts to cover them. Not covered: a socket bound or bound again after the
/// launch, one bound by a name relative to its daemon's directory (or through
/// `/proc/self/fd`), a second name for a covered socket (a hard link, a bind mount), and one
/// whose name leads through a directory the server may write: there it can turn a link or
/// rename a directory at one launch, so that at the next the name leads elsewhere (to nothing,
/// or to a socket file of its own) while the daemon listens on where it was (reviews 9, 10).
/// One removed between this look and bubblewrap's mounts fails the launch where the system is
/// read-only (bubblewrap cannot make its mount point), and leaves an empty file in its place
/// in a writable directory.
#[cfg(not(target_os = "macos"))]
fn reachable_sockets(
    sandbox: &Sandbox,
    inside: &Inside<'_>,
    way_out: Option<&WayOut>,
) -> Result<Vec<PathBuf>, String> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let table = std::fs::read("/proc/net/unix").map_err(|e| {
        format!(
            "the machine's Unix sockets cannot be listed (/proc/net/unix: {e}), and a confined server would reach them: mount /proc, or mark the server unconfined (`postern server add --unconfined ...`)"
        )
    })?;
    let own = way_out.and_then(|way| std::fs::canonicalize(&way.socket).ok());
    let shown_again = |p: &Path| {
        inside
            .shown
            .iter()
            .chain(&sandbox.writable)
            .any(|s| p.starts_with(s))
    };
    let mut bound = bound_sockets(&table);
    // A listener's path is listed again for each connection it accepted.
    bound.sort();
    bound.dedup();
    let mut sockets: Vec<PathBuf> = Vec::new();
    for listed in bound {
        // Where it is now: a socket whose file is gone, or that is no socket, is not reachable.
        let found = std::fs::canonicalize(&listed).ok().and_then(|path| {
            let meta = std::fs::symlink_metadata(&path).ok()?;
            meta.file_type().is_socket().then_some((path, meta))
        });
        let Some((path, meta)) = found else {
            continue;
        };
        // `connect` needs write permission on the socket: another user's that this one may
        // not write is out of reach (the user's own is not: the server could add the right).
        let reachable = meta.uid() == nix::unistd::getuid().as_raw()
            || nix::unistd::access(&path, nix::unistd::AccessFlags::W_OK).is_ok();
        let shown = !PRIVATE_DIRS.iter().any(|d| path.starts_with(d)) || shown_again(&path);
        if reachable
            && shown
            && Some(&path) != own.as_ref()
            && !sandbox.hidden.iter().any(|h| path.starts_with(h))
            // bubblewrap's own `/dev` holds none of the host's.
            && !path.starts_with("/dev")
        {
            sockets.push(path);
        }
    }
    sockets.sort();
    sockets.dedup();
    // Each socket is a mount, and so is each directory between a writable path and one below.
    let mounts = sockets.len() + between(&sandbox.writable, sockets.iter()).len();
    if mounts > MOST_SOCKETS {
        let mut dirs: Vec<&Path> = sockets.iter().filter_map(|p| p.parent()).collect();
        dirs.sort();
        dirs.dedup();
        let named: Vec<String> = dirs
            .iter()
            .take(3)
            .map(|d| d.display().to_string())
            .collect();
        return Err(format!(
            "{} Unix sockets of this machine lie where a confined server could connect to them ({}{}), and covering them takes {mounts} mounts, more than a launch makes ({MOST_SOCKETS}): stop the daemons that hold them, or mark the server unconfined (`postern server add --unconfined ...`)",
            sockets.len(),
            named.join(", "),
            if dirs.len() > named.len() {
                ", ..."
            } else {
                ""
            }
        ));
    }
    Ok(sockets)
}

/// The absolute paths of `/proc/net/unix`'s sockets (its `table`, as the kernel prints it:
/// names are bytes). Each line is `Num: RefCount Protocol Flags Type St Inode [Path]`, the
/// path the rest of the line after the inode, spaces and all; a name holding a newline goes on
/// over the lines that follow, up to the next record.
#[cfg(not(target_os = "macos"))]
fn bound_sockets(table: &[u8]) -> Vec<PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    let table = table.strip_suffix(b"\n").unwrap_or(table);
    let mut names: Vec<Vec<u8>> = Vec::new();
    // Whether the last record had a name, which a line that is no record goes on with.
    let mut named = false;
    for line in table.split(|b| *b == b'\n').skip(1) {
        match socket_record(line) {
            Some(name) => {
                named = name.is_some();
                names.extend(name.map(<[u8]>::to_vec));
            }
            None => {
                if let (true, Some(name)) = (named, names.last_mut()) {
                    name.push(b'\n');
                    name.extend_from_slice(line);
                }
            }
        }
    }
    names
        .into_iter()
        .filter(|name| name.starts_with(b"/"))
        .map(|name| PathBuf::from(std::ffi::OsStr::from_bytes(&name)))
        .collect()
}

/// A line of `/proc/net/unix` as a record: `None` when it is not one, else its name if it has
/// one. The seven fields are hexadecimal (the inode decimal), the first ending in `:`, each
/// after spaces (the inode's column is padded); the name follows one space.
#[cfg(not(target_os = "macos"))]
fn socket_record(line: &[u8]) -> Option<Option<&[u8]>> {
    let mut rest = line;
    for field in 0..7 {
        rest = &rest[rest.iter().position(|b| *b != b' ')?..];
        let end = rest.iter().position(|b| *b == b' ').unwrap_or(rest.len());
        let (word, after) = rest.split_at(end);
        let digits = if field == 0 {
            word.strip_suffix(b":")?
        } else {
            word
        };
        if digits.is_empty() || !digits.iter().all(u8::is_ascii_hexdigit) {
            return None;
        }
        rest = after;
    }
    match rest {
        [] => Some(None),
        [b' ', name @ ..] => Some(Some(name)),
        _ => None,
    }
}

/// Refuses a launch whose writable paths lead elsewhere through a symbolic link (one the
/// server may have planted in its own directory at an earlier launch: `cache -> ..` would
/// open the home): the profile names paths, and what is bound must be what it names.
#[cfg(not(target_os = "macos"))]
fn resolved(sandbox: &Sandbox) -> Result<(), String> {
    for path in &sandbox.writable {
        let Ok(real) = std::fs::canonicalize(path) else {
            continue; // Not there: nothing is bound.
        };
        if &real != path {
            return Err(format!(
                "its writable path {} leads to {} through a symbolic link, which a confined launch does not follow: name the real directory (postern server add --cwd/--writable), or remove the link",
                path.display(),
                real.display()
            ));
        }
    }
    Ok(())
}

/// The directories strictly between a writable path and a hidden path below it, outermost
/// first.
#[cfg(not(target_os = "macos"))]
fn between<'a>(
    writable: &[PathBuf],
    below: impl Iterator<Item = &'a PathBuf> + Clone,
) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    for w in writable {
        for h in below.clone().filter(|h| h.starts_with(w) && *h != w) {
            dirs.extend(
                h.ancestors()
                    .skip(1)
                    .take_while(|a| a != w)
                    .filter(|a| a.is_dir())
                    .map(Path::to_owned),
            );
        }
    }
    dirs.sort();
    dirs.dedup();
    dirs.sort_by_key(|d| d.components().count());
    dirs
}

/// Directories replaced by empty, private ones inside: the temp directories, and `/run`
/// (the system's sockets: docker's, the session's runtime directory, the system bus).
const PRIVATE_DIRS: &[&str] = &["/tmp", "/var/tmp", "/run"];

/// The paths the record names that lie under a private directory, to show again: each
/// file's directory, each hashed tree, and the working directory.
fn shown(record: &ExecutionRecord) -> Vec<PathBuf> {
    showing(
        record
            .artifacts()
            .map(|a| {
                if a.path.is_dir() {
                    a.path.clone()
                } else {
                    a.path
                        .parent()
                        .map_or_else(|| a.path.clone(), Path::to_owned)
                }
            })
            .chain(std::iter::once(record.working_directory.clone())),
    )
}

/// Of `dirs`, those under a private directory, where they lead, sorted.
fn showing(dirs: impl IntoIterator<Item = PathBuf>) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = dirs
        .into_iter()
        // A link (a project's `.venv`) is shown where it leads: bubblewrap mounts on no link.
        .map(|p| std::fs::canonicalize(&p).unwrap_or(p))
        .filter(|p| {
            PRIVATE_DIRS
                .iter()
                .any(|t| p.starts_with(t) && p != Path::new(t))
        })
        .collect();
    paths.sort();
    paths.dedup();
    paths
}

/// Why a confined server may not write `path` (lexically normal), if it may not: `/`, a
/// private temp directory itself (binding it would bring the host's back, with its sockets),
/// or the user's home or a directory above it (a server writing `~/.bashrc` would run
/// outside its sandbox later). Such a path is left out of the profile; `server add` refuses
/// it.
pub fn unwritable(path: &Path, user_home: Option<&Path>) -> Option<&'static str> {
    let home = user_home.map(normalized);
    if path == Path::new("/") {
        Some("it is the root of the file system")
    } else if PRIVATE_DIRS.iter().any(|d| path == Path::new(d)) {
        Some("it is a shared temporary directory (a confined server gets a private one)")
    } else if home.as_ref().is_some_and(|home| home.starts_with(path)) {
        Some(
            "it is your home or holds it: a server that writes there can plant code that runs outside its sandbox",
        )
    } else if home.as_ref().is_some_and(|home| {
        CREDENTIAL_PATHS
            .iter()
            .any(|c| path.starts_with(home.join(c)))
    }) {
        Some("it holds credentials, which a confined server never sees")
    } else {
        None
    }
}

/// `path` with `.` and `..` resolved lexically (no file system access).
pub fn normalized(path: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// Where `RELOCATING` variables (read through `var`) put credential paths: what they name, and
/// the `.config/` and `.local/share/` entries of `paths` under `XDG_CONFIG_HOME` and
/// `XDG_DATA_HOME`.
fn relocated(paths: &[&str], var: impl Fn(&str) -> Option<OsString>) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = RELOCATING
        .iter()
        .filter_map(|name| var(name))
        .flat_map(|value| std::env::split_paths(&value).collect::<Vec<_>>())
        .filter(|p| p.is_absolute())
        .collect();
    for (prefix, name) in [
        (".config/", "XDG_CONFIG_HOME"),
        (".local/share/", "XDG_DATA_HOME"),
    ] {
        let Some(base) = var(name).map(PathBuf::from).filter(|p| p.is_absolute()) else {
            continue;
        };
        out.extend(
            paths
                .iter()
                .filter_map(|p| p.strip_prefix(prefix))
                .map(|rest| base.join(rest)),
        );
    }
    out
}

/// The engine's environment a confined launch starts from: [`KEPT_ENV`], the locale's `LC_*`,
/// and the loader variables (which the execution record names).
fn kept_env() -> Vec<(OsString, OsString)> {
    std::env::vars_os()
        .filter(|(name, _)| name.to_str().is_some_and(kept))
        .collect()
}

/// Whether a confined launch keeps the engine's variable `name` ([`kept_env`]).
pub(crate) fn kept(name: &str) -> bool {
    KEPT_ENV.contains(&name)
        || name.starts_with("LC_")
        || crate::identity::LOADER_VARIABLES.contains(&name)
}

/// What glibc reads from the environment to load code or files, beside the dynamic loader's
/// `LD_*`: the variables it ignores in a setuid program.
const LIBC_UNSAFE: [&str; 13] = [
    "GCONV_PATH",
    "GETCONF_DIR",
    "GLIBC_TUNABLES",
    "HOSTALIASES",
    "LOCALDOMAIN",
    "LOCPATH",
    "MALLOC_TRACE",
    "NIS_PATH",
    "NLSPATH",
    "RESOLV_HOST_CONF",
    "RES_OPTIONS",
    "TMPDIR",
    "TZDIR",
];

/// The environment of a confined command, split between bubblewrap and the sandbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ConfinedEnv {
    /// bubblewrap's own environment, which it passes on inside: the engine's kept variables
    /// ([`kept_env`]), then the command's own, less those in `inside`.
    pub outside: Vec<(OsString, OsString)>,
    /// Set inside only, with `--setenv`: the dynamic loader's variables and those glibc reads
    /// to load code or files ([`LIBC_UNSAFE`]).
    pub inside: Vec<(String, String)>,
}

/// The environment of a confined command whose own variables are `vars`, in order (later ones
/// win), on top of the engine's kept ones. bubblewrap is an ordinary program started in the
/// engine's namespaces, so a confined server configured with `LD_PRELOAD=./lib.so` had
/// bubblewrap load the library it wrote, outside its sandbox, at every capture and launch
/// (review 7, N1): such variables are set inside instead. Those `released` (credentials, never
/// the loader's) stay in bubblewrap's environment, where the server cannot have put them. On
/// macOS, `sandbox-exec` is a system program the loader's variables do not reach, and none is
/// set inside.
pub(crate) fn confined_env(vars: &[(&str, &str)], released: &[&str]) -> ConfinedEnv {
    split_env(kept_env(), vars, released)
}

/// [`confined_env`] on top of `kept`.
fn split_env(
    kept: Vec<(OsString, OsString)>,
    vars: &[(&str, &str)],
    released: &[&str],
) -> ConfinedEnv {
    let mut outside = kept;
    for (name, value) in vars {
        outside.retain(|(kept, _)| kept != name);
        outside.push((name.into(), value.into()));
    }
    let loads = |name: &str| {
        !cfg!(target_os = "macos")
            && (name.starts_with("LD_") || LIBC_UNSAFE.contains(&name))
            && !released.contains(&name)
    };
    let (inside, outside): (Vec<_>, Vec<_>) = outside
        .into_iter()
        .partition(|(name, _)| name.to_str().is_some_and(loads));
    ConfinedEnv {
        outside,
        inside: inside
            .into_iter()
            .map(|(k, v)| (k.to_string_lossy().into(), v.to_string_lossy().into()))
            .collect(),
    }
}

/// The session's runtime directory (the session bus, the keyring's control socket).
fn runtime_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("XDG_RUNTIME_DIR") {
        return Some(PathBuf::from(dir));
    }
    #[cfg(target_os = "linux")]
    {
        let dir = PathBuf::from(format!("/run/user/{}", nix::unistd::getuid()));
        if dir.is_dir() {
            return Some(dir);
        }
    }
    None
}

/// The paths a hidden path names: itself, or for a name ending in `*` each entry of its
/// directory whose name starts with the rest.
#[cfg(not(target_os = "macos"))]
fn matching(path: &Path) -> Vec<PathBuf> {
    let pattern = path.file_name().and_then(|n| n.to_str());
    let (Some(prefix), Some(dir)) = (pattern.and_then(|n| n.strip_suffix('*')), path.parent())
    else {
        return vec![path.to_owned()];
    };
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|entry| {
            entry
                .file_name()
                .to_str()
                .is_some_and(|n| n.starts_with(prefix))
        })
        .map(|entry| entry.path())
        .collect();
    found.sort();
    found
}

/// `name` on PATH, or in /usr/bin.
#[cfg(not(target_os = "macos"))]
fn find(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .chain(std::iter::once(PathBuf::from("/usr/bin")))
        .map(|dir| dir.join(name))
        .find(|path| path.is_file())
}

/// Runs `command` with the broker's `socket` served on loopback `port` (inside a confined
/// launch's network namespace, where the proxy variables point), and returns its exit code.
/// `postern sandbox-run` calls it; nothing else listens or connects.
pub fn run_relayed(port: u16, socket: &Path, command: &[OsString]) -> std::io::Result<i32> {
    use std::net::TcpListener;
    let Some((program, args)) = command.split_first() else {
        return Err(std::io::Error::other(
            "sandbox-run needs a command after --",
        ));
    };
    let listener = TcpListener::bind(("127.0.0.1", port))?;
    let socket = socket.to_owned();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let socket = socket.clone();
            std::thread::spawn(move || relay(stream, &socket));
        }
    });
    let status = std::process::Command::new(program).args(args).status()?;
    use std::os::unix::process::ExitStatusExt;
    Ok(status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0)))
}

/// The server's own process under a confined launch's `pid` (bubblewrap's, then its init's,
/// then the relay's): the process whose workers are sampled. `pid` itself when unconfined.
/// `None` while a layer has not started the next yet (just after the launch).
pub(crate) fn innermost(pid: u32) -> Option<u32> {
    let mut pid = pid;
    for _ in 0..4 {
        let argv = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let mut words = argv.split(|b| *b == 0);
        let program = words.next().unwrap_or_default();
        let layer = program.ends_with(b"bwrap")
            || (program.ends_with(b"postern") && words.next() == Some(b"sandbox-run"));
        if !layer {
            return Some(pid);
        }
        match crate::table::children(pid).as_slice() {
            [only] => pid = only.pid,
            _ => return None,
        }
    }
    None
}

/// Copies one proxy connection to the broker's socket and back.
fn relay(tcp: std::net::TcpStream, socket: &Path) {
    use std::net::Shutdown;
    use std::os::unix::net::UnixStream;
    let Ok(unix) = UnixStream::connect(socket) else {
        return;
    };
    let (Ok(mut tcp_in), Ok(mut unix_out)) = (tcp.try_clone(), unix.try_clone()) else {
        return;
    };
    let up = std::thread::spawn(move || {
        let _ = std::io::copy(&mut tcp_in, &mut unix_out);
        let _ = unix_out.shutdown(Shutdown::Write);
    });
    let (mut unix_in, mut tcp_out) = (unix, tcp);
    let _ = std::io::copy(&mut unix_in, &mut tcp_out);
    let _ = tcp_out.shutdown(Shutdown::Write);
    let _ = up.join();
}

#[cfg(target_os = "macos")]
mod macos {
    //! `sandbox-exec` with a generated profile: compile-checked on Linux, untested (no macOS
    //! machine here). Later rules win in SBPL.
    use std::ffi::OsString;
    use std::path::{Path, PathBuf};

    use postern_domain::Sandbox;

    use super::WayOut;

    pub(super) fn command(
        sandbox: &Sandbox,
        way_out: Option<&WayOut>,
        program: &Path,
        args: &[String],
    ) -> (PathBuf, Vec<OsString>) {
        let quote = |p: &Path| format!("{:?}", p.display().to_string());
        let mut sb = String::from("(version 1)\n(allow default)\n(deny network*)\n");
        sb.push_str("(allow network* (remote unix-socket))\n");
        if let Some(way) = way_out {
            sb.push_str(&format!(
                "(allow network-outbound (remote ip \"localhost:{}\"))\n",
                way.port
            ));
        }
        sb.push_str("(deny file-write* (subpath \"/\"))\n");
        sb.push_str("(allow file-write* (subpath \"/private/tmp\") (subpath \"/private/var/folders\") (literal \"/dev/null\") (subpath \"/dev/fd\") (literal \"/dev/tty\"))\n");
        for path in &sandbox.writable {
            sb.push_str(&format!("(allow file-write* (subpath {}))\n", quote(path)));
        }
        for path in &sandbox.hidden {
            sb.push_str(&format!(
                "(deny file-read* file-write* (subpath {}))\n",
                quote(path)
            ));
        }
        let mut argv: Vec<OsString> = vec!["-p".into(), sb.into()];
        argv.push(program.into());
        argv.extend(args.iter().map(OsString::from));
        (PathBuf::from("/usr/bin/sandbox-exec"), argv)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(confinement: Confinement) -> ServerConfig {
        let mut config = ServerConfig::new(
            "probe".parse().expect("label"),
            vec!["/bin/true".into()],
            Some("/srv/probe".into()),
            Vec::new(),
        )
        .expect("config");
        config.confinement = confinement;
        config.writable = vec!["cache".into()];
        config
    }

    fn host() -> SandboxHost {
        SandboxHost {
            postern_home: Some("/home/u/.postern".into()),
            user_home: Some("/home/u".into()),
            user_cache: Some("/home/u/.cache".into()),
            relay: None,
            exposed: Vec::new(),
        }
    }

    #[cfg(not(target_os = "macos"))]
    #[test]
    fn the_sockets_table_gives_each_path_whole_and_nothing_else() {
        use std::os::unix::ffi::OsStrExt;
        // As the kernel prints it: names are bytes (an abstract one that is not UTF-8 made the
        // whole table unreadable as text: review 8, N1), and a newline in a name is printed.
        let table: &[u8] = b"Num       RefCount Protocol Flags    Type St Inode Path\n\
            00000000321fefe6: 00000003 00000000 00000000 0001 03  1275\n\
            0000000017b7580d: 00000002 00000000 00010000 0001 01 31337 /home/u/.lima/default/sock/docker.sock\n\
            0000000017b7580e: 00000002 00000000 00000000 0002 01    12 /home/u/My Daemon/dgram sock\n\
            0000000017b7580f: 00000002 00000000 00010000 0001 01 31338 @/tmp/.X11-unix/X0\n\
            0000000017b75810: 00000002 00000000 00010000 0001 01 31339 @\xff\xfe\n\
            0000000017b75811: 00000002 00000000 00010000 0001 01 31340 relative.sock\n\
            0000000017b75812: 00000002 00000000 00010000 0001 01 31341 /home/u/two\n\
            lines/and\n\
            \n\
            0000000017b75813: 00000002 00000000 00010000 0001 01 31342 /home/u/caf\xe9.sock\n";
        assert_eq!(
            bound_sockets(table),
            [
                PathBuf::from("/home/u/.lima/default/sock/docker.sock"),
                PathBuf::from("/home/u/My Daemon/dgram sock"),
                PathBuf::from("/home/u/two\nlines/and\n"),
                PathBuf::from(std::ffi::OsStr::from_bytes(b"/home/u/caf\xe9.sock")),
            ]
        );
    }

    #[cfg(not(target_os = "macos"))]
    #[test]
    fn the_loaders_variables_go_inside_and_the_rest_to_bubblewrap_later_ones_winning() {
        let kept = vec![
            ("PATH".into(), "/usr/bin".into()),
            ("LD_LIBRARY_PATH".into(), "/opt/lib".into()),
        ];
        let vars = [
            ("LD_PRELOAD", "./lib.so"),
            ("PATH", "/srv/bin"),
            ("API_KEY", "k"),
            ("LD_PRELOAD", "./other.so"),
            ("GCONV_PATH", "./gconv"),
        ];
        let env = split_env(kept, &vars, &["API_KEY"]);
        let outside: Vec<(&str, &str)> = env
            .outside
            .iter()
            .map(|(k, v)| (k.to_str().expect("name"), v.to_str().expect("value")))
            .collect();
        assert_eq!(outside, [("PATH", "/srv/bin"), ("API_KEY", "k")]);
        let inside: Vec<(&str, &str)> = env
            .inside
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        assert_eq!(
            inside,
            [
                ("LD_LIBRARY_PATH", "/opt/lib"),
                ("LD_PRELOAD", "./other.so"),
                ("GCONV_PATH", "./gconv")
            ]
        );
    }

    #[test]
    fn an_unconfined_server_has_no_sandbox() {
        let host = host();
        assert_eq!(
            profile(
                &config(Confinement::Unconfined),
                Path::new("/srv/probe"),
                &host
            ),
            None
        );
    }

    #[test]
    fn the_profile_hides_credentials_and_the_postern_home_and_writes_only_its_directory() {
        let sandbox = profile(
            &config(Confinement::Confined),
            Path::new("/srv/probe"),
            &host(),
        )
        .expect("confined");
        for hidden in [
            "/home/u/.ssh",
            "/home/u/.aws",
            "/home/u/.gnupg",
            "/home/u/.postern",
        ] {
            assert!(
                sandbox.hidden.contains(&PathBuf::from(hidden)),
                "{hidden} not hidden: {:?}",
                sandbox.hidden
            );
        }
        assert_eq!(
            sandbox.writable,
            vec![
                PathBuf::from("/srv/probe"),
                PathBuf::from("/srv/probe/cache")
            ]
        );
    }

    #[test]
    fn the_home_itself_is_never_writable() {
        let sandbox = profile(
            &config(Confinement::Confined),
            Path::new("/home/u"),
            &host(),
        )
        .expect("confined");
        assert!(!sandbox.writable.contains(&PathBuf::from("/home/u")));
        let sandbox =
            profile(&config(Confinement::Confined), Path::new("/"), &host()).expect("confined");
        assert!(!sandbox.writable.contains(&PathBuf::from("/")));
    }

    #[test]
    fn writable_paths_are_normalized_and_never_the_home_the_root_or_a_shared_temp() {
        let home = Some(Path::new("/home/u"));
        assert_eq!(
            normalized(Path::new("/home/u/proj/../.")),
            PathBuf::from("/home/u")
        );
        for refused in ["/", "/home", "/home/u", "/tmp", "/var/tmp", "/run"] {
            assert!(unwritable(Path::new(refused), home).is_some(), "{refused}");
        }
        for credentials in ["/home/u/.ssh", "/home/u/.aws/cli", "/home/u/.config/gh"] {
            assert!(
                unwritable(Path::new(credentials), home).is_some(),
                "{credentials}"
            );
        }
        for allowed in ["/home/u/proj", "/home/u/.sshd", "/tmp/build", "/srv/x"] {
            assert_eq!(unwritable(Path::new(allowed), home), None, "{allowed}");
        }
        // `--cwd ~/proj/..` and `--writable ../..` do not get the home in.
        let mut config = config(Confinement::Confined);
        config.writable = vec!["../..".into(), "cache".into()];
        let sandbox = profile(&config, Path::new("/home/u/proj/.."), &host()).expect("confined");
        assert_eq!(sandbox.writable, vec![PathBuf::from("/home/u/cache")]);
    }

    #[test]
    fn credential_paths_moved_by_variables_are_hidden_where_they_are() {
        let vars = |name: &str| match name {
            "GNUPGHOME" => Some(OsString::from("/keys/gnupg")),
            "KUBECONFIG" => Some(OsString::from("/k/one:/k/two")),
            "XDG_CONFIG_HOME" => Some(OsString::from("/cfg")),
            "DOCKER_CONFIG" => Some(OsString::from("relative")),
            _ => None,
        };
        let moved = relocated(CREDENTIAL_PATHS, vars);
        for path in ["/keys/gnupg", "/k/one", "/k/two", "/cfg/gh", "/cfg/gcloud"] {
            assert!(moved.contains(&PathBuf::from(path)), "{path}: {moved:?}");
        }
        assert!(!moved.contains(&PathBuf::from("relative")));
    }

    #[cfg(not(target_os = "macos"))]
    #[test]
    fn the_directories_between_a_writable_path_and_a_hidden_one_are_pinned() {
        let dir = tempfile::tempdir().expect("tempdir");
        let w = dir.path().join("w");
        std::fs::create_dir_all(w.join("a/b/hidden")).expect("mkdir");
        let pinned = between(
            std::slice::from_ref(&w),
            [w.join("a/b/hidden"), dir.path().join("x")].iter(),
        );
        assert_eq!(pinned, vec![w.join("a"), w.join("a/b")]);
    }

    #[test]
    fn a_changed_profile_is_a_new_identity() {
        let mut config = config(Confinement::Unconfined);
        config.cwd = Some(std::env::temp_dir());
        let observed = crate::DigestCache::new().observe(&config).expect("observe");
        let mut record = crate::record(&config, observed, 0, 0);
        let unconfined = record.identity_digest();
        record.sandbox = profile(
            &self::config(Confinement::Confined),
            Path::new("/srv/probe"),
            &host(),
        );
        let confined = record.identity_digest();
        assert_ne!(unconfined, confined);
        if let Some(sandbox) = &mut record.sandbox {
            sandbox.writable.push("/srv/elsewhere".into());
        }
        assert_ne!(record.identity_digest(), confined);
    }
}
