//! Identity capture against real files in a temporary directory: interpreters and their
//! entries, `#!` chains and shell wrappers, package runners, re-hashing, a missing program.

use super::*;

fn config(dir: &Path, command: &[&str]) -> ServerConfig {
    ServerConfig::new(
        "t".parse().expect("label"),
        command.iter().map(|s| (*s).to_owned()).collect(),
        Some(dir.to_owned()),
        vec!["API_TOKEN=never-recorded".parse().expect("env")],
    )
    .expect("config")
}

fn write_exec(path: &Path, text: &str) {
    std::fs::write(path, text).expect("write");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}

#[test]
fn an_interpreter_gets_its_entry_lockfile_and_runtime() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("server.py"), "print('hi')").expect("write");
    std::fs::write(dir.path().join("requirements.txt"), "mcp==1.0").expect("write");
    let cache = DigestCache::new();
    // The real interpreter binary, not a version-manager shim in front of it.
    let python = real_python();
    let seen = cache
        .observe(&config(dir.path(), &[&python, "-u", "server.py"]))
        .expect("observe");
    assert!(seen.program.is_absolute(), "{:?}", seen.program);
    assert_eq!(seen.launch_command[1..], ["-u", "server.py"]);
    assert_eq!(
        seen.entry.as_ref().map(|e| e.path.clone()),
        Some(dir.path().join("server.py"))
    );
    assert_eq!(
        seen.entry.as_ref().map(|e| e.digest),
        Some(Digest::of(b"print('hi')"))
    );
    assert_eq!(
        seen.lockfiles
            .iter()
            .map(|a| a.path.clone())
            .collect::<Vec<_>>(),
        [dir.path().join("requirements.txt")]
    );
    assert!(
        seen.runtime
            .as_deref()
            .is_some_and(|r| r.starts_with("Python 3")),
        "{:?}",
        seen.runtime
    );
    assert_eq!(seen.pinning, Pinning::Pinned);
    // Names, never values.
    assert!(seen.env_names.contains(&"API_TOKEN".to_owned()));
    assert!(!format!("{seen:?}").contains("never-recorded"));
}

fn real_python() -> String {
    let out = std::process::Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .expect("python3 runs");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

#[test]
fn a_shebang_script_is_the_entry_of_its_interpreter_and_a_shell_wrapper_is_a_wrapper() {
    let dir = tempfile::tempdir().expect("tempdir");
    let tool = dir.path().join("mcp-tool");
    write_exec(&tool, "#!/usr/bin/env python3\nprint(1)\n");
    let wrapper = dir.path().join("run.sh");
    write_exec(&wrapper, "#!/bin/sh\nexec ./mcp-tool\n");
    let cache = DigestCache::new();
    // `python3` on PATH is the interpreter itself here, not a version manager's shim.
    let python = PathBuf::from(real_python());
    let mut direct = config(dir.path(), &["./mcp-tool"]);
    direct.env.push(
        format!(
            "PATH={}:/usr/bin:/bin",
            python.parent().expect("dir").display()
        )
        .parse()
        .expect("env"),
    );

    let seen = cache.observe(&direct).expect("observe");
    assert_eq!(seen.entry.map(|e| e.path), Some(tool.clone()));
    // The script and the code beside it are hashed; with no lockfile, the packages it
    // imports are not.
    assert_eq!(
        seen.pinning,
        Pinning::Partly {
            covered: "the entry file mcp-tool and the code beside it".into(),
            uncovered: "the packages it loads: there is no lockfile in the working directory \
                        (add one, or name the dependency tree with --identity)"
                .into(),
        }
    );
    assert!(
        seen.runtime
            .as_deref()
            .is_some_and(|r| r.starts_with("Python 3")),
        "{:?}",
        seen.runtime
    );

    let seen = cache
        .observe(&config(dir.path(), &["./run.sh"]))
        .expect("observe");
    assert_eq!(
        seen.wrappers
            .iter()
            .map(|w| w.path.clone())
            .collect::<Vec<_>>(),
        [wrapper]
    );
    assert!(
        matches!(seen.pinning, Pinning::Partly { ref covered, ref uncovered }
            if covered == "the script run.sh" && uncovered.starts_with("the program it hands over to")),
        "{:?}",
        seen.pinning
    );
    assert!(
        seen.entry.is_none(),
        "a shell wrapper's target is unknown: {:?}",
        seen.entry
    );
}

#[test]
fn a_package_runner_without_a_lockfile_is_unpinned() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).expect("mkdir");
    write_exec(&bin.join("npx"), "#!/usr/bin/env node\n");
    let mut cfg = config(dir.path(), &["npx", "-y", "some-server"]);
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    cfg.env.push(postern_domain::EnvVar {
        name: "PATH".into(),
        value: path,
    });
    let cache = DigestCache::new();
    let seen = cache.observe(&cfg).expect("observe");
    assert!(
        matches!(&seen.pinning, Pinning::Unpinned { reason } if reason.contains("no lockfile")),
        "{:?}",
        seen.pinning
    );
    std::fs::write(dir.path().join("package-lock.json"), "{}").expect("write");
    assert_eq!(
        cache.observe(&cfg).expect("observe").pinning,
        Pinning::Pinned
    );
}

#[test]
fn a_changed_file_is_rehashed_and_a_tree_digest_sees_any_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let dist = dir.path().join("dist");
    std::fs::create_dir_all(dist.join("lib")).expect("mkdir");
    std::fs::write(dist.join("server.js"), "a").expect("write");
    std::fs::write(dist.join("lib/util.js"), "u1").expect("write");
    let cache = DigestCache::new();
    let file = cache.artifact(&dist.join("server.js")).expect("hash");
    let tree = cache.artifact(&dist).expect("hash");
    assert_eq!(
        cache.artifact(&dist).expect("again").digest,
        tree.digest,
        "unchanged tree, same digest"
    );

    std::fs::write(dist.join("server.js"), "b").expect("write");
    assert_ne!(
        cache
            .artifact(&dist.join("server.js"))
            .expect("rehash")
            .digest,
        file.digest
    );
    std::fs::write(dist.join("lib/util.js"), "u2").expect("write");
    assert_ne!(cache.artifact(&dist).expect("rehash").digest, tree.digest);
}

#[test]
fn a_missing_program_names_itself() {
    let dir = tempfile::tempdir().expect("tempdir");
    let err = DigestCache::new()
        .observe(&config(dir.path(), &["no-such-server-xyz"]))
        .expect_err("missing");
    assert_eq!(err.to_string(), "cannot find `no-such-server-xyz` on PATH");
}

#[test]
fn a_python_virtual_environment_and_its_bytecode_caches_are_part_of_the_identity() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("server.py"), "import mcp").expect("write");
    let venv = dir.path().join(".venv");
    let site = venv.join("lib/python3/site-packages");
    std::fs::create_dir_all(venv.join("bin")).expect("bin");
    std::fs::create_dir_all(site.join("mcp/__pycache__")).expect("site-packages");
    std::fs::write(venv.join("pyvenv.cfg"), "home = /usr/bin\n").expect("cfg");
    std::os::unix::fs::symlink(real_python(), venv.join("bin/python")).expect("link");
    std::fs::write(site.join("mcp/__init__.py"), "x = 1").expect("write");
    let observe = || {
        DigestCache::new()
            .observe(&config(dir.path(), &[".venv/bin/python", "server.py"]))
            .expect("observe")
    };

    let first = observe();
    let environment = |seen: &Observed| {
        seen.extra_paths
            .iter()
            .find(|a| a.path == venv)
            .map(|a| a.digest)
            .expect("the venv among the identity paths")
    };
    let before = environment(&first);
    // The packages are hashed, and the server's own code beside its entry: all of it.
    assert_eq!(first.pinning, Pinning::Pinned);
    assert!(
        first.extra_paths.iter().any(|a| a.path == dir.path()),
        "the code beside the entry: {:?}",
        first.extra_paths
    );

    // Python loads a cached module whose header matches its source: a planted one is code.
    std::fs::write(
        site.join("mcp/__pycache__/__init__.cpython-311.pyc"),
        "planted bytecode",
    )
    .expect("pyc");
    let planted = environment(&observe());
    assert_ne!(planted, before);

    // A `.pth` file dropped into site-packages (it runs at every start) is new code.
    std::fs::write(site.join("zz.pth"), "import os").expect("pth");
    assert_ne!(environment(&observe()), planted);

    // The launches write no caches for the digest to churn on.
    assert!(
        first
            .env_names
            .contains(&"PYTHONDONTWRITEBYTECODE".to_owned()),
        "{:?}",
        first.env_names
    );

    // The system interpreter has no environment to add: only the code beside the entry.
    let system = DigestCache::new()
        .observe(&config(dir.path(), &[&real_python(), "server.py"]))
        .expect("observe");
    assert_eq!(
        own_trees(&system),
        [dir.path()],
        "the venv beside it is not walked"
    );
}

