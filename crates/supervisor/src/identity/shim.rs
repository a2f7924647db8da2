//! A version manager's shim, read as data and never run.
//!
//! `python3` in `~/.pyenv/shims` is a bash script: `pyenv exec` picks an installed version
//! (`PYENV_VERSION`, else the nearest `.python-version` from the working directory up, else
//! pyenv's global `version` file) and execs that version's `bin/python3`. Launched as it is,
//! the interpreter that runs is chosen after the identity is taken and its runtime is never
//! fingerprinted (red team 3, F1: a `.pth` file planted there reached an approved credential).
//! So the engine makes pyenv's choice itself, reading the files pyenv reads the way pyenv
//! reads them, and launches the chosen interpreter directly with what `pyenv exec` exports
//! (`PYENV_VERSION`, and the version's `bin` first on `PATH`; not the directories of pyenv's
//! own commands it puts there too): what runs is what was identified. Nothing is executed to find out: the version files may lie in the server's own
//! directory, which a confined server can write, and a probe that ran what they name ran it
//! outside the sandbox, before any approval (review 5, S1; 25faa89, reverted).
//!
//! Only a choice that can be read exactly is taken. A shim that is not pyenv's own template,
//! a version neither installed nor the prefix of one installed, `PYENV_DIR` set, a hook that
//! could change the choice, `-m pip`: the shim is then launched as it is, a wrapper, and the
//! card says partly pinned.

use std::path::{Path, PathBuf};

use super::program::{Kind, is_executable, program_kind, read_text, resolve_program};

/// The largest version file read (pyenv reads lines of up to 1,024 bytes).
const VERSION_FILE_MAX: u64 = 64 * 1024;

/// Hooks pyenv and pyenv-virtualenv install that cannot change a choice made here: the
/// `which` ones act only when the command is not in the version chosen (then nothing is
/// chosen here); `pip-rehash` only for pip and `easy_install`, which are not interpreters.
const INERT_HOOKS: [&str; 4] = [
    "which/python-config.bash",
    "which/system-site-packages.bash",
    "which/conda.bash",
    "exec/pip-rehash.bash",
];

/// What a shim would exec, and the variables it would export first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Selected {
    /// The interpreter to launch in the shim's place.
    pub(super) program: PathBuf,
    /// What `pyenv exec` exports before it execs: over the configured environment.
    pub(super) env: Vec<(String, String)>,
}

/// The interpreter pyenv's shim `program` would exec for a server started in `cwd` whose
/// environment's variable `name` is `var(name)`; `None` when `program` is not such a shim
/// or the choice cannot be read exactly (see the module docs).
pub(super) fn select(
    program: &Path,
    args: &[String],
    cwd: &Path,
    confined: bool,
    var: impl Fn(&str) -> Option<String>,
) -> Option<Selected> {
    let command = program.file_name()?.to_str()?;
    if program_kind(Path::new(command)) != Kind::Interpreter || runs_pip(args) {
        return None;
    }
    let (root, pyenv) = pyenv_shim(program)?;
    if hooked(&root, &pyenv, var("PYENV_HOOK_PATH").as_deref()) {
        return None;
    }
    let asked = match var("PYENV_VERSION").filter(|v| !v.is_empty()) {
        Some(list) => list.split(':').map(str::to_owned).collect(),
        None if var("PYENV_DIR").is_some_and(|d| !d.is_empty()) => return None,
        None => version_files(&root, cwd, confined)?,
    };
    let versions = version_names(&root, &asked)?;
    let path_var = var("PATH");
    let (program, in_root) = which(&root, command, &versions, path_var.as_deref(), cwd)?;
    let mut env = vec![("PYENV_VERSION".to_owned(), versions.join(":"))];
    if in_root {
        let bin = program.parent()?.to_str()?;
        let path = match path_var {
            Some(rest) => format!("{bin}:{rest}"),
            None => bin.to_owned(),
        };
        env.push(("PATH".to_owned(), path));
    }
    Some(Selected { program, env })
}

