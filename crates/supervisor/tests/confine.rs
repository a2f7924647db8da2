//! Issue 16, confined servers (Linux, bubblewrap): a confined launch cannot read a canary under
//! the user's `~/.ssh` or the Postern home, writes only to its directory, reaches no loopback
//! port, and says what it runs in; the same server unconfined can do all of it. And the
//! attacks a server inside can try on its next launch: a symbolic link planted in a writable
//! path, a hidden path's parent renamed away, the engine's environment and `/run`'s sockets.
#![cfg(target_os = "linux")]

use std::path::PathBuf;

use postern_domain::{Confinement, ServerConfig};
use postern_supervisor::{DigestCache, Given, SandboxHost, launch_with};
use tokio::io::AsyncReadExt;

struct Place {
    _dir: tempfile::TempDir,
    user_home: PathBuf,
    postern_home: PathBuf,
    project: PathBuf,
}

fn place() -> Place {
    place_in(tempfile::tempdir().expect("tempdir"))
}

/// A place in `dir`.
fn place_in(dir: tempfile::TempDir) -> Place {
    let user_home = dir.path().join("user");
    let postern_home = dir.path().join("postern");
    let project = dir.path().join("project");
    for d in [&user_home.join(".ssh"), &postern_home, &project] {
        std::fs::create_dir_all(d).expect("mkdir");
    }
    std::fs::write(user_home.join(".ssh/id_canary"), "ssh-canary\n").expect("canary");
    std::fs::write(user_home.join(".netrc"), "netrc-canary\n").expect("canary");
    std::fs::write(postern_home.join("canary"), "home-canary\n").expect("canary");
    Place {
        _dir: dir,
        user_home,
        postern_home,
        project,
    }
}

/// A shell "server" that reports what it could do, then exits.
fn probe(place: &Place, confinement: Confinement, port: u16) -> ServerConfig {
    let script = format!(
        "cat {ssh}/id_canary 2>/dev/null || echo no-ssh; \
         cat {home}/.netrc 2>/dev/null || echo no-netrc; \
         cat {postern}/canary 2>/dev/null || echo no-postern; \
         echo written > written && echo wrote-project; \
         (echo x > {home}/outside) 2>/dev/null; \
         (exec 3<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null && echo connected || echo no-connect",
        ssh = place.user_home.join(".ssh").display(),
        home = place.user_home.display(),
        postern = place.postern_home.display(),
    );
    let mut config = ServerConfig::new(
        "probe".parse().expect("label"),
        vec!["/bin/bash".into(), "-c".into(), script],
        Some(place.project.clone()),
        vec![],
    )
    .expect("config");
    config.confinement = confinement;
    config
}

async fn run(place: &Place, confinement: Confinement) -> (String, Option<postern_domain::Sandbox>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("listen");
    let port = listener.local_addr().expect("addr").port();
    let config = probe(place, confinement, port);
    run_config(place, &config).await.expect("launch")
}

fn cache(place: &Place) -> DigestCache {
    DigestCache::with_sandbox(SandboxHost {
        postern_home: Some(place.postern_home.clone()),
        user_home: Some(place.user_home.clone()),
        user_cache: Some(place.user_home.join(".cache")),
        relay: None,
        exposed: Vec::new(),
    })
}

/// A shell script as a confined server in the project.
fn script(place: &Place, script: &str, writable: &[&str]) -> ServerConfig {
    let mut config = ServerConfig::new(
        "attacker".parse().expect("label"),
        vec!["/bin/bash".into(), "-c".into(), script.to_owned()],
        Some(place.project.clone()),
        vec![],
    )
    .expect("config");
    config.writable = writable.iter().map(PathBuf::from).collect();
    config
}

async fn run_config(
    place: &Place,
    config: &ServerConfig,
) -> Result<(String, Option<postern_domain::Sandbox>), String> {
    let mut launched =
        launch_with(config, &cache(place), |_| Given::default()).map_err(|e| e.to_string())?;
    let mut out = String::new();
    launched
        .spawned
        .stdout
        .read_to_string(&mut out)
        .await
        .expect("read");
    launched.spawned.handle.exited().await;
    Ok((out, launched.record.sandbox))
}

/// Every launch covers the sockets it sees listening, including those other tests bind
/// outside `/tmp`; one that closes between a launch's look and bubblewrap's mounts fails that
/// launch (ARCHITECTURE.md, "What confinement does not cover"). So a test that binds such
/// sockets runs alone, and the others together.
static SOCKETS: tokio::sync::RwLock<()> = tokio::sync::RwLock::const_new(());

async fn shared() -> tokio::sync::RwLockReadGuard<'static, ()> {
    SOCKETS.read().await
}