/// The trees hashed for `seen`, without the test interpreter's own library (hashed when the
/// user running the tests can write to it: a runtime in the home, or any as root).
fn own_trees(seen: &Observed) -> Vec<&Path> {
    let binary = std::fs::canonicalize(real_python()).expect("the interpreter");
    let prefix = binary.parent().and_then(Path::parent).expect("a prefix");
    seen.extra_paths
        .iter()
        .map(|a| a.path.as_path())
        .filter(|p| !p.starts_with(prefix) && !p.ends_with("pyvenv.cfg"))
        .collect()
}

/// The identity of `config` as a launch records it.
fn identity_of(config: &ServerConfig) -> Digest {
    crate::record(
        config,
        DigestCache::new().observe(config).expect("observe"),
        0,
        0,
    )
    .identity_digest()
}

/// The agent's move against a server a person approved (red team, 2026-12-06): the entry file
/// stays byte for byte the same while a module it imports from beside it is rewritten, and a
/// restart (which takes no proof) would launch the new code under the old identity, with the
/// credential released to it. The modules beside the entry are part of the identity: the new
/// code is a new identity. What the server writes beside its code (a log, its data) is not.
#[test]
fn the_modules_beside_the_entry_are_part_of_the_identity_and_what_the_server_writes_is_not() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("server.py"), "import helper, pkg.tools").expect("write");
    std::fs::write(dir.path().join("helper.py"), "MARK = 'benign'").expect("write");
    std::fs::write(dir.path().join("requirements.txt"), "mcp==1.0").expect("write");
    std::fs::create_dir_all(dir.path().join("pkg")).expect("pkg");
    std::fs::write(dir.path().join("pkg/tools.py"), "").expect("write");
    let config = config(dir.path(), &[&real_python(), "server.py"]);
    let seen = DigestCache::new().observe(&config).expect("observe");
    assert_eq!(seen.pinning, Pinning::Pinned);
    let approved = identity_of(&config);

    // What the server writes as it runs, and what is no code, is not its identity.
    std::fs::write(dir.path().join("server.log"), "a call").expect("log");
    std::fs::write(dir.path().join("state.json"), "{}").expect("data");
    std::fs::create_dir_all(dir.path().join("cache")).expect("dir");
    assert_eq!(identity_of(&config), approved);

    let rewritten = |file: &str, text: &str, why: &str| {
        let path = dir.path().join(file);
        let before = std::fs::read(&path).ok();
        std::fs::write(&path, text).expect("write");
        assert_ne!(identity_of(&config), approved, "{why}");
        match before {
            Some(before) => std::fs::write(&path, before).expect("restore"),
            None => std::fs::remove_file(&path).expect("remove"),
        }
        assert_eq!(identity_of(&config), approved, "{why}, undone");
    };
    rewritten(
        "helper.py",
        "import os; open('stolen', 'w').write(os.environ['TOK'])",
        "a module beside the entry rewritten",
    );
    rewritten(
        "pkg/tools.py",
        "import os",
        "a module in a package beside it",
    );
    rewritten(
        "json.py",
        "import os",
        "a module shadowing the standard library's",
    );
    std::fs::create_dir_all(dir.path().join("__pycache__")).expect("cache dir");
    rewritten(
        "__pycache__/helper.cpython-311.pyc",
        "planted bytecode",
        "a cached module planted beside the entry",
    );
    // A package that says it is a virtual environment is still a package Python imports.
    std::fs::create_dir_all(dir.path().join("mcp")).expect("package");
    std::fs::write(dir.path().join("mcp/pyvenv.cfg"), "").expect("cfg");
    rewritten(
        "mcp/__init__.py",
        "import os",
        "a package dressed as a venv",
    );
    std::fs::remove_dir_all(dir.path().join("mcp")).expect("remove");

    // A module that is a link: what it names is what is imported.
    let outside = tempfile::tempdir().expect("outside");
    std::fs::write(outside.path().join("shared.py"), "X = 1").expect("write");
    std::os::unix::fs::symlink(
        outside.path().join("shared.py"),
        dir.path().join("shared.py"),
    )
    .expect("link");
    let linked = identity_of(&config);
    std::fs::write(outside.path().join("shared.py"), "import os").expect("rewrite");
    assert_ne!(identity_of(&config), linked, "the linked module rewritten");
}

/// The entry is a link to a build's output elsewhere: Python imports from beside the file it
/// names, so that is the code hashed with it.
#[test]
fn a_linked_entry_brings_the_code_beside_the_file_it_names() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (app, build) = (dir.path().join("app"), dir.path().join("build"));
    std::fs::create_dir_all(&app).expect("app");
    std::fs::create_dir_all(&build).expect("build");
    std::fs::write(build.join("server.py"), "import helper").expect("write");
    std::fs::write(build.join("helper.py"), "").expect("write");
    std::os::unix::fs::symlink(build.join("server.py"), app.join("server.py")).expect("link");
    let config = config(&app, &[&real_python(), "server.py"]);
    let before = identity_of(&config);
    std::fs::write(build.join("helper.py"), "import os").expect("rewrite");
    assert_ne!(identity_of(&config), before);
}

/// `python -m` puts the working directory first on the import path even when the module is
/// installed elsewhere: a file there that shadows a module it imports is part of its identity.
#[test]
fn a_module_run_takes_the_code_in_its_working_directory() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = config(dir.path(), &[&real_python(), "-m", "json.tool"]);
    let before = identity_of(&config);
    std::fs::write(dir.path().join("codecs.py"), "import os").expect("write");
    assert_ne!(identity_of(&config), before);
}

