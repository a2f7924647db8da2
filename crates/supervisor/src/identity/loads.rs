//! What an interpreter loads besides its entry file, as the runtime resolves it (issue 16):
//! the entry among the arguments once the options that take a value are skipped (`node -r
//! ./x.js server.js` runs `server.js`), the files preloaded by option (`-r`, `--require`,
//! `--import`, `--loader`, and the same options inside `NODE_OPTIONS`), a Python module named
//! with `-m`, the `node_modules` tree Node resolves packages from, and the environment
//! variables that change what loads (their values are part of the identity).

use std::path::{Path, PathBuf};

use super::program::read_text;

/// Environment variables whose values change what code a process loads: a change to one is
/// a new identity.
pub(crate) const LOADER_VARIABLES: [&str; 26] = [
    "NODE_OPTIONS",
    "NODE_PATH",
    "PYTHONPATH",
    "PYTHONSTARTUP",
    "PYTHONHOME",
    "PYTHONUSERBASE",
    "PYTHONPYCACHEPREFIX",
    "PYTHONPLATLIBDIR",
    "LD_PRELOAD",
    "LD_LIBRARY_PATH",
    "LD_AUDIT",
    "DYLD_INSERT_LIBRARIES",
    "DYLD_LIBRARY_PATH",
    "GCONV_PATH",
    "PERL5OPT",
    "PERL5LIB",
    "PERLLIB",
    "RUBYOPT",
    "RUBYLIB",
    "BASH_ENV",
    "JAVA_TOOL_OPTIONS",
    "_JAVA_OPTIONS",
    "JDK_JAVA_OPTIONS",
    "OPENSSL_CONF",
    "OPENSSL_MODULES",
    "ZDOTDIR",
];

/// The loader variables that name directories an interpreter imports from first.
const SEARCH_PATH_VARIABLES: [&str; 6] = [
    "PYTHONPATH",
    "NODE_PATH",
    "PERL5LIB",
    "PERLLIB",
    "RUBYLIB",
    // Where CPython reads bytecode from instead of `__pycache__`: a `.pyc` there runs in
    // place of its unchanged source.
    "PYTHONPYCACHEPREFIX",
];

/// Node's options that take a value (the next argument, or after `=`).
const NODE_VALUED: [&str; 14] = [
    "-r",
    "--require",
    "--import",
    "--loader",
    "--experimental-loader",
    "-e",
    "--eval",
    "-p",
    "--print",
    "--input-type",
    "-C",
    "--conditions",
    "--env-file",
    "--title",
];
/// Node's options whose value is a file it loads before the entry.
const NODE_PRELOADS: [&str; 5] = [
    "-r",
    "--require",
    "--import",
    "--loader",
    "--experimental-loader",
];
/// Python's options that take a value.
const PYTHON_VALUED: [&str; 5] = ["-m", "-c", "-W", "-X", "--check-hash-based-pycs"];

/// What an interpreter's arguments say it runs.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Plan {
    /// The entry file.
    pub entry: Option<PathBuf>,
    /// Files it loads before the entry.
    pub preloads: Vec<PathBuf>,
    /// Where it imports the server's own code from first ([`source_root`]), when the plan
    /// says more than the entry's place does: Python's working directory with `-m`.
    pub source: Option<PathBuf>,
}

/// The plan of `interpreter` (its file name: `node`, `python3.11`) run with `args` in `cwd`,
/// with `node_options` the value of `NODE_OPTIONS` it gets. `None` for an interpreter this
/// module does not know (the caller then takes the first file among the arguments).
pub(super) fn plan(
    interpreter: &str,
    args: &[String],
    cwd: &Path,
    node_options: Option<&str>,
) -> Option<Plan> {
    let base = interpreter.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
    match base {
        "node" => {
            let mut plan = Plan::default();
            let from_env: Vec<String> = node_options
                .map(|o| o.split_whitespace().map(str::to_owned).collect())
                .unwrap_or_default();
            // NODE_OPTIONS carries options only: its preloads count, never an entry.
            walk(&from_env, &NODE_VALUED, |option, value| {
                if NODE_PRELOADS.contains(&option) {
                    plan.preloads.extend(file(cwd, value));
                }
            });
            let entry = walk(args, &NODE_VALUED, |option, value| {
                if NODE_PRELOADS.contains(&option) {
                    plan.preloads.extend(file(cwd, value));
                }
            });
            plan.entry = entry.and_then(|e| file(cwd, e));
            Some(plan)
        }
        "python" => {
            let mut module = None;
            let mut command = false;
            let entry = walk(args, &PYTHON_VALUED, |option, value| {
                if option == "-m" && module.is_none() {
                    module = Some(value.to_owned());
                }
                command |= option == "-c";
            });
            let mut plan = Plan::default();
            match module {
                // `-m` puts the working directory first on the import path, even for a
                // module installed elsewhere: a file there shadows any module it imports.
                Some(name) => {
                    plan.entry = module_file(cwd, &name);
                    plan.source = Some(cwd.to_owned());
                }
                // `-c` and a program on standard input put the working directory first too.
                None if command || entry == Some("-") => plan.source = Some(cwd.to_owned()),
                None => plan.entry = entry.and_then(|e| file(cwd, e)),
            }
            Some(plan)
        }
        _ => None,
    }
}

