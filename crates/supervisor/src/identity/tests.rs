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

    let seen = cache
        .observe(&config(dir.path(), &["./mcp-tool"]))
        .expect("observe");
    assert_eq!(seen.entry.map(|e| e.path), Some(tool.clone()));
    // The script is hashed; with no lockfile, what it imports is not.
    assert_eq!(
        seen.pinning,
        Pinning::Partly {
            covered: "the entry file mcp-tool".into(),
            uncovered: "the code it loads: there is no lockfile in the working directory \
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
fn a_python_virtual_environment_is_part_of_the_identity_but_its_bytecode_caches_are_not() {
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
    // The packages are hashed, not the server's own modules beside its entry: partly pinned.
    assert!(
        matches!(&first.pinning, Pinning::Partly { covered, uncovered }
            if covered == "the entry file server.py and the packages in .venv"
                && uncovered.starts_with("the server's own modules beside it")),
        "{:?}",
        first.pinning
    );

    // Python caching bytecode as it imports changes nothing.
    std::fs::write(
        site.join("mcp/__pycache__/__init__.cpython-311.pyc"),
        "cache",
    )
    .expect("pyc");
    assert_eq!(environment(&observe()), before);

    // A `.pth` file dropped into site-packages (it runs at every start) is new code.
    std::fs::write(site.join("zz.pth"), "import os").expect("pth");
    assert_ne!(environment(&observe()), before);

    // The system interpreter itself has no environment to add.
    let system = DigestCache::new()
        .observe(&config(dir.path(), &[&real_python(), "server.py"]))
        .expect("observe");
    assert!(system.extra_paths.is_empty(), "{:?}", system.extra_paths);
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