/// A source tree too large to walk at every launch is left out, and the server is then partly
/// pinned with the reason; the packages Python loads from the user's home (its user site,
/// where a `.pth` runs at every start) are part of the identity.
#[test]
fn a_source_tree_too_large_to_hash_is_said_and_the_users_site_packages_are_hashed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let code = dir.path().join("code");
    std::fs::create_dir_all(code.join("many")).expect("dirs");
    std::fs::write(code.join("server.py"), "").expect("write");
    std::fs::write(code.join("requirements.txt"), "").expect("write");
    for i in 0..=SOURCE_ENTRIES {
        std::fs::write(code.join(format!("many/{i}")), "").expect("write");
    }
    let home = dir.path().join("home");
    let mut config = config(&code, &[&real_python(), "server.py"]);
    config
        .env
        .push(format!("HOME={}", home.display()).parse().expect("env"));
    let seen = DigestCache::new().observe(&config).expect("observe");
    match &seen.pinning {
        Pinning::Partly { covered, uncovered } => {
            assert_eq!(covered, "the entry file server.py");
            assert!(
                uncovered.starts_with(&format!(
                    "the server's own code beside it in {}: more than 20000 entries",
                    code.display()
                )),
                "{uncovered}"
            );
        }
        other => panic!("{other:?}"),
    }
    assert!(own_trees(&seen).is_empty(), "{:?}", seen.extra_paths);

    // The user site of this interpreter's version, under the launch's HOME.
    let version = seen
        .runtime
        .as_deref()
        .and_then(|r| r.strip_prefix("Python "))
        .map(|v| v.split('.').take(2).collect::<Vec<_>>().join("."))
        .expect("a Python version");
    let site = home.join(format!(".local/lib/python{version}/site-packages"));
    std::fs::create_dir_all(&site).expect("site");
    let before = identity_of(&config);
    let seen = DigestCache::new().observe(&config).expect("observe");
    assert!(
        seen.extra_paths.iter().any(|a| a.path == site),
        "{:?}",
        seen.extra_paths
    );
    std::fs::write(site.join("zz.pth"), "import os").expect("pth");
    assert_ne!(identity_of(&config), before);
}

/// Node resolves a relative require within the package that holds the entry: the package's own
/// files (not its `node_modules`, hashed on their own) are part of the identity.
#[test]
fn nodes_entry_brings_its_packages_own_files() {
    let Some(node) = node() else {
        panic!("node is not on PATH: the end-to-end setup installs it");
    };
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir_all(dir.path().join("dist")).expect("dist");
    std::fs::create_dir_all(dir.path().join("lib")).expect("lib");
    std::fs::create_dir_all(dir.path().join("node_modules/dep")).expect("deps");
    std::fs::write(dir.path().join("package.json"), "{}").expect("write");
    std::fs::write(dir.path().join("dist/index.js"), "require('../lib/x')").expect("write");
    std::fs::write(dir.path().join("lib/x.js"), "").expect("write");
    let config = config(dir.path(), &[&node, "dist/index.js"]);
    let seen = DigestCache::new().observe(&config).expect("observe");
    let paths: Vec<&Path> = seen.extra_paths.iter().map(|a| a.path.as_path()).collect();
    assert_eq!(
        paths,
        [dir.path().join("node_modules").as_path(), dir.path()],
        "the packages, then the package's own files"
    );
    let before = identity_of(&config);
    std::fs::write(dir.path().join("lib/x.js"), "process.env").expect("write");
    let after = identity_of(&config);
    assert_ne!(after, before);
    // Node tries `./util` before `./util.js`: a file without an extension is code to it.
    std::fs::write(dir.path().join("lib/x"), "process.env").expect("write");
    let extensionless = identity_of(&config);
    assert_ne!(extensionless, after);
    // A bare require from lib/ looks in lib/node_modules before the package's own.
    std::fs::create_dir_all(dir.path().join("lib/node_modules/dep")).expect("dirs");
    std::fs::write(dir.path().join("lib/node_modules/dep/index.js"), "").expect("write");
    assert_ne!(identity_of(&config), extensionless);
}

/// `node` as found on PATH (the test machine has Node.js for the end-to-end servers).
fn node() -> Option<String> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join("node"))
        .find(|p| p.is_file())
        .map(|p| p.display().to_string())
}

/// Issue 16: the record covers what Node loads. `node -r ./pre.js server.js` runs server.js
/// (not the preload), the preload and the `node_modules` tree are hashed, and the value of
/// NODE_OPTIONS (and the file it preloads) is part of the identity: a change to any of them is
/// another identity.
#[test]
fn the_record_covers_what_node_loads_preloads_packages_and_node_options() {
    let Some(node) = node() else {
        panic!("node is not on PATH: the end-to-end setup installs it");
    };
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("server.js"), "require('dep')").expect("write");
    std::fs::write(dir.path().join("pre.js"), "// preload").expect("write");
    std::fs::write(dir.path().join("env-pre.js"), "// from NODE_OPTIONS").expect("write");
    std::fs::create_dir_all(dir.path().join("node_modules/dep")).expect("dirs");
    std::fs::write(
        dir.path().join("node_modules/dep/index.js"),
        "module.exports = 1",
    )
    .expect("write");
    let observe = |node_options: &str| {
        let mut config = config(dir.path(), &[&node, "-r", "./pre.js", "server.js"]);
        config
            .env
            .push(format!("NODE_OPTIONS={node_options}").parse().expect("env"));
        DigestCache::new().observe(&config).expect("observe")
    };
    let digest_of = |seen: &Observed, name: &str| {
        seen.extra_paths
            .iter()
            .find(|a| a.path.file_name().is_some_and(|n| n == name))
            .map(|a| a.digest)
            .unwrap_or_else(|| panic!("{name} among the identity paths: {:?}", seen.extra_paths))
    };

    let first = observe("--require ./env-pre.js");
    assert_eq!(
        first.entry.as_ref().map(|e| e.path.clone()),
        Some(dir.path().join("server.js")),
        "the entry is the file after the options, not the preload"
    );
    assert!(
        first
            .loader_env
            .contains(&"NODE_OPTIONS=--require ./env-pre.js".to_owned()),
        "{:?}",
        first.loader_env
    );
    let (pre, env_pre, modules) = (
        digest_of(&first, "pre.js"),
        digest_of(&first, "env-pre.js"),
        digest_of(&first, "node_modules"),
    );

    // A file changed under node_modules.
    std::fs::write(
        dir.path().join("node_modules/dep/index.js"),
        "module.exports = 2",
    )
    .expect("write");
    assert_ne!(
        digest_of(&observe("--require ./env-pre.js"), "node_modules"),
        modules
    );
    // The `-r` preload edited.
    std::fs::write(dir.path().join("pre.js"), "// preload, edited").expect("write");
    assert_ne!(digest_of(&observe("--require ./env-pre.js"), "pre.js"), pre);
    // The file NODE_OPTIONS preloads edited.
    std::fs::write(dir.path().join("env-pre.js"), "// edited").expect("write");
    assert_ne!(
        digest_of(&observe("--require ./env-pre.js"), "env-pre.js"),
        env_pre
    );
    // NODE_OPTIONS itself changed.
    let other = observe("--require ./env-pre.js --max-old-space-size=64");
    assert_ne!(other.loader_env, first.loader_env);
}

/// `python -m pkg` runs `pkg/__main__.py` or `pkg.py` from the working directory: that file is
/// the entry. A module found only on the interpreter's path has no file the host can name, and
/// without a lockfile the launch is unpinned, saying why.
#[test]
fn a_module_entry_is_its_file_in_the_working_directory_or_unpinned() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("server.py"), "print('hi')").expect("write");
    let python = real_python();
    let seen = DigestCache::new()
        .observe(&config(dir.path(), &[&python, "-u", "-m", "server"]))
        .expect("observe");
    assert_eq!(
        seen.entry.as_ref().map(|e| e.path.clone()),
        Some(dir.path().join("server.py"))
    );
    let installed = DigestCache::new()
        .observe(&config(dir.path(), &[&python, "-m", "json.tool"]))
        .expect("observe");
    assert!(installed.entry.is_none());
    assert_eq!(
        installed.pinning,
        Pinning::Unpinned {
            reason: "the entry is a module name, not a file, and there is no lockfile".into()
        }
    );
}