/// Walks `args`, calling `valued(option, value)` for each option of `valued_options` with its
/// value; returns the first positional argument (the entry), where option parsing stops.
fn walk<'a>(
    args: &'a [String],
    valued_options: &[&str],
    mut valued: impl FnMut(&str, &'a str),
) -> Option<&'a str> {
    let mut words = args.iter();
    while let Some(word) = words.next() {
        if word == "--" {
            return words.next().map(String::as_str);
        }
        if !word.starts_with('-') || word == "-" {
            return Some(word);
        }
        if let Some((option, value)) = word.split_once('=')
            && valued_options.contains(&option)
        {
            valued(option, value);
            continue;
        }
        if valued_options.contains(&word.as_str()) {
            match words.next() {
                Some(value) => valued(word, value),
                None => return None,
            }
            // `-m mod` and `-c cmd` end Python's options: what follows is the program's.
            if word == "-m" || word == "-c" {
                return None;
            }
        }
    }
    None
}

/// `name` as a file relative to `cwd`, when it is one (a package name like `tsx` is not).
fn file(cwd: &Path, name: &str) -> Option<PathBuf> {
    let path = cwd.join(name);
    path.is_file().then_some(path)
}

/// The file a `python -m name` runs from `cwd`: `name/__main__.py` or `name.py` (dots as
/// directories). `None` for a module found only on the path (an installed package).
fn module_file(cwd: &Path, name: &str) -> Option<PathBuf> {
    let rel: PathBuf = name.split('.').collect();
    [rel.join("__main__.py"), rel.with_extension("py")]
        .into_iter()
        .map(|p| cwd.join(p))
        .find(|p| p.is_file())
}

/// Where `interpreter` (its file name) imports the server's own code from, besides the entry
/// file at `entry`: Node resolves relative requires within the package that holds the entry
/// (the nearest directory with a `package.json`, else the entry's own); Python and the others
/// put the entry's directory first on their import path.
pub(super) fn source_root(interpreter: &str, entry: &Path) -> Option<PathBuf> {
    let dir = entry.parent()?;
    if interpreter.starts_with("node") {
        let package = dir
            .ancestors()
            .find(|d| d.join("package.json").is_file())
            .unwrap_or(dir);
        return Some(package.to_owned());
    }
    Some(dir.to_owned())
}

/// Packages an interpreter loads from the user's home whatever the server's configuration:
/// Python's user site (`site-packages` under `PYTHONUSERBASE`, else `~/.local`, for the
/// runtime's version; its `.pth` files and `usercustomize` run at every start), and the
/// folders Node searches last for a bare require (`~/.node_modules`, `~/.node_libraries`).
/// Those that exist. Python's version is read from the name of the `binary` that runs
/// (`python3.11`) when it says one: the runtime's answer to `--version` may be a script's
/// of the server's own (one in its directory, run by the real interpreter), which would
/// point the identity at another version's user site than the one that loads.
pub(super) fn user_packages(
    interpreter: &str,
    binary: &Path,
    runtime: Option<&str>,
    loader_env: &[String],
    home: Option<&Path>,
) -> Vec<PathBuf> {
    let candidates: Vec<PathBuf> = if interpreter.starts_with("python") {
        // `python3.13t`, a free-threaded build, has a user site of its own (`python3.13t`);
        // `python3.7m` and a debug build's `d` share their version's.
        let named = binary
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_prefix("python"))
            .and_then(|v| {
                let flags = &v[v.trim_end_matches(['m', 't', 'd']).len()..];
                let (major, minor) = v[..v.len() - flags.len()].split_once('.')?;
                let digits = |p: &str| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit());
                let free_threaded = if flags.contains('t') { "t" } else { "" };
                (digits(major) && digits(minor)).then(|| format!("{major}.{minor}{free_threaded}"))
            });
        let version = named.or_else(|| {
            runtime
                .and_then(|r| r.strip_prefix("Python "))
                .and_then(|v| {
                    let mut parts = v.split('.');
                    Some(format!("{}.{}", parts.next()?, parts.next()?))
                })
        });
        let base = loader_env
            .iter()
            .find_map(|v| v.strip_prefix("PYTHONUSERBASE="))
            .map(PathBuf::from)
            .or_else(|| home.map(|h| h.join(".local")));
        match (base, version) {
            (Some(base), Some(version)) => {
                vec![base.join(format!("lib/python{version}/site-packages"))]
            }
            _ => Vec::new(),
        }
    } else if interpreter.starts_with("node") {
        home.map(|h| vec![h.join(".node_modules"), h.join(".node_libraries")])
            .unwrap_or_default()
    } else {
        Vec::new()
    };
    candidates.into_iter().filter(|p| p.is_dir()).collect()
}