async fn alone() -> tokio::sync::RwLockWriteGuard<'static, ()> {
    SOCKETS.write().await
}

fn lines(out: &str) -> Vec<&str> {
    out.lines().collect()
}

#[tokio::test]
async fn a_confined_server_sees_no_credentials_writes_only_its_directory_and_has_no_network() {
    let _sockets = shared().await;
    let place = place();
    let (out, sandbox) = run(&place, Confinement::Confined).await;
    assert_eq!(
        lines(&out),
        [
            "no-ssh",
            "no-netrc",
            "no-postern",
            "wrote-project",
            "no-connect"
        ],
        "{out}"
    );
    assert!(place.project.join("written").is_file());
    assert!(
        !place.user_home.join("outside").exists(),
        "a write outside its directory reached the user's files"
    );
    let sandbox = sandbox.expect("the record names its sandbox");
    assert_eq!(sandbox.tool, "bubblewrap");
    assert!(sandbox.hidden.contains(&place.user_home.join(".ssh")));
}

#[tokio::test]
async fn the_same_server_unconfined_can_do_all_of_it() {
    let _sockets = shared().await;
    let place = place();
    let (out, sandbox) = run(&place, Confinement::Unconfined).await;
    assert_eq!(
        lines(&out),
        [
            "ssh-canary",
            "netrc-canary",
            "home-canary",
            "wrote-project",
            "connected"
        ],
        "{out}"
    );
    assert!(place.user_home.join("outside").is_file());
    assert_eq!(sandbox, None, "the record says unconfined");
}

#[tokio::test]
async fn a_link_planted_in_a_writable_path_is_not_followed_at_the_next_launch() {
    let _sockets = shared().await;
    let place = place();
    // Launch one: `cache` does not exist yet, so the server makes it a link to the home.
    let planter = script(&place, "ln -s ../user cache && echo planted", &["cache"]);
    let (out, _) = run_config(&place, &planter).await.expect("launch");
    assert_eq!(lines(&out), ["planted"], "{out}");
    // Launch two would bind the home writable through it: refused, and said why.
    let writer = script(&place, "echo pwn >> cache/.bashrc; echo ran", &["cache"]);
    let refused = run_config(&place, &writer)
        .await
        .expect_err("a launch through a planted link");
    assert!(
        refused.contains("symbolic link") && refused.contains("cache"),
        "{refused}"
    );
    assert!(!place.user_home.join(".bashrc").exists());
}

#[tokio::test]
async fn a_hidden_path_below_its_directory_cannot_be_renamed_away() {
    let _sockets = shared().await;
    let mut place = place();
    // The Postern home two levels below the server's directory.
    place.postern_home = place.project.join("state/postern");
    std::fs::create_dir_all(&place.postern_home).expect("mkdir");
    std::fs::write(place.postern_home.join("canary"), "home-canary\n").expect("canary");
    let attack = script(
        &place,
        "mv state state.moved 2>/dev/null && echo moved || echo not-moved; \
         mkdir -p state/postern 2>/dev/null; echo planted > state/postern/canary 2>/dev/null; \
         cat state/postern/canary",
        &[],
    );
    let (out, _) = run_config(&place, &attack).await.expect("launch");
    assert_eq!(lines(&out), ["not-moved", "planted"], "{out}");
    assert_eq!(
        std::fs::read_to_string(place.postern_home.join("canary")).expect("canary"),
        "home-canary\n",
        "the Postern home's files were replaced"
    );
    assert!(!place.project.join("state.moved").exists());
}

#[tokio::test]
async fn a_confined_server_gets_no_engine_variables_and_no_system_sockets() {
    let _sockets = shared().await;
    let place = place();
    // cargo runs tests with CARGO_MANIFEST_DIR set: the engine's own variable.
    assert!(std::env::var_os("CARGO_MANIFEST_DIR").is_some());
    let look = "echo ${CARGO_MANIFEST_DIR:-no-variable}; \
                [ -z \"$(find /run -mindepth 1 -not -type d)\" ] && echo empty-run || echo run-shown; \
                [ -n \"$PATH\" ] && echo path";
    let (out, _) = run_config(&place, &script(&place, look, &[]))
        .await
        .expect("launch");
    assert_eq!(lines(&out), ["no-variable", "empty-run", "path"], "{out}");
    let mut open = script(&place, look, &[]);
    open.confinement = Confinement::Unconfined;
    let (out, _) = run_config(&place, &open).await.expect("launch");
    assert_eq!(
        lines(&out).first().copied(),
        std::env::var("CARGO_MANIFEST_DIR").ok().as_deref(),
        "{out}"
    );
}