/// A Python runtime the user installed (pyenv, uv, conda, Homebrew) is theirs to write: a
/// `.pth` file planted in its `site-packages` runs at every start, an edited standard module
/// at its import. Both are a new identity; a runtime's library only root can write is not
/// looked at (the test can only show that when it does not run as root).
#[test]
fn a_runtime_library_the_user_can_write_is_part_of_the_identity() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (prefix, library, interpreter) = user_runtime(dir.path());
    let binary = std::fs::canonicalize(real_python()).expect("the interpreter");
    let name = interpreter
        .file_name()
        .and_then(OsStr::to_str)
        .expect("a name")
        .to_owned();
    let version = library
        .file_name()
        .and_then(OsStr::to_str)
        .and_then(|n| n.strip_prefix("python"))
        .expect("a version")
        .to_owned();
    let code = dir.path().join("code");
    std::fs::create_dir_all(&code).expect("code");
    std::fs::write(code.join("server.py"), "print('hi')").expect("server");
    std::fs::write(code.join("requirements.txt"), "mcp").expect("lock");
    let config = config(&code, &[interpreter.to_str().expect("utf-8"), "server.py"]);

    let seen = DigestCache::new().observe(&config).expect("observe");
    assert_fingerprinted(&seen, &prefix.join("lib"));
    assert_eq!(seen.pinning, Pinning::Pinned);
    assert_eq!(
        seen.unwatched,
        [prefix.join("lib")],
        "a runtime's installation is looked at each launch, not watched"
    );
    assert!(
        seen.shallow.contains(&library.join("site-packages")) && seen.shallow.contains(&library),
        "its start-up directories are watched without what lies below: {:?}",
        seen.shallow
    );
    let approved = identity_of(&config);
    assert_eq!(identity_of(&config), approved, "nothing changed");

    // Each is code CPython loads from the runtime, before the server's first line.
    let digits = version.replace('.', "");
    std::fs::create_dir_all(library.join("site-packages/pkg")).expect("pkg");
    let plants: [(PathBuf, &str); 9] = [
        (
            library.join("site-packages/zz.pth"),
            "a .pth file in site-packages",
        ),
        (library.join("os.py"), "a standard module edited"),
        (
            prefix.join(format!("lib/python{digits}.zip")),
            "the standard library's zip, read before it",
        ),
        (
            prefix.join(format!("lib/libpython{version}.so.1.0")),
            "the shared libpython",
        ),
        (
            prefix.join("bin/pybuilddir.txt"),
            "a pybuilddir.txt beside the executable, which moves the standard library",
        ),
        (
            PathBuf::from(format!("{}._pth", interpreter.display())),
            "the executable's ._pth, which replaces the import path",
        ),
        (
            prefix.join("bin/lib"),
            "a lib beside the executable, searched before the prefix's",
        ),
        (
            library.join("site-packages/pkg/x.py"),
            "a file created in a package and removed again",
        ),
        (
            prefix.join("bin/pyvenv.cfg"),
            "a pyvenv.cfg beside the executable, which moves the standard library",
        ),
    ];
    let mut before = approved;
    for (path, what) in plants {
        if what.starts_with("a lib beside") {
            std::fs::create_dir_all(path.join(format!("python{version}"))).expect("plant");
        } else {
            std::fs::write(&path, format!("planted {what}")).expect("plant");
        }
        if what.contains("removed again") {
            std::fs::remove_file(&path).expect("remove");
        }
        let after = identity_of(&config);
        assert_ne!(after, before, "{what}");
        before = after;
    }

    // A virtual environment made with `--copies` of that runtime: its pyvenv.cfg names the
    // runtime, whose library is fingerprinted as for the runtime itself.
    std::fs::remove_file(prefix.join("bin/pyvenv.cfg")).expect("rm");
    let venv = dir.path().join("venv");
    std::fs::create_dir_all(venv.join("bin")).expect("venv");
    std::fs::create_dir_all(venv.join(format!("lib/python{version}/site-packages"))).expect("site");
    std::fs::copy(&binary, venv.join("bin").join(&name)).expect("copy");
    std::fs::write(
        venv.join("pyvenv.cfg"),
        format!("home = {}\n", prefix.join("bin").display()),
    )
    .expect("cfg");
    let copied = venv.join("bin").join(&name);
    let in_venv = self::config(&code, &[copied.to_str().expect("utf-8"), "server.py"]);
    let seen = DigestCache::new().observe(&in_venv).expect("observe");
    assert_fingerprinted(&seen, &prefix.join("lib"));
    let approved = identity_of(&in_venv);
    std::fs::write(library.join("site-packages/yy.pth"), "import os").expect("pth");
    assert_ne!(
        identity_of(&in_venv),
        approved,
        "the base runtime's site-packages"
    );
}

/// A virtual environment made at `venv` by the real interpreter, without pip, and its
/// `site-packages`.
fn made_venv(venv: &Path) -> (PathBuf, PathBuf) {
    let status = std::process::Command::new(real_python())
        .args(["-m", "venv", "--without-pip"])
        .arg(venv)
        .status()
        .expect("python3 -m venv");
    assert!(status.success());
    let site = std::fs::read_dir(venv.join("lib"))
        .expect("lib")
        .flatten()
        .map(|e| e.path().join("site-packages"))
        .find(|p| p.is_dir())
        .expect("site-packages");
    (venv.to_owned(), site)
}

/// `seen` took `lib`'s fingerprint.
fn assert_fingerprinted(seen: &Observed, lib: &Path) {
    assert!(
        seen.extra_paths.iter().any(|a| a.path == lib),
        "{:?}",
        seen.extra_paths
    );
}

/// A `.pth` file's path line puts a directory on `sys.path` (an editable install's source):
/// a `sitecustomize.py` planted there runs at every start, so what it holds is the identity's.
#[test]
fn what_a_pth_files_path_line_adds_is_part_of_the_identity() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (venv, site) = made_venv(&dir.path().join("venv"));
    let editable = dir.path().join("editable-src");
    std::fs::create_dir_all(&editable).expect("src");
    std::fs::write(editable.join("pkg.py"), "X = 1").expect("pkg");
    std::fs::write(
        site.join("__editable__.pkg.pth"),
        format!("{}\n", editable.display()),
    )
    .expect("pth");
    let code = dir.path().join("code");
    std::fs::create_dir_all(&code).expect("code");
    std::fs::write(code.join("server.py"), "import pkg").expect("server");
    let python = venv.join("bin/python");
    let config = config(&code, &[python.to_str().expect("utf-8"), "server.py"]);
    let seen = DigestCache::new().observe(&config).expect("observe");
    assert!(
        seen.extra_paths.iter().any(|a| a.path == editable),
        "{:?}",
        seen.extra_paths
    );
    let approved = identity_of(&config);
    std::fs::write(editable.join("sitecustomize.py"), "import os").expect("plant");
    assert_ne!(identity_of(&config), approved);
}

/// The directories `PYTHONPATH` names are imported from before anything else: what they
/// hold is part of the identity, not only the variable's value.
#[test]
fn what_the_search_path_variables_name_is_part_of_the_identity() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("server.py"), "import helper").expect("server");
    std::fs::write(dir.path().join("requirements.txt"), "mcp").expect("lock");
    let extra = tempfile::tempdir().expect("extra");
    std::fs::write(extra.path().join("helper.py"), "X = 1").expect("helper");
    let mut config = config(dir.path(), &[&real_python(), "server.py"]);
    config.env.push(
        format!("PYTHONPATH={}", extra.path().display())
            .parse()
            .expect("env"),
    );
    let seen = DigestCache::new().observe(&config).expect("observe");
    assert!(
        own_trees(&seen).contains(&extra.path()),
        "{:?}",
        seen.extra_paths
    );
    let approved = identity_of(&config);
    std::fs::write(extra.path().join("helper.py"), "import os; X = os.environ").expect("edit");
    assert_ne!(identity_of(&config), approved);
}