/// The directories the loader variables put on an interpreter's search path (`PYTHONPATH`,
/// `NODE_PATH`, `PERL5LIB`, `PERLLIB`, `RUBYLIB`: separated by colons, relative to the working
/// directory), those that exist: what they hold is imported before the runtime's own.
pub(super) fn search_paths(loader_env: &[String], cwd: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = loader_env
        .iter()
        .filter_map(|v| v.split_once('='))
        .filter(|(name, _)| SEARCH_PATH_VARIABLES.contains(name))
        .flat_map(|(name, value)| value.split(':').map(move |dir| (name, dir)))
        // An empty entry of PYTHONPATH is the working directory to CPython.
        .filter(|(name, dir)| !dir.is_empty() || *name == "PYTHONPATH")
        .map(|(_, dir)| cwd.join(dir))
        // A directory, or an archive imported from (`PYTHONPATH=deps.zip`).
        .filter(|dir| dir.exists())
        .collect();
    dirs.sort();
    dirs.dedup();
    dirs
}

/// What a Python runtime loads from its own installation, as CPython finds it: the trees to
/// fingerprint and the files that matter by being there at all.
#[derive(Debug, Default)]
pub(super) struct RuntimeCode {
    /// `lib` and `lib64` (and `ssl`) of each prefix the user can write to: the standard library
    /// and its `pythonXY.zip`, read before it (present or not), `site-packages` (its `.pth`
    /// files run at every start), `lib-dynload`, and the shared `libpython` and the libraries
    /// its modules link.
    pub roots: Vec<PathBuf>,
    /// Each `pyvenv.cfg` CPython looks for beside the executable and in the directory above,
    /// present or not: one planted there moves the standard library elsewhere.
    pub probes: Vec<PathBuf>,
}

/// What the Python runtime launched as `launched`, whose binary is `binary` (links followed),
/// loads from its own installation (see [`RuntimeCode`]). A prefix is the one `PYTHONHOME`
/// names (both parts), the one the `home` of a `pyvenv.cfg` beside the executable names (a
/// virtual environment, made with links or `--copies`), and the one above the binary's
/// directory. A prefix only root can write (the system's) is left out, and so are `/` and
/// `/usr` for an engine run as root: the distribution's own files, not an installation of
/// the user's. A relative `PYTHONHOME` is taken from `cwd`, the server's working directory,
/// as the interpreter started there takes it.
pub(super) fn runtime_code(
    launched: &Path,
    binary: &Path,
    interpreter: &str,
    loader_env: &[String],
    cwd: &Path,
) -> RuntimeCode {
    if !interpreter.starts_with("python") {
        return RuntimeCode::default();
    }
    let mut probes: Vec<PathBuf> = [launched, binary]
        .iter()
        .filter_map(|p| p.parent())
        .flat_map(|dir| {
            // CPython's search for its library starts beside the executable: a `lib` (or a
            // source build's `Lib`, `Modules`, `pybuilddir.txt`) planted there is taken first.
            [
                "../pyvenv.cfg",
                "pyvenv.cfg",
                "lib",
                "Lib",
                "Modules",
                "pybuilddir.txt",
            ]
            .map(|name| dir.join(name))
        })
        // 3.11 and later: `<executable>._pth` replaces the whole import path.
        .chain([launched, binary].iter().map(|p| {
            let mut name = p.as_os_str().to_owned();
            name.push("._pth");
            PathBuf::from(name)
        }))
        .map(|p| normalize(&p))
        .collect();
    probes.sort();
    probes.dedup();
    let mut prefixes: Vec<PathBuf> = Vec::new();
    if let Some(home) = loader_env
        .iter()
        .find_map(|v| v.strip_prefix("PYTHONHOME="))
    {
        // From the working directory as the process sees it: its real path (getcwd).
        let cwd = std::fs::canonicalize(cwd).unwrap_or_else(|_| cwd.to_owned());
        prefixes.extend(
            home.split(':')
                .filter(|p| !p.is_empty())
                .map(|p| cwd.join(p)),
        );
    }
    for cfg in probes.iter().filter(|p| p.ends_with("pyvenv.cfg")) {
        if let Some(home) = venv_home(cfg) {
            prefixes.extend(home.parent().map(Path::to_owned));
        }
    }
    prefixes.extend(binary.parent().and_then(Path::parent).map(Path::to_owned));
    let root_runs = nix::unistd::geteuid().is_root();
    let mut roots: Vec<PathBuf> = Vec::new();
    for prefix in prefixes {
        let prefix = normalize(&prefix);
        if root_runs && (prefix == Path::new("/") || prefix == Path::new("/usr")) {
            continue;
        }
        let libs: Vec<PathBuf> = ["lib", "lib64"]
            .iter()
            .map(|l| prefix.join(l))
            .filter(|l| l.is_dir())
            .collect();
        if libs.is_empty() || !(writable(&prefix) || libs.iter().any(|l| writable_below(l))) {
            continue;
        }
        roots.extend(libs);
        roots.extend(Some(prefix.join("ssl")).filter(|s| s.is_dir()));
    }
    roots.sort();
    roots.dedup();
    RuntimeCode { roots, probes }
}