/// The versions pyenv's files name for a server in `cwd` (`pyenv-version-file`, then
/// `-read`): the nearest `.python-version` from there up, else the root's `version`; empty
/// when they name none.
fn version_files(root: &Path, cwd: &Path, confined: bool) -> Option<Vec<String>> {
    let dir = std::fs::canonicalize(cwd).ok()?;
    let mut local = None;
    for path in dir.ancestors().map(|d| d.join(".python-version")) {
        // A confined server's link is not followed here, outside its sandbox: whether what it
        // names exists (a hidden file) would show in how it is launched. Opened with the link
        // refused, so that no swap between a look and the open shows it.
        if let Some(file) = open_version_file(&path, !confined).ok()? {
            local = Some(file);
            break;
        }
    }
    let file = match local {
        Some(file) => Some(file),
        None => open_version_file(&root.join("version"), true).ok()?,
    };
    let words = match file {
        Some(file) => read_version_file(file, root)?,
        None => Vec::new(),
    };
    // Joined with `:` by pyenv, and split at `:` again.
    Some(match words.is_empty() {
        true => Vec::new(),
        false => words.join(":").split(':').map(str::to_owned).collect(),
    })
}

/// `pyenv-version-name`: each name `asked` installed as it is or without `python-`, else the
/// latest installed one it is a prefix of; `system` (and nothing asked is `system`).
fn version_names(root: &Path, asked: &[String]) -> Option<Vec<String>> {
    // pyenv splits the list unquoted: a name with a pattern in it is globbed.
    if asked.iter().any(|v| v.contains(['*', '?', '['])) {
        return None;
    }
    if asked.is_empty() {
        return Some(vec!["system".to_owned()]);
    }
    let installed = |name: &str| !name.is_empty() && root.join("versions").join(name).is_dir();
    asked
        .iter()
        .map(|v| {
            let bare = v.strip_prefix("python-");
            match bare {
                _ if v == "system" || installed(v) => Some(v.clone()),
                Some(bare) if installed(bare) => Some(bare.to_owned()),
                _ => latest(root, v).or_else(|| latest(root, bare?)),
            }
        })
        .collect()
}

/// `pyenv-which`: `command` in the first of `versions` that holds it, then the system's (the
/// first on `PATH` past pyenv's shims); with whether it lies in pyenv's root.
fn which(
    root: &Path,
    command: &str,
    versions: &[String],
    path_var: Option<&str>,
    cwd: &Path,
) -> Option<(PathBuf, bool)> {
    let shims = root.join("shims");
    let (program, in_root) = versions
        .iter()
        .map(String::as_str)
        .chain(["system"])
        .find_map(|version| {
            if version == "system" {
                let outside: Vec<PathBuf> = path_var
                    .map(|p| std::env::split_paths(p).filter(|d| *d != shims).collect())
                    .unwrap_or_default();
                let outside = std::env::join_paths(outside).ok()?;
                resolve_program(command, cwd, Some(&outside))
                    .ok()
                    .map(|p| (p, false))
            } else {
                let path = root
                    .join("versions")
                    .join(version)
                    .join("bin")
                    .join(command);
                is_executable(&path).then_some((path, true))
            }
        })?;
    if program.parent().and_then(Path::file_name) == Some("shims".as_ref()) {
        // Another manager's shim found for `system`: not read here.
        return None;
    }
    Some((program, in_root))
}

/// The installed version `pyenv latest -b` takes for `prefix` (`3.12` for `3.12.9`): of the
/// names in `versions/` that are directories, those that go on from the prefix with `.` or `-`
/// (and end in `t`, a free-threaded build, when the prefix does, as in `3.13t`), development
/// builds and pre-releases left out, the first in pyenv's order ([`sort_key`]). `None` when
/// none is, or when two share the first place (pyenv's order between them would be the
/// locale's).
fn latest(root: &Path, prefix: &str) -> Option<String> {
    let (prefix, suffix) = match prefix.strip_suffix('t') {
        Some(p) if p.ends_with(|c: char| c.is_ascii_digit()) => (p, "t"),
        _ => (prefix, ""),
    };
    if prefix.is_empty() {
        return None;
    }
    let candidates: Vec<(SortKey, String)> = std::fs::read_dir(root.join("versions"))
        .ok()?
        .flatten()
        .filter(|e| e.path().is_dir())
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|name| {
            name.strip_prefix(prefix).is_some_and(|rest| {
                rest.starts_with(['.', '-']) && rest.len() > suffix.len() && rest.ends_with(suffix)
            })
        })
        .filter(|name| !unreleased(name, suffix.is_empty()))
        .map(|name| (sort_key(&name), name))
        .collect();
    let first = candidates.iter().map(|(key, _)| key).max()?;
    let mut at_first = candidates.iter().filter(|(key, _)| key == first);
    match (at_first.next(), at_first.next()) {
        (Some((_, name)), None) => Some(name.clone()),
        _ => None,
    }
}