/// Homebrew links a runtime's `site-packages` to a directory outside its prefix: what the link
/// leads to is walked, so a `.pth` planted there is a new identity.
#[test]
fn a_linked_site_packages_is_walked_where_it_leads() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (prefix, library, interpreter) = user_runtime(dir.path());
    let elsewhere = dir.path().join("shared-site-packages");
    std::fs::create_dir_all(&elsewhere).expect("elsewhere");
    std::fs::remove_dir(library.join("site-packages")).expect("rmdir");
    std::os::unix::fs::symlink(&elsewhere, library.join("site-packages")).expect("link");
    let code = dir.path().join("code");
    std::fs::create_dir_all(&code).expect("code");
    std::fs::write(code.join("server.py"), "print('hi')").expect("server");
    std::fs::write(code.join("requirements.txt"), "mcp").expect("lock");
    let config = config(&code, &[interpreter.to_str().expect("utf-8"), "server.py"]);
    assert_fingerprinted(
        &DigestCache::new().observe(&config).expect("observe"),
        &prefix.join("lib"),
    );
    let approved = identity_of(&config);
    std::fs::write(elsewhere.join("zz.pth"), "import os").expect("pth");
    assert_ne!(identity_of(&config), approved);
}

/// `PYTHONPYCACHEPREFIX` moves where CPython reads bytecode from: a `.pyc` there runs in
/// place of its unchanged source, so the directory is walked.
#[test]
fn the_bytecode_directory_a_variable_names_is_part_of_the_identity() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("server.py"), "print('hi')").expect("server");
    std::fs::write(dir.path().join("requirements.txt"), "mcp").expect("lock");
    let cache = tempfile::tempdir().expect("cache");
    let mut config = config(dir.path(), &[&real_python(), "server.py"]);
    config.env.push(
        format!("PYTHONPYCACHEPREFIX={}", cache.path().display())
            .parse()
            .expect("env"),
    );
    let approved = identity_of(&config);
    std::fs::write(cache.path().join("server.cpython-311.pyc"), "forged").expect("pyc");
    assert_ne!(identity_of(&config), approved);
}

/// A Python runtime in a prefix of the user's under `dir`: the test machine's interpreter
/// copied into its `bin`, and a library with its landmark and a `site-packages`. Its prefix,
/// library and interpreter.
fn user_runtime(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let binary = std::fs::canonicalize(real_python()).expect("the interpreter");
    let name = binary.file_name().expect("a name").to_owned();
    let version = DigestCache::new()
        .observe(&config(dir, &[binary.to_str().expect("utf-8"), "-V"]))
        .expect("observe")
        .runtime
        .as_deref()
        .and_then(|r| r.strip_prefix("Python "))
        .map(|v| v.split('.').take(2).collect::<Vec<_>>().join("."))
        .expect("a Python version");
    let prefix = dir.join("runtime");
    let library = prefix.join(format!("lib/python{version}"));
    std::fs::create_dir_all(prefix.join("bin")).expect("bin");
    std::fs::create_dir_all(library.join("site-packages")).expect("site-packages");
    std::fs::copy(&binary, prefix.join("bin").join(&name)).expect("copy the interpreter");
    std::fs::write(library.join("os.py"), "# the standard library").expect("os.py");
    let interpreter = prefix.join("bin").join(&name);
    (prefix, library, interpreter)
}

/// `python -c "import server"` puts the working directory first on the import path, as `-m`
/// does: the code there is the identity's, lockfile or not.
#[test]
fn a_command_run_takes_the_code_in_its_working_directory() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("server.py"), "print('hi')").expect("server");
    std::fs::write(dir.path().join("requirements.txt"), "mcp").expect("lock");
    let config = config(dir.path(), &[&real_python(), "-c", "import server"]);
    let seen = DigestCache::new().observe(&config).expect("observe");
    assert!(
        own_trees(&seen).contains(&dir.path()),
        "{:?}",
        seen.extra_paths
    );
    let approved = identity_of(&config);
    std::fs::write(dir.path().join("server.py"), "import os; print(os.environ)").expect("edit");
    assert_ne!(identity_of(&config), approved);
}

/// A relative `PYTHONHOME` is where the server's interpreter, started in its working
/// directory, looks: that runtime's library is the identity's, not whatever the engine's own
/// working directory holds under that name.
#[test]
fn a_relative_python_home_is_taken_from_the_servers_directory() {
    let dir = tempfile::tempdir().expect("tempdir");
    let version = user_runtime(dir.path())
        .1
        .file_name()
        .and_then(OsStr::to_str)
        .expect("a version")
        .to_owned();
    std::fs::write(dir.path().join("server.py"), "print('hi')").expect("server");
    std::fs::write(dir.path().join("requirements.txt"), "mcp").expect("lock");
    let mut config = config(dir.path(), &[&real_python(), "server.py"]);
    config.env.push("PYTHONHOME=runtime".parse().expect("env"));
    let seen = DigestCache::new().observe(&config).expect("observe");
    assert_fingerprinted(&seen, &dir.path().join("runtime/lib"));
    let approved = identity_of(&config);
    let site = dir
        .path()
        .join(format!("runtime/lib/{version}/site-packages"));
    std::fs::write(site.join("zz.pth"), "import os").expect("pth");
    assert_ne!(identity_of(&config), approved);

    // The working directory reached through a link: `..` is taken from its real path, as
    // the process's own working directory is.
    let elsewhere = dir.path().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).expect("dir");
    let code = dir.path().join("code");
    std::fs::create_dir_all(&code).expect("code");
    std::fs::write(code.join("server.py"), "print('hi')").expect("server");
    std::fs::write(code.join("requirements.txt"), "mcp").expect("lock");
    std::os::unix::fs::symlink(&code, elsewhere.join("proj")).expect("link");
    let mut linked = self::config(&elsewhere.join("proj"), &[&real_python(), "server.py"]);
    linked
        .env
        .push("PYTHONHOME=../runtime".parse().expect("env"));
    let seen = DigestCache::new().observe(&linked).expect("observe");
    assert_fingerprinted(&seen, &dir.path().join("runtime/lib"));
}

/// A directory or file removed while the identity is taken (a build at work in the tree) is
/// as if it had not been there, not a launch that fails: the walk skips a directory gone
/// before it was read, and the digest an entry gone before it was hashed.
#[test]
fn what_vanishes_while_the_tree_is_walked_is_as_if_never_there() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    for sub in ["d1", "d2"] {
        std::fs::create_dir_all(root.join(sub)).expect("dir");
        std::fs::write(root.join(sub).join("m.py"), sub).expect("file");
    }
    std::fs::write(root.join("server.py"), "print('hi')").expect("server");
    // While the walk is in one directory, the other, listed and not yet read, is removed.
    let mut removed = false;
    let walked = walk(root, 100, |entry| {
        if !removed && entry.path().parent() != Some(root) {
            let other = ["d1", "d2"]
                .map(|d| root.join(d))
                .into_iter()
                .find(|d| Some(d.as_path()) != entry.path().parent())
                .expect("the other");
            std::fs::remove_dir_all(other).expect("remove");
            removed = true;
        }
        Walk::Into
    })
    .expect("the walk goes on")
    .expect("within the limit");
    assert!(removed);
    let cache = DigestCache::new();
    let after = cache.entries_digest(root, walked.clone()).expect("digest");
    // Removed between the walk and the hashing: left out.
    std::fs::remove_file(root.join("server.py")).expect("rm");
    let without = cache.entries_digest(root, walked).expect("digest");
    assert_ne!(without, after, "the file gone is not in the digest");
    let fresh = walk(root, 100, |_| Walk::Into)
        .expect("walk")
        .expect("limit");
    assert_eq!(
        cache.entries_digest(root, fresh).expect("digest"),
        without,
        "as a walk of the tree as it is now"
    );
}