/// gnome-keyring started without a runtime directory keeps its control socket in the user's
/// cache (`~/.cache/keyring-XXXXXX/control`): a confined server cannot reach it (it would test
/// the login password there, or stop the keyring), and reads the rest of the cache as before.
#[tokio::test]
async fn a_confined_server_cannot_reach_the_keyrings_control_socket_in_the_cache() {
    let _sockets = alone().await;
    // Outside /tmp, which a confined server sees empty whatever is hidden in it.
    let place = place_in(tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tempdir"));
    let cache = place.user_home.join(".cache");
    let control = cache.join("keyring-T3ST42");
    std::fs::create_dir_all(&control).expect("keyring dir");
    std::fs::create_dir_all(cache.join("uv")).expect("uv cache");
    std::fs::write(cache.join("uv/kept"), "cache-kept\n").expect("cache");
    let _listening =
        std::os::unix::net::UnixListener::bind(control.join("control")).expect("a socket");
    let look = format!(
        "[ -S {control}/control ] && echo socket || echo no-socket; cat {uv}",
        control = control.display(),
        uv = cache.join("uv/kept").display()
    );
    let (out, sandbox) = run_config(&place, &script(&place, &look, &[]))
        .await
        .expect("launch");
    assert_eq!(lines(&out), ["no-socket", "cache-kept"], "{out}");
    assert!(
        sandbox
            .expect("confined")
            .hidden
            .contains(&cache.join("keyring-*")),
        "the profile names the pattern, not this run's directory"
    );
    let mut open = script(&place, &look, &[]);
    open.confinement = Confinement::Unconfined;
    let (out, _) = run_config(&place, &open).await.expect("launch");
    assert_eq!(lines(&out), ["socket", "cache-kept"], "{out}");
}

#[tokio::test]
async fn a_server_kept_in_the_postern_home_is_refused_with_the_reason() {
    let _sockets = shared().await;
    let mut place = place();
    place.project = place.postern_home.join("servers/kept");
    std::fs::create_dir_all(&place.project).expect("mkdir");
    let refused = run_config(&place, &script(&place, "echo ran", &[]))
        .await
        .expect_err("a server whose directory is hidden");
    assert!(
        refused.contains("cannot see")
            && refused.contains(&place.postern_home.display().to_string()),
        "{refused}"
    );
}

/// What a confined server leaves in its own directory for its next launch is never run
/// outside its sandbox, not even to ask an interpreter its version before the launch: here it
/// replaces its virtual environment's `python` with a script that reads the user's keys and
/// writes beside the user's files when run.
#[tokio::test]
async fn an_interpreter_planted_in_its_directory_is_not_asked_its_version_outside_the_sandbox() {
    let _sockets = shared().await;
    let place = place();
    let planted = format!(
        "#!/bin/sh\n(cat {ssh}/id_canary || echo no-ssh) > {home}/probed 2>&1; echo Python 3.99.0\n",
        ssh = place.user_home.join(".ssh").display(),
        home = place.user_home.display(),
    );
    // Launch one plants it (a confined server may write its directory).
    let plant = format!(
        "mkdir -p venv/bin && cat > venv/bin/python <<'PLANTED'\n{planted}PLANTED\n\
         chmod +x venv/bin/python && echo planted"
    );
    let (out, _) = run_config(&place, &script(&place, &plant, &[]))
        .await
        .expect("launch");
    assert_eq!(lines(&out), ["planted"], "{out}");
    // Launch two runs it as its interpreter.
    std::fs::write(place.project.join("server.py"), "print('hi')\n").expect("entry");
    let mut config = script(&place, "", &[]);
    config.command = vec!["./venv/bin/python".into(), "server.py".into()];
    let launched = launch_with(&config, &cache(&place), |_| Given::default());
    assert!(
        !place.user_home.join("probed").exists(),
        "the planted interpreter ran outside the sandbox: {:?}",
        std::fs::read_to_string(place.user_home.join("probed")),
    );
    // It was asked, inside: its answer is the record's runtime.
    let launched = launched.expect("launch two");
    assert_eq!(launched.record.runtime.as_deref(), Some("Python 3.99.0"));
    assert!(launched.record.sandbox.is_some());
}

/// The interpreter's version a confined server answers for itself (here from a script in its
/// directory run by the real interpreter) stays its own: an honest server using that
/// interpreter is not recorded with the planted answer.
#[tokio::test]
async fn a_version_a_confined_server_answers_is_not_another_servers_runtime() {
    let _sockets = shared().await;
    let place = place();
    let out = std::process::Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .expect("python3 runs");
    let python = String::from_utf8(out.stdout)
        .expect("utf-8")
        .trim()
        .to_owned();
    let plant = format!(
        "mkdir -p venv/bin && printf '#!{python}\\nprint(\"Python 3.1.0\")\\n' > venv/bin/python \
         && chmod +x venv/bin/python && echo planted"
    );
    let (out, _) = run_config(&place, &script(&place, &plant, &[]))
        .await
        .expect("launch");
    assert_eq!(lines(&out), ["planted"], "{out}");
    std::fs::write(place.project.join("server.py"), "print('hi')\n").expect("entry");
    let shared = cache(&place);
    let mut planted = script(&place, "", &[]);
    planted.command = vec!["./venv/bin/python".into(), "server.py".into()];
    // The user site of the version that runs (by the binary's name), which loads whatever the
    // script answers.
    let binary = std::fs::canonicalize(&python).expect("python");
    let version = binary
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_prefix("python"))
        .expect("pythonX.Y")
        .to_owned();
    let user_site = place
        .user_home
        .join(format!(".local/lib/python{version}/site-packages"));
    std::fs::create_dir_all(&user_site).expect("user site");
    planted.env = vec![
        format!("HOME={}", place.user_home.display())
            .parse()
            .expect("env"),
    ];
    let seen = shared.observe(&planted).expect("observe");
    assert!(
        seen.extra_paths.iter().any(|a| a.path == user_site),
        "{:?}",
        seen.extra_paths
    );
    assert_eq!(
        seen.runtime.as_deref(),
        Some("Python 3.1.0"),
        "its own word"
    );
    let mut honest = script(&place, "", &[]);
    honest.confinement = Confinement::Unconfined;
    honest.command = vec![python, "server.py".into()];
    let seen = shared.observe(&honest).expect("observe");
    assert!(
        seen.runtime
            .as_deref()
            .is_some_and(|r| r.starts_with("Python 3.") && r != "Python 3.1.0"),
        "{:?}",
        seen.runtime
    );
}