/// Whether `pyenv latest` leaves `name` out: `-dev`, `-src`, `-latest`, a pre-release (`a1`,
/// `b2`, `rc1` at its end) and, unless asked for one, a free-threaded build (`3.13.1t`).
fn unreleased(name: &str, free_threaded_too: bool) -> bool {
    let without_number = name.trim_end_matches(|c: char| c.is_ascii_digit());
    let pre_release = without_number.len() < name.len()
        && (without_number.ends_with(['a', 'b']) || without_number.ends_with("rc"));
    let free_threaded = name
        .strip_suffix('t')
        .is_some_and(|n| n.ends_with(|c: char| c.is_ascii_digit()));
    ["-dev", "-src", "-latest"]
        .iter()
        .any(|end| name.ends_with(end))
        || pre_release
        || (free_threaded_too && free_threaded)
}

/// pyenv-latest's order, highest first: the name (its first `-` made a `.` when only letters
/// and digits come before it) cut at `.`, the first part compared as text, the next three by
/// their leading digits (`sort -t. -k1,1r -k2,2nr -k3,3nr -k4,4nr`).
type SortKey = (String, u128, u128, u128);

fn sort_key(name: &str) -> SortKey {
    let dash = name
        .find('-')
        .filter(|&i| i > 0 && name[..i].chars().all(|c| c.is_ascii_alphanumeric()));
    let key = match dash {
        Some(i) => format!("{}.{}", &name[..i], &name[i + 1..]),
        None => name.to_owned(),
    };
    let mut fields = key.split('.');
    let first = fields.next().unwrap_or_default().to_owned();
    let mut number = || {
        let field = fields.next().unwrap_or_default();
        let digits: String = field.chars().take_while(char::is_ascii_digit).collect();
        digits.parse().unwrap_or(0)
    };
    (first, number(), number(), number())
}

/// Whether the arguments run pip (`-m pip`), which a pyenv hook runs otherwise.
fn runs_pip(args: &[String]) -> bool {
    args.windows(2)
        .any(|w| w[0] == "-m" && w[1].starts_with("pip"))
        || args.iter().any(|a| a.starts_with("-mpip"))
}