/// A bytecode cache shared by many projects (`PYTHONPYCACHEPREFIX`) too large to walk at every
/// launch leaves the server partly pinned, saying which directory, not calling it the
/// server's own code.
#[test]
fn a_bytecode_cache_too_large_to_hash_is_said_as_such() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("server.py"), "print('hi')").expect("server");
    std::fs::write(dir.path().join("requirements.txt"), "mcp").expect("lock");
    let cache = tempfile::tempdir().expect("cache");
    for i in 0..=SOURCE_ENTRIES {
        std::fs::write(cache.path().join(format!("m{i}.pyc")), "").expect("write");
    }
    let mut config = config(dir.path(), &[&real_python(), "server.py"]);
    config.env.push(
        format!("PYTHONPYCACHEPREFIX={}", cache.path().display())
            .parse()
            .expect("env"),
    );
    let seen = DigestCache::new().observe(&config).expect("observe");
    match &seen.pinning {
        Pinning::Partly { uncovered, .. } => assert!(
            uncovered.starts_with(&format!(
                "the code it loads from {}: more than 20000 entries",
                cache.path().display()
            )),
            "{uncovered}"
        ),
        other => panic!("{other:?}"),
    }
}

/// A link through `/proc` names one file when Postern looks and another when the server opens
/// it (`/proc/self/cwd` is each process's own working directory): a module beside an approved
/// entry made such a link (review 5, S2) would run unidentified code, so the launch is
/// refused, saying which link. A link that names nothing for the engine is recorded as the
/// link it is, not left out.
#[test]
fn a_link_through_proc_is_refused_and_a_dangling_link_is_recorded() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("server.py"), "import helper").expect("server");
    std::fs::write(dir.path().join("requirements.txt"), "mcp").expect("lock");
    let config = config(dir.path(), &[&real_python(), "server.py"]);
    let approved = identity_of(&config);

    // Dangling for the engine: recorded (its text), so adding it is a change.
    std::os::unix::fs::symlink("missing/helper.py", dir.path().join("helper.py")).expect("link");
    let dangling = identity_of(&config);
    assert_ne!(dangling, approved, "a dangling link is part of the tree");
    std::fs::remove_file(dir.path().join("helper.py")).expect("rm");

    let planted = [
        "/proc/self/cwd/.cache.bin",
        "/dev/fd/../cwd/.cache.bin",
        "../../../../../../../../../../proc/self/cwd/x.py",
    ];
    for target in planted {
        std::os::unix::fs::symlink(target, dir.path().join("json.py")).expect("link");
        let refused = DigestCache::new()
            .observe(&config)
            .expect_err("a link through /proc");
        assert!(
            matches!(&refused, IdentityError::ThroughProc { path } if path.ends_with("json.py")),
            "{target}: {refused}"
        );
        std::fs::remove_file(dir.path().join("json.py")).expect("rm");
    }
    // Through a link outside the tree that leads into /proc.
    let hop = tempfile::tempdir().expect("hop");
    std::os::unix::fs::symlink("/proc/self", hop.path().join("me")).expect("hop link");
    std::os::unix::fs::symlink(hop.path().join("me/cwd/x.py"), dir.path().join("json.py"))
        .expect("link");
    assert!(matches!(
        DigestCache::new().observe(&config),
        Err(IdentityError::ThroughProc { .. })
    ));
    // The entry itself.
    std::fs::remove_file(dir.path().join("json.py")).expect("rm");
    std::fs::rename(dir.path().join("server.py"), dir.path().join("real.py")).expect("mv");
    std::os::unix::fs::symlink("/proc/self/cwd/real.py", dir.path().join("server.py"))
        .expect("link");
    assert!(matches!(
        DigestCache::new().observe(&config),
        Err(IdentityError::ThroughProc { .. })
    ));
}

/// A pyenv root in `root` with `versions` installed (each `bin/python3` a link to the real
/// interpreter), and its `python3` shim as `pyenv rehash` writes it: the shim's directory.
fn pyenv(root: &Path, versions: &[&str]) -> PathBuf {
    let shims = root.join("shims");
    std::fs::create_dir_all(&shims).expect("mkdir");
    // As `pyenv rehash` writes it (pyenv 2.6).
    let template = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/fixtures/pyenv-shim"
    ));
    write_exec(
        &shims.join("python3"),
        &template.replace("@PYENV_ROOT@", &root.display().to_string()),
    );
    for version in versions {
        let bin = root.join("versions").join(version).join("bin");
        std::fs::create_dir_all(&bin).expect("mkdir");
        std::os::unix::fs::symlink(real_python(), bin.join("python3")).expect("link");
    }
    shims
}

/// `python3 server.py` in `dir` with `PATH` starting at `first`, and `env` (an empty
/// `PYENV_VERSION` unless given, as pyenv reads it: the test runner's own is not the case).
fn pyenv_config(dir: &Path, first: &Path, env: &[&str]) -> ServerConfig {
    let mut vars = vec![
        format!("PATH={}:/usr/bin:/bin", first.display()),
        "PYENV_VERSION=".to_owned(),
    ];
    vars.extend(env.iter().map(|v| (*v).to_owned()));
    ServerConfig::new(
        "t".parse().expect("label"),
        vec!["python3".into(), "server.py".into()],
        Some(dir.to_owned()),
        vars.iter().map(|v| v.parse().expect("env")).collect(),
    )
    .expect("config")
}

#[test]
fn a_pyenv_shim_is_launched_as_the_version_it_selects_read_from_its_files() {
    let root = tempfile::tempdir().expect("tempdir");
    let shims = pyenv(&root.path().join("pyenv"), &["3.11.7", "3.12.1"]);
    let versions = root.path().join("pyenv/versions");
    std::fs::write(root.path().join("pyenv/version"), "3.11.7\n").expect("global");
    let project = root.path().join("project");
    let app = project.join("app");
    std::fs::create_dir_all(&app).expect("mkdir");
    std::fs::write(app.join("server.py"), "print('hi')").expect("write");
    let cache = DigestCache::new();

    // pyenv's global version.
    let seen = cache
        .observe(&pyenv_config(&app, &shims, &[]))
        .expect("observe");
    let chosen = versions.join("3.11.7/bin/python3");
    assert_eq!(seen.program, chosen);
    assert_eq!(seen.launch_command[0], chosen.display().to_string());
    assert!(seen.wrappers.is_empty(), "{:?}", seen.wrappers);
    assert!(
        seen.runtime
            .as_deref()
            .is_some_and(|r| r.starts_with("Python 3")),
        "{:?}",
        seen.runtime
    );
    // What `pyenv exec` exports, set over the configured environment at launch.
    assert_eq!(
        seen.selected_env[0],
        ("PYENV_VERSION".into(), "3.11.7".into())
    );
    assert_eq!(
        seen.selected_env[1],
        (
            "PATH".into(),
            format!(
                "{}:{}:/usr/bin:/bin",
                versions.join("3.11.7/bin").display(),
                shims.display()
            )
        )
    );
    assert!(seen.env_names.contains(&"PYENV_VERSION".to_owned()));

    // A `.python-version` above the working directory, comments and blank lines skipped.
    std::fs::write(
        project.join(".python-version"),
        "# the project's\n\n  3.12.1  extra\n3.11.7\n",
    )
    .expect("local");
    let seen = cache
        .observe(&pyenv_config(&app, &shims, &[]))
        .expect("observe");
    assert_eq!(seen.program, versions.join("3.12.1/bin/python3"));
    assert_eq!(
        seen.selected_env[0],
        ("PYENV_VERSION".into(), "3.12.1:3.11.7".into())
    );

    // A prefix: the latest installed, by pyenv's order (checked against `pyenv latest`):
    // numbers compared as numbers, pre-releases, development and free-threaded builds left
    // out unless asked for.
    for name in ["3.12.9", "3.12.10rc1", "3.12-dev", "3.12.11t"] {
        std::fs::create_dir_all(versions.join(name).join("bin")).expect("mkdir");
        std::os::unix::fs::symlink(real_python(), versions.join(name).join("bin/python3"))
            .expect("link");
    }
    for (asked, chosen) in [
        ("3.12", "3.12.9"),
        ("python-3.12", "3.12.9"),
        ("3", "3.12.9"),
        ("3.12t", "3.12.11t"),
    ] {
        std::fs::write(project.join(".python-version"), format!("{asked}\n")).expect("local");
        let seen = cache
            .observe(&pyenv_config(&app, &shims, &[]))
            .expect("observe");
        assert_eq!(
            seen.program,
            versions.join(chosen).join("bin/python3"),
            "{asked}"
        );
        assert_eq!(seen.selected_env[0].1, chosen, "{asked}");
    }

    // PYENV_VERSION first, `python-` taken off as pyenv does.
    let seen = cache
        .observe(&pyenv_config(
            &app,
            &shims,
            &["PYENV_VERSION=python-3.11.7"],
        ))
        .expect("observe");
    assert_eq!(seen.program, versions.join("3.11.7/bin/python3"));

    // `system`: the first python3 on PATH past the shims, PATH left as it is.
    let system = root.path().join("system");
    std::fs::create_dir_all(&system).expect("mkdir");
    std::os::unix::fs::symlink(real_python(), system.join("python3")).expect("link");
    std::fs::write(project.join(".python-version"), "system\n").expect("local");
    let mut config = pyenv_config(&app, &shims, &[]);
    config.env[0] = format!("PATH={}:{}", shims.display(), system.display())
        .parse()
        .expect("env");
    let seen = cache.observe(&config).expect("observe");
    assert_eq!(seen.program, system.join("python3"));
    assert_eq!(
        seen.selected_env,
        [("PYENV_VERSION".into(), "system".into())]
    );
    // A local file that names nothing is the system's too (not the global version).
    std::fs::write(project.join(".python-version"), "# none\n").expect("local");
    let seen = cache.observe(&config).expect("observe");
    assert_eq!(seen.program, system.join("python3"));
}