/// The dynamic loader's variables configured for a confined server reach the server, inside,
/// and not bubblewrap itself, which runs outside: configured with `LD_PRELOAD=./lib.so`,
/// bubblewrap loaded the library the server wrote with the user's whole rights (review 7,
/// N1). Played here with `LD_DEBUG_OUTPUT`, which has every process that reads it write a file
/// there: none is written outside, by the captures or the launch.
#[tokio::test]
async fn the_loaders_variables_reach_the_server_inside_and_not_bubblewrap_outside() {
    let _sockets = shared().await;
    let place = place();
    let trace = place.user_home.join("loader-trace");
    let mut config = script(&place, "echo ${LD_DEBUG:-none}", &[]);
    config.env = vec![
        "LD_DEBUG=libs".parse().expect("env"),
        format!("LD_DEBUG_OUTPUT={}", trace.display())
            .parse()
            .expect("env"),
    ];
    let (out, _) = run_config(&place, &config).await.expect("launch");
    assert_eq!(lines(&out), ["libs"], "{out}");
    let written: Vec<_> = std::fs::read_dir(&place.user_home)
        .expect("home")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with("loader-trace"))
        .collect();
    assert!(written.is_empty(), "written outside: {written:?}");
}

/// A daemon of the user's listening on a Unix socket in the home (a VM manager's container
/// engine is root in its VM and writes the home through its mounts) or in the project is
/// outside the hidden list: a confined server cannot connect to it, nor send to a datagram
/// socket there, though the paths' directories stay readable; unconfined, it can.
#[tokio::test]
async fn a_confined_server_cannot_connect_to_the_users_sockets_it_can_see() {
    let _sockets = alone().await;
    use std::os::unix::net::{UnixDatagram, UnixListener};
    // Outside /tmp, which a confined server sees empty whatever is in it.
    let place = place_in(tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tempdir"));
    let engine = place.user_home.join(".local/share/vmtool/default");
    let spaced = place.user_home.join("my daemon");
    for dir in [&engine, &spaced] {
        std::fs::create_dir_all(dir).expect("mkdir");
    }
    std::fs::write(engine.join("notes"), "vm-notes\n").expect("file");
    let sockets = [
        engine.join("docker.sock"),
        spaced.join("log sock"),
        place.project.join("dev.sock"),
    ];
    let _listening = UnixListener::bind(&sockets[0]).expect("a socket");
    let _datagrams = UnixDatagram::bind(&sockets[1]).expect("a datagram socket");
    let _in_project = UnixListener::bind(&sockets[2]).expect("a socket");
    // Anywhere on the machine, a socket whose name is not UTF-8 (review 8, N1: it made the
    // table unreadable as text, and nothing was covered).
    let _poison = abstract_socket(b"postern-confine-\xff\xfe");
    let look = format!(
        "cat '{notes}'; {connect}",
        notes = engine.join("notes").display(),
        connect = connect(&sockets)
    );
    let (out, _) = run_config(&place, &script(&place, &look, &[]))
        .await
        .expect("launch");
    assert_eq!(
        lines(&out),
        ["vm-notes", "refused", "refused", "refused"],
        "{out}"
    );
    let mut open = script(&place, &look, &[]);
    open.confinement = Confinement::Unconfined;
    let (out, _) = run_config(&place, &open).await.expect("launch");
    assert_eq!(
        lines(&out),
        ["vm-notes", "reached", "reached", "reached"],
        "{out}"
    );
}

/// A shell command that tries to connect to each of `sockets` (a datagram socket if its name
/// ends in `log sock`) and prints `reached` or `refused` for each.
fn connect(sockets: &[PathBuf]) -> String {
    let connect = "import socket, sys\n\
                   for path in sys.argv[1:]:\n\
                   \x20   kind = socket.SOCK_DGRAM if path.endswith('log sock') else socket.SOCK_STREAM\n\
                   \x20   try:\n\
                   \x20       socket.socket(socket.AF_UNIX, kind).connect(path)\n\
                   \x20       print('reached')\n\
                   \x20   except OSError:\n\
                   \x20       print('refused')\n";
    let paths: Vec<String> = sockets
        .iter()
        .map(|p| format!("'{}'", p.display()))
        .collect();
    format!("/usr/bin/python3 -c \"{connect}\" {}", paths.join(" "))
}

/// A listener on an abstract socket named `name` (then this process's id).
fn abstract_socket(name: &[u8]) -> std::os::unix::net::UnixListener {
    use std::os::linux::net::SocketAddrExt;
    let mut name = name.to_vec();
    name.extend_from_slice(std::process::id().to_string().as_bytes());
    let address = std::os::unix::net::SocketAddr::from_abstract_name(&name).expect("a name");
    std::os::unix::net::UnixListener::bind_addr(&address).expect("an abstract socket")
}

/// A daemon's socket in a directory below the server's own: the server cannot rename that
/// directory away at one launch (the socket's listed path then named nothing at the next, so
/// it was not covered) and rename it back at the next to connect (review 8, N2).
#[tokio::test]
async fn a_confined_server_cannot_move_a_sockets_directory_to_uncover_it_later() {
    let _sockets = alone().await;
    let place = place_in(tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tempdir"));
    let run = place.project.join("run");
    std::fs::create_dir_all(&run).expect("mkdir");
    let socket = run.join("dev.sock");
    let _listening = std::os::unix::net::UnixListener::bind(&socket).expect("a socket");
    let first = "mv run run.moved 2>/dev/null && echo moved || echo pinned";
    let (out, _) = run_config(&place, &script(&place, first, &[]))
        .await
        .expect("launch");
    assert_eq!(lines(&out), ["pinned"], "{out}");
    assert!(socket.exists(), "the daemon's socket stays where it was");
    let second = format!(
        "[ -d run.moved ] && mv run.moved run; {}",
        connect(std::slice::from_ref(&socket))
    );
    let (out, _) = run_config(&place, &script(&place, &second, &[]))
        .await
        .expect("launch");
    assert_eq!(lines(&out), ["refused"], "{out}");
}

/// More sockets where a confined server could reach them than a launch covers (bubblewrap's
/// time grows with the square of its mounts, and it takes at most 9,000 arguments): the launch
/// is refused, saying where they are, rather than started with some left uncovered.
#[tokio::test]
async fn a_launch_among_more_sockets_than_it_covers_is_refused_saying_where() {
    let _sockets = shared().await;
    // In its own directory under /tmp, which only this launch shows again: the other tests'
    // launches, running meanwhile, do not cover these.
    let place = place_in(tempfile::tempdir_in("/tmp").expect("tempdir"));
    let many = place.project.join("many");
    std::fs::create_dir_all(&many).expect("mkdir");
    let _listening: Vec<std::os::unix::net::UnixListener> = (0..300)
        .map(|i| std::os::unix::net::UnixListener::bind(many.join(format!("{i}.sock"))))
        .collect::<Result<_, _>>()
        .expect("sockets");
    let err = run_config(&place, &script(&place, "echo started", &[]))
        .await
        .expect_err("refused");
    assert!(err.contains("Unix sockets"), "{err}");
    assert!(err.contains(&many.display().to_string()), "{err}");
    assert!(err.contains("--unconfined"), "{err}");
}