/// The `home` a `pyvenv.cfg` names (the base runtime's `bin`), if the file is there.
fn venv_home(cfg: &Path) -> Option<PathBuf> {
    let text = read_text(cfg, u64::MAX)?;
    text.lines().find_map(|line| {
        let (key, value) = line.split_once('=')?;
        key.trim()
            .eq_ignore_ascii_case("home")
            .then(|| PathBuf::from(value.trim()))
    })
}

/// `path` with `.` and `..` taken out as written (links are not followed).
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// Whether this process could change what `dir` holds, or what a directory one or two levels
/// below it holds (a prefix's `lib/python3.11/site-packages`).
fn writable_below(dir: &Path) -> bool {
    if writable(dir) {
        return true;
    }
    let children = |d: &Path| -> Vec<PathBuf> {
        std::fs::read_dir(d)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("python"))
            })
            .collect()
    };
    children(dir).iter().any(|d| {
        writable(d)
            || ["site-packages", "dist-packages", "lib-dynload"]
                .iter()
                .any(|s| writable(&d.join(s)))
    })
}

/// The directories the path lines of the `.pth` files in `site_dirs` add to `sys.path` (an
/// editable install's source, `easy-install.pth`'s eggs), those that exist: what they hold is
/// imported like anything installed, a planted `sitecustomize.py` there included.
pub(super) fn pth_paths(site_dirs: &[PathBuf]) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = site_dirs
        .iter()
        .flat_map(|site| {
            std::fs::read_dir(site)
                .into_iter()
                .flatten()
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|e| e == "pth"))
                .filter_map(|pth| read_text(&pth, u64::MAX))
                .flat_map(|text| {
                    text.lines()
                        .map(str::trim)
                        .filter(|l| {
                            !l.is_empty() && !l.starts_with('#') && !l.starts_with("import")
                        })
                        .map(|l| site.join(l))
                        .collect::<Vec<_>>()
                })
                .collect::<Vec<_>>()
        })
        .filter_map(|p| std::fs::canonicalize(p).ok())
        // What only root can change (`/usr/lib/python3/dist-packages`) needs no walk.
        .filter(|p| writable(p))
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The `site-packages` (and Debian's `dist-packages`) directories under `root`'s
/// `lib*/python*/`.
pub(super) fn site_dirs(root: &Path) -> Vec<PathBuf> {
    let under = |dir: &Path| -> Vec<PathBuf> {
        std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .collect()
    };
    let libs: Vec<PathBuf> = if root
        .file_name()
        .is_some_and(|n| n.to_string_lossy().starts_with("lib"))
    {
        vec![root.to_owned()]
    } else {
        ["lib", "lib64"].iter().map(|l| root.join(l)).collect()
    };
    libs.iter()
        .flat_map(|lib| under(lib))
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("python"))
        })
        .flat_map(|py| [py.join("site-packages"), py.join("dist-packages")])
        .filter(|p| p.is_dir())
        .collect()
}

/// Whether this process could change what `path` holds: it owns it, or may write to it.
fn writable(path: &Path) -> bool {
    super::ours(path) || nix::unistd::access(path, nix::unistd::AccessFlags::W_OK).is_ok()
}