#[test]
fn a_pyenv_choice_that_cannot_be_read_exactly_leaves_the_shim_a_wrapper() {
    let root = tempfile::tempdir().expect("tempdir");
    let pyenv_root = root.path().join("pyenv");
    let shims = pyenv(&pyenv_root, &["3.11.7"]);
    let app = root.path().join("app");
    std::fs::create_dir_all(&app).expect("mkdir");
    std::fs::write(app.join("server.py"), "print('hi')").expect("write");
    let cache = DigestCache::new();
    let stays_a_wrapper = |why: &str| {
        let seen = cache
            .observe(&pyenv_config(&app, &shims, &[]))
            .expect("observe");
        assert_eq!(seen.program, shims.join("python3"), "{why}");
        assert!(seen.selected_env.is_empty(), "{why}");
        assert_eq!(
            seen.wrappers.first().map(|w| w.path.clone()),
            Some(shims.join("python3")),
            "{why}"
        );
        assert!(
            matches!(&seen.pinning, Pinning::Partly { uncovered, .. }
                if uncovered.contains("version-manager shim")),
            "{why}: {:?}",
            seen.pinning
        );
    };
    let local = app.join(".python-version");
    // Neither installed nor the prefix of one (3.11.7 goes on from `3.1` with a digit).
    std::fs::write(&local, "3.1\n").expect("local");
    stays_a_wrapper("no such version");
    std::fs::write(&local, "../../elsewhere\n").expect("local");
    stays_a_wrapper("a path out of the versions");
    // A confined server's link is not followed outside its sandbox (what it names, present or
    // not, would show in how the server is launched); an unconfined one's is, as pyenv does.
    let named = root.path().join("named");
    std::fs::write(&named, "3.11.7\n").expect("named");
    std::fs::remove_file(&local).expect("rm");
    std::os::unix::fs::symlink(&named, &local).expect("link");
    stays_a_wrapper("a link in a confined server's directory");
    let mut unconfined = pyenv_config(&app, &shims, &[]);
    unconfined.confinement = postern_domain::Confinement::Unconfined;
    assert_eq!(
        cache.observe(&unconfined).expect("observe").program,
        pyenv_root.join("versions/3.11.7/bin/python3")
    );
    std::fs::remove_file(&local).expect("rm");
    std::fs::write(&local, "3.11.7\n").expect("local");
    let hooks = pyenv_root.join("pyenv.d/exec");
    std::fs::create_dir_all(&hooks).expect("mkdir");
    std::fs::write(hooks.join("choose.bash"), "PYENV_COMMAND_PATH=/bin/true\n").expect("hook");
    stays_a_wrapper("a hook that may change the choice");
    std::fs::remove_file(hooks.join("choose.bash")).expect("rm");
    let shim = shims.join("python3");
    let text = std::fs::read_to_string(&shim).expect("shim");
    write_exec(
        &shim,
        &text.replace("exec ", "export PYENV_VERSION=system\nexec "),
    );
    stays_a_wrapper("a shim that does more than pyenv's");
    write_exec(&shim, &text);
    assert_eq!(
        cache
            .observe(&pyenv_config(&app, &shims, &[]))
            .expect("observe")
            .program,
        pyenv_root.join("versions/3.11.7/bin/python3"),
        "the same files, plain again"
    );
}

/// An interpreter asked its version that leaves a child holding its output open does not
/// hold the launch: its answer is taken once it exits, and the child is ended with it.
#[test]
fn a_version_probe_that_leaves_a_child_behind_is_answered_and_takes_the_child_along() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pidfile = dir.path().join("stray.pid");
    write_exec(
        &dir.path().join("python3"),
        &format!(
            "#!/bin/sh\nsleep 90 &\necho $! > {}\necho Python 3.0.0\n",
            pidfile.display()
        ),
    );
    std::fs::write(dir.path().join("server.py"), "print('hi')").expect("write");
    // Unconfined: a confined probe's sandbox ends its children with it.
    let mut unconfined = config(dir.path(), &["./python3", "server.py"]);
    unconfined.confinement = postern_domain::Confinement::Unconfined;
    let started = std::time::Instant::now();
    let seen = DigestCache::new().observe(&unconfined).expect("observe");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(60),
        "the probe held the launch for {:?}",
        started.elapsed()
    );
    assert_eq!(seen.runtime.as_deref(), Some("Python 3.0.0"));
    let stray: u32 = std::fs::read_to_string(&pidfile)
        .expect("pid")
        .trim()
        .parse()
        .expect("pid");
    // Killed: gone, or a zombie waiting for whoever inherited it (once the kill is through).
    let state = || {
        let stat = std::fs::read_to_string(format!("/proc/{stray}/stat")).unwrap_or_default();
        stat.rsplit(") ")
            .next()
            .and_then(|rest| rest.chars().next())
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !matches!(state(), None | Some('Z')) && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(
        matches!(state(), None | Some('Z')),
        "the stray runs: {:?}",
        state()
    );
}

/// A FIFO in a hashed tree (a confined server may make one in its own directory) is counted
/// by its kind, not opened for reading, which would wait for a writer that never comes.
#[test]
fn a_fifo_in_a_hashed_tree_does_not_hold_the_capture() {
    let dir = tempfile::tempdir().expect("tempdir");
    let lib = dir.path().join("lib");
    std::fs::create_dir_all(&lib).expect("mkdir");
    nix::unistd::mkfifo(&lib.join("trap"), nix::sys::stat::Mode::S_IRWXU).expect("mkfifo");
    std::fs::write(dir.path().join("server.py"), "print('hi')").expect("write");
    let mut config = config(dir.path(), &[&real_python(), "server.py"]);
    config.identity_paths = vec!["lib".into()];
    let seen = observe_within(config).expect("observe").extra_paths;
    assert!(seen.iter().any(|a| a.path.ends_with("lib")), "{seen:?}");
}