/// pyenv's root and executable, when `shim` is pyenv's shim template for that root, in the
/// root's `shims` directory, line for line (a shim edited to do anything more is not read).
fn pyenv_shim(shim: &Path) -> Option<(PathBuf, PathBuf)> {
    // Every capture of an interpreter asks: only a file in a `shims` directory is read.
    if shim.parent()?.file_name()? != "shims" {
        return None;
    }
    let text = read_text(shim, 4096)?;
    let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
    if !lines.next()?.starts_with("#!") {
        return None;
    }
    let (mut root, mut pyenv, mut shim_check) = (None, None, None);
    for line in lines {
        match line {
            "set -e"
            | r#"[ -n "$PYENV_DEBUG" ] && set -x"#
            | r#"program="${0##*/}""#
            | "SHIM_PATH=${0%/*}"
            | r#"export _PYENV_SHIM_PATH="$SHIM_PATH""#
            | "fi" => {}
            _ => {
                if let Some(value) = line.strip_prefix("export PYENV_ROOT=") {
                    root = Some(PathBuf::from(unquote(value)?));
                } else if let Some(rest) = line
                    .strip_prefix("if [[ $SHIM_PATH != ")
                    .and_then(|r| r.strip_suffix(" ]]; then"))
                {
                    shim_check = Some(PathBuf::from(unquote(rest)?));
                } else if let Some(rest) = line
                    .strip_prefix("exec ")
                    .and_then(|r| r.strip_suffix(r#" exec "$program" "$@""#))
                {
                    pyenv = Some(PathBuf::from(unquote(rest)?));
                } else {
                    return None;
                }
            }
        }
    }
    let (root, pyenv) = (root?, pyenv?);
    let shims = root.join("shims");
    let in_place = root.is_absolute()
        && shim.parent() == Some(shims.as_path())
        && shim_check.is_none_or(|dir| dir == shims)
        && pyenv.file_name()? == "pyenv";
    in_place.then_some((root, pyenv))
}

/// A double-quoted word with nothing in it a shell would expand or escape.
fn unquote(word: &str) -> Option<&str> {
    let inner = word.strip_prefix('"')?.strip_suffix('"')?;
    (!inner.is_empty() && !inner.contains(['"', '$', '`', '\\'])).then_some(inner)
}

/// Whether a hook pyenv would source on its way to exec could change what it execs: one in
/// `version-name`, `which` or `exec` of a hook directory, other than [`INERT_HOOKS`].
fn hooked(root: &Path, pyenv: &Path, hook_path: Option<&str>) -> bool {
    let install = pyenv
        .parent()
        .and_then(Path::parent)
        .map(|p| p.join("pyenv.d"));
    let plugins = std::fs::read_dir(root.join("plugins"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join("etc/pyenv.d"));
    let dirs: Vec<PathBuf> = hook_path
        .into_iter()
        .flat_map(|p| std::env::split_paths(p).collect::<Vec<_>>())
        .chain([root.join("pyenv.d")])
        .chain(install)
        .chain(
            [
                "/usr/etc/pyenv.d",
                "/usr/local/etc/pyenv.d",
                "/etc/pyenv.d",
                "/usr/lib/pyenv/hooks",
            ]
            .map(PathBuf::from),
        )
        .chain(plugins)
        .collect();
    dirs.iter().any(|dir| {
        ["version-name", "which", "exec"].iter().any(|command| {
            std::fs::read_dir(dir.join(command))
                .into_iter()
                .flatten()
                .flatten()
                .filter_map(|e| e.file_name().into_string().ok())
                .filter(|name| name.ends_with(".bash"))
                .any(|name| !INERT_HOOKS.contains(&format!("{command}/{name}").as_str()))
        })
    })
}

/// A version file where pyenv looks for one (`follow`ing a link, as pyenv does, or not):
/// `Ok(None)` when there is no regular file there (pyenv looks on), `Err` when there is one
/// that cannot be opened, or a link not to be followed.
fn open_version_file(path: &Path, follow: bool) -> Result<Option<std::fs::File>, ()> {
    use nix::fcntl::OFlag;
    use std::os::unix::fs::OpenOptionsExt;
    let flags = match follow {
        true => OFlag::O_NONBLOCK,
        false => OFlag::O_NONBLOCK | OFlag::O_NOFOLLOW,
    };
    let opened = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(flags.bits())
        .open(path);
    match opened {
        Ok(file) => Ok(file.metadata().map_err(drop)?.is_file().then_some(file)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) if e.kind() == std::io::ErrorKind::NotADirectory => Ok(None),
        Err(_) => Err(()),
    }
}

/// The versions a version file names, as `pyenv-version-file-read` reads them: the first word
/// of each line, blank lines and `#` comments skipped, `..` ignored. Empty when it names none
/// (pyenv then runs the system's). `None` when it cannot be read exactly: unreadable, not
/// text, too long, or a name with a path in it that pyenv would check by changing directory.
fn read_version_file(file: std::fs::File, root: &Path) -> Option<Vec<String>> {
    use std::io::Read;
    let size = file.metadata().ok()?.len();
    if size > VERSION_FILE_MAX {
        return None;
    }
    let mut text = String::new();
    file.take(VERSION_FILE_MAX).read_to_string(&mut text).ok()?;
    let mut versions = Vec::new();
    for line in text.split('\n') {
        if line.len() > 1024 {
            return None;
        }
        let Some(word) = line.split([' ', '\t', '\r']).find(|w| !w.is_empty()) else {
            continue;
        };
        if word.starts_with('#') || word == ".." {
            continue;
        }
        if word.contains('/') {
            let plain = word.split('/').all(|c| !matches!(c, "" | "." | ".."));
            if !plain {
                return None;
            }
            if !root.join("versions").join(word).is_dir() {
                continue;
            }
        }
        versions.push(word.to_owned());
    }
    Some(versions)
}