/// The `node_modules` directory Node resolves `entry`'s packages from: the nearest one in
/// its directory or above.
pub(super) fn node_modules(entry: &Path) -> Option<PathBuf> {
    entry
        .ancestors()
        .skip(1)
        .map(|dir| dir.join("node_modules"))
        .find(|dir| dir.is_dir())
}

/// The libraries the dynamic loader is told to load into the process first (`LD_PRELOAD`,
/// `DYLD_INSERT_LIBRARIES`: paths separated by colons or spaces), those that are files.
pub(super) fn preloaded_libraries(loader_env: &[String], cwd: &Path) -> Vec<PathBuf> {
    loader_env
        .iter()
        .filter_map(|v| {
            v.strip_prefix("LD_PRELOAD=")
                .or_else(|| v.strip_prefix("DYLD_INSERT_LIBRARIES="))
        })
        .flat_map(|list| list.split([':', ' ']))
        .filter(|p| !p.is_empty())
        .map(|p| cwd.join(p))
        .filter(|p| p.is_file())
        .collect()
}

/// The values of [`LOADER_VARIABLES`] the process gets (`NAME=value`, sorted): its own
/// configured ones over the engine's.
pub(super) fn loader_env(configured: &[(String, String)]) -> Vec<String> {
    let mut out: Vec<String> = LOADER_VARIABLES
        .iter()
        .filter_map(|name| {
            let value = configured
                .iter()
                .rev()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.clone())
                .or_else(|| std::env::var(name).ok())?;
            Some(format!("{name}={value}"))
        })
        .collect();
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| (*w).to_owned()).collect()
    }

    #[test]
    fn node_runs_the_entry_after_its_options_and_loads_the_preloads_first() {
        let dir = tempfile::tempdir().expect("tempdir");
        for name in ["server.js", "pre.js", "hook.mjs", "env-pre.js"] {
            std::fs::write(dir.path().join(name), "//").expect("write");
        }
        let plan = plan(
            "node",
            &args(&[
                "-r",
                "./pre.js",
                "--import=./hook.mjs",
                "--max-old-space-size=64",
                "--title",
                "t",
                "server.js",
                "--port",
                "1",
            ]),
            dir.path(),
            Some("--require ./env-pre.js --require tsx"),
        )
        .expect("node");
        assert_eq!(plan.entry, Some(dir.path().join("server.js")));
        assert_eq!(
            plan.preloads,
            [
                dir.path().join("./env-pre.js"),
                dir.path().join("./pre.js"),
                dir.path().join("./hook.mjs")
            ]
        );
    }

    #[test]
    fn python_runs_a_module_from_the_working_directory_or_the_first_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(dir.path().join("app/server")).expect("dirs");
        std::fs::write(dir.path().join("app/server/__main__.py"), "").expect("write");
        std::fs::write(dir.path().join("main.py"), "").expect("write");
        let module = plan(
            "python3.11",
            &args(&["-u", "-m", "app.server", "main.py"]),
            dir.path(),
            None,
        )
        .expect("python");
        assert_eq!(
            module.entry,
            Some(dir.path().join("app/server/__main__.py"))
        );
        let installed = plan(
            "python3",
            &args(&["-m", "mcp_server_time"]),
            dir.path(),
            None,
        )
        .expect("python");
        assert!(installed.entry.is_none());
        let script =
            plan("python", &args(&["-X", "dev", "main.py"]), dir.path(), None).expect("python");
        assert_eq!(script.entry, Some(dir.path().join("main.py")));
        assert_eq!(plan("ruby", &args(&["x.rb"]), dir.path(), None), None);
    }

    #[test]
    fn the_libraries_ld_preload_names_are_files_to_hash() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("hook.so"), "ELF").expect("write");
        let env = [
            "LD_PRELOAD=./hook.so:/no/such.so".to_owned(),
            "PYTHONPATH=x".to_owned(),
        ];
        assert_eq!(
            preloaded_libraries(&env, dir.path()),
            [dir.path().join("./hook.so")]
        );
    }

    #[test]
    fn the_nearest_node_modules_above_the_entry_is_the_one_node_uses() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(dir.path().join("node_modules/a")).expect("dirs");
        std::fs::create_dir_all(dir.path().join("pkg/dist")).expect("dirs");
        let entry = dir.path().join("pkg/dist/index.js");
        assert_eq!(node_modules(&entry), Some(dir.path().join("node_modules")));
        std::fs::create_dir_all(dir.path().join("pkg/node_modules")).expect("dirs");
        assert_eq!(
            node_modules(&entry),
            Some(dir.path().join("pkg/node_modules"))
        );
    }
}