/// The interpreter is asked its version as the launch runs it: in the server's directory,
/// with its configured environment (a wrapper choosing a runtime by either answers for the
/// one the server gets).
#[test]
fn the_version_is_asked_in_the_servers_directory_with_its_environment() {
    let dir = tempfile::tempdir().expect("tempdir");
    write_exec(
        &dir.path().join("python3"),
        "#!/bin/sh\necho \"Python $(cat picked) $CHOSEN\"\n",
    );
    std::fs::write(dir.path().join("picked"), "3.9").expect("write");
    std::fs::write(dir.path().join("server.py"), "print('hi')").expect("write");
    let mut config = config(dir.path(), &["./python3", "server.py"]);
    config.env.push("CHOSEN=by-config".parse().expect("env"));
    config.confinement = postern_domain::Confinement::Unconfined;
    let seen = DigestCache::new().observe(&config).expect("observe");
    assert_eq!(seen.runtime.as_deref(), Some("Python 3.9 by-config"));
}

/// Nor does a FIFO where the capture reads a file's text: a `.pth` file in the environment's
/// site directory, or the environment's `pyvenv.cfg` (review 7, N3).
#[test]
fn a_fifo_where_a_pth_file_or_pyvenv_cfg_is_read_does_not_hold_the_capture() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (venv, site) = made_venv(&dir.path().join("venv"));
    std::fs::write(dir.path().join("server.py"), "print('hi')").expect("write");
    let python = venv.join("bin/python").display().to_string();
    let within = |what: &str| {
        let config = config(dir.path(), &[&python, "server.py"]);
        assert!(observe_within(config).is_ok(), "{what}");
    };
    let fifo = |path: &Path| {
        nix::unistd::mkfifo(path, nix::sys::stat::Mode::S_IRWXU).expect("mkfifo");
    };
    fifo(&site.join("trap.pth"));
    within("a .pth FIFO");
    std::fs::remove_file(venv.join("pyvenv.cfg")).expect("rm");
    fifo(&venv.join("pyvenv.cfg"));
    within("a pyvenv.cfg FIFO");
}

/// A Python named with its build's flags (`python3.7m`, free-threaded `python3.13t`, debug
/// `python3.13td`) is an interpreter whose entry is identified, and a free-threaded build's
/// user site is its own (review 7, N2: they were plain binaries, their code never hashed).
#[test]
fn a_python_named_with_its_builds_flags_is_an_interpreter_with_its_own_user_site() {
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path().join("home");
    for site in ["python3.7", "python3.13t", "python3.13"] {
        std::fs::create_dir_all(home.join(".local/lib").join(site).join("site-packages"))
            .expect("mkdir");
    }
    std::fs::write(dir.path().join("server.py"), "print('hi')").expect("write");
    for (name, site) in [
        ("python3.7m", "python3.7"),
        ("python3.13t", "python3.13t"),
        ("python3.13td", "python3.13t"),
        ("python3.13d", "python3.13"),
    ] {
        // A stand-in binary: only its name matters here.
        std::fs::copy("/bin/true", dir.path().join(name)).expect("copy");
        let mut config = config(dir.path(), &[&format!("./{name}"), "server.py"]);
        config
            .env
            .push(format!("HOME={}", home.display()).parse().expect("env"));
        let seen = DigestCache::new().observe(&config).expect("observe");
        assert_eq!(
            seen.entry.as_ref().map(|e| e.path.clone()),
            Some(dir.path().join("server.py")),
            "{name}"
        );
        assert_fingerprinted(
            &seen,
            &home.join(".local/lib").join(site).join("site-packages"),
        );
    }
}

/// A huge sparse file in a hashed tree (a confined server makes one of a terabyte in its own
/// directory in an instant) is not read to its end: it counts by its metadata, so writing to
/// it is still a change (review 7, N4).
#[test]
fn a_huge_sparse_file_in_a_hashed_tree_counts_by_its_metadata() {
    let dir = tempfile::tempdir().expect("tempdir");
    let lib = dir.path().join("lib");
    std::fs::create_dir_all(&lib).expect("mkdir");
    let sparse = lib.join("sparse.bin");
    std::fs::File::create(&sparse)
        .and_then(|f| f.set_len(1 << 40))
        .expect("a sparse terabyte");
    std::fs::write(dir.path().join("server.py"), "print('hi')").expect("write");
    let mut config = config(dir.path(), &[&real_python(), "server.py"]);
    config.identity_paths = vec!["lib".into()];
    let capture = |config: ServerConfig| {
        observe_within(config)
            .expect("observe")
            .extra_paths
            .iter()
            .find(|a| a.path.ends_with("lib"))
            .map(|a| a.digest)
            .expect("lib hashed")
    };
    let before = capture(config.clone());
    std::fs::OpenOptions::new()
        .write(true)
        .open(&sparse)
        .and_then(|mut f| std::io::Write::write_all(&mut f, b"x"))
        .expect("write");
    assert_ne!(capture(config), before, "a write to it is a change");
}

/// A fresh capture of `config` on a thread of its own, failing the test if it has not ended
/// within a minute (what it guards against would hold it for good).
fn observe_within(config: ServerConfig) -> Result<Observed, IdentityError> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(DigestCache::new().observe(&config));
    });
    rx.recv_timeout(std::time::Duration::from_secs(60))
        .expect("the capture ended")
}

/// An interpreter asked its version that leaves a child of its own session behind, holding the
/// pipes it answers on, still has its answer taken as soon as it exits: the runtime is
/// recorded, and the capture does not wait out the probe's deadline for that child.
#[test]
fn a_version_probe_is_not_held_by_a_child_that_left_its_group() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir_all(dir.path().join("venv/bin")).expect("bin");
    std::fs::write(dir.path().join("server.py"), "print('hi')\n").expect("entry");
    let held = dir.path().join("held.pid");
    write_exec(
        &dir.path().join("venv/bin/python"),
        &format!(
            "#!/bin/sh\nsetsid sh -c 'echo $$ > {}; exec sleep 60' &\necho Python 3.99.0\n",
            held.display()
        ),
    );
    // Unconfined: a confined probe's sandbox ends its children with it.
    let mut unconfined = config(dir.path(), &["./venv/bin/python", "server.py"]);
    unconfined.confinement = postern_domain::Confinement::Unconfined;
    let seen = observe_within(unconfined);
    if let Ok(pid) = std::fs::read_to_string(&held) {
        let _ = std::process::Command::new("kill").arg(pid.trim()).status();
    }
    assert!(held.exists(), "the probe's child left its group and ran");
    assert_eq!(
        seen.expect("observe").runtime.as_deref(),
        Some("Python 3.99.0")
    );
}

/// A version asked with a loader variable of the server's own (here `PYTHONPATH`; `LD_PRELOAD`
/// would run its code in the interpreter) is that launch's alone: not kept for the binary, so
/// another server using the same interpreter is asked itself.
#[test]
fn a_version_asked_under_a_servers_own_loader_variable_is_not_kept_for_others() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("server.py"), "print('hi')").expect("write");
    let python = real_python();
    let cache = DigestCache::new();
    let mut own = config(dir.path(), &[&python, "server.py"]);
    own.env = vec!["PYTHONPATH=/nowhere".parse().expect("env")];
    let seen = cache.observe(&own).expect("observe");
    assert!(seen.runtime.is_some(), "asked for itself");
    assert!(
        cache.runtimes.lock().expect("runtimes").is_empty(),
        "kept for others"
    );
    let plain = config(dir.path(), &[&python, "server.py"]);
    cache.observe(&plain).expect("observe");
    assert_eq!(cache.runtimes.lock().expect("runtimes").len(), 1);
}
