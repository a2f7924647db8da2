//! Whether an identity pins the code that runs, and when not, what a person would name with
//! `--identity` to pin it.

use std::ffi::OsStr;
use std::path::Path;

use postern_domain::{Artifact, Pinning, ServerConfig};

use super::program::Kind;
use super::{RUNTIME_ENTRIES, SOURCE_ENTRIES};

/// How the program that runs is reached.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Dispatch<'a> {
    /// Not through a shell.
    Direct,
    /// Through this shell script (hashed), which hands over to a program that is not.
    Script(&'a Artifact),
    /// A shell is the program, and what it starts is not hashed.
    Shell,
}

/// What the identity hashed of an interpreter launch, for [`pinning`].
pub(super) struct Hashed<'a> {
    /// The entry file.
    pub(super) entry: Option<&'a Artifact>,
    /// The Python virtual environment the interpreter belongs to (hashed as a tree).
    pub(super) environment: Option<&'a Path>,
    /// A tree of code it loads (its own source tree, a search path, a `.pth` line's
    /// directory, a bytecode cache), when it held too many entries to hash.
    pub(super) source_too_large: Option<&'a Path>,
    /// The runtime's own library (the user can write to it), when it held too many entries.
    pub(super) runtime_too_large: Option<&'a Path>,
    /// A lockfile in the working directory.
    pub(super) lockfile: bool,
    /// Identity paths the person named.
    pub(super) named: bool,
}

pub(super) fn pinning(
    config: &ServerConfig,
    kind: Kind,
    dispatch: Dispatch<'_>,
    hashed: &Hashed<'_>,
) -> Pinning {
    let unpinned = |reason: String| Pinning::Unpinned { reason };
    let program_name = Path::new(config.program())
        .file_name()
        .and_then(OsStr::to_str)
        .unwrap_or_default();
    let (has_lock, has_extra) = (hashed.lockfile, hashed.named);
    // What a partly pinned interpreter launch does cover.
    let covered = || match hashed.entry {
        Some(entry) => format!("the entry file {}", file_name(&entry.path)),
        None => "the interpreter".to_owned(),
    };
    if kind == Kind::PackageRunner && !has_lock {
        return unpinned(format!(
            "`{program_name}` fetches and runs a package by name, and there is no lockfile in the working directory"
        ));
    }
    if kind == Kind::Interpreter
        && program_name == "uv"
        && config.args().iter().any(|a| a == "--with")
        && !has_lock
    {
        return unpinned(
            "`uv run --with` resolves packages at launch, and there is no lockfile".to_owned(),
        );
    }
    if kind == Kind::Interpreter
        && !has_extra
        && let Some(root) = hashed.source_too_large
    {
        // The entry's own tree, or one the interpreter is pointed to (PYTHONPATH, a `.pth`
        // line, PYTHONPYCACHEPREFIX).
        let what = if hashed.entry.is_some_and(|e| e.path.starts_with(root)) {
            "the server's own code beside it in"
        } else {
            "the code it loads from"
        };
        return Pinning::Partly {
            covered: covered(),
            uncovered: format!(
                "{what} {}: more than {SOURCE_ENTRIES} entries there to hash at each launch \
                 (name its code with --identity)",
                root.display()
            ),
        };
    }
    if kind == Kind::Interpreter
        && let Some(library) = hashed.runtime_too_large
    {
        return Pinning::Partly {
            covered: covered(),
            uncovered: format!(
                "the runtime's own library in {}, which the user can write to (its packages' \
                 .pth files run at every start): more than {RUNTIME_ENTRIES} entries there to \
                 look at each launch (run the server from a virtual environment of a smaller \
                 runtime, or of one only root can write)",
                library.display()
            ),
        };
    }
    if kind == Kind::Interpreter && !has_lock && !has_extra {
        let module = config.args().iter().any(|a| a == "-m");
        return match (hashed.entry, module) {
            // The server's own files are hashed, and with an environment the packages it
            // loads: all of its code.
            (Some(_), _) if hashed.environment.is_some() => Pinning::Pinned,
            (Some(entry), _) => Pinning::Partly {
                covered: format!(
                    "the entry file {} and the code beside it",
                    file_name(&entry.path)
                ),
                uncovered: format!(
                    "the packages it loads: there is no lockfile in the working directory \
                     (add one, or name the dependency tree with --identity){}",
                    match dispatch {
                        Dispatch::Direct => "",
                        _ =>
                            "; and the interpreter it is handed to (by a wrapper or a \
                              version-manager shim)",
                    }
                ),
            },
            (None, true) => unpinned(
                "the entry is a module name, not a file, and there is no lockfile".to_owned(),
            ),
            (None, false) => unpinned(
                "no entry file could be found among the arguments, and there is no lockfile"
                    .to_owned(),
            ),
        };
    }
    if dispatch != Dispatch::Direct && !has_extra {
        let uncovered = "the program it hands over to (a wrapper or a version-manager shim): \
                         name it with --identity";
        return match dispatch {
            Dispatch::Script(script) => Pinning::Partly {
                covered: format!("the script {}", file_name(&script.path)),
                uncovered: uncovered.to_owned(),
            },
            Dispatch::Direct | Dispatch::Shell => unpinned(
                "a shell runs the server, and the program it starts is not hashed: name it \
                 with --identity"
                    .to_owned(),
            ),
        };
    }
    Pinning::Pinned
}

/// A path's last component, for a sentence (the whole path when it has none).
pub(super) fn file_name(path: &Path) -> String {
    path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}
