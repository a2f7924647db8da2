//! Test helpers: a desk with a real engine (secrets in memory) drawn on a surface that
//! records what it was asked, and calls put in front of its gate the way the gateway does
//! (`Authorizer::authorize`), from the test process itself as the agent run.

use std::sync::{Arc, LazyLock};
use std::time::Duration;

use postern_domain::catalog::Catalog;
use postern_domain::{
    AgentIdentity, AgentRun, Artifact, CallId, Caller, CatalogView, Digest, ExecutionEpoch,
    ExecutionRecord, Pinning, Presented, Request,
};
use postern_engine::Home;
use postern_gateway::authorize::{Authorizer, CallToAuthorize, Verdict};
use serde_json::{Value, json};
use tokio::sync::oneshot;

use crate::surface::{APPROVALS, MAIN, Recorded};
use crate::{Desk, EngineView};

/// The runtime the tests' desks run their tasks on.
pub static RUNTIME: LazyLock<tokio::runtime::Runtime> = LazyLock::new(|| {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime")
});

/// Runs `future` to its end on the tests' runtime.
pub fn block_on<F: Future>(future: F) -> F::Output {
    RUNTIME.block_on(future)
}

/// A desk without an engine, and the surface it draws on.
pub fn desk() -> (Arc<Desk>, Arc<Recorded>) {
    let surface = Arc::new(Recorded::default());
    let desk = Desk::new(surface.clone(), RUNTIME.handle().clone());
    (desk, surface)
}

/// A desk whose engine runs on a fresh home (kept alive by the returned directory).
pub fn running_desk() -> (Arc<Desk>, Arc<Recorded>, tempfile::TempDir) {
    let home = tempfile::tempdir().unwrap();
    let (desk, surface) = desk();
    desk.start_with(Ok(Home::at(home.path())), crate::shell::test_hosted);
    wait_for(|| matches!(desk.shell().view(), EngineView::Running { .. }));
    // An engine starts locked; the first-run step chooses the passphrase, which unlocks it.
    invoke(
        &desk,
        "set_passphrase",
        serde_json::json!({"passphrase": "postern-app-tests", "proof": null}),
    )
    .unwrap();
    (desk, surface, home)
}

/// Invokes the IPC command `cmd` as the UI does, from the window whose commands include it:
/// the answer, or the refusal (`CommandError`).
pub fn invoke(desk: &Arc<Desk>, cmd: &str, body: Value) -> Result<Value, Value> {
    let window = if crate::allowed(MAIN, cmd) {
        MAIN
    } else {
        APPROVALS
    };
    block_on(desk.call(window, cmd, body))
}

/// Stops the desk's engine.
pub fn stop(desk: &Desk) {
    block_on(desk.shutdown());
}

/// The body of the newest audit record of `kind`, opened (the vault is unlocked), once the
/// audit writer committed one.
pub fn audit_event(desk: &Arc<Desk>, kind: &str) -> Value {
    let found = || -> Option<Value> {
        let status = desk.shell().with_engine(|e| e.status().ok())??;
        let head: u64 = status.audit.head?.split(':').next()?.parse().ok()?;
        (1..=head).rev().find_map(|seq| {
            let entry = invoke(desk, "audit_entry", json!({ "seq": seq })).ok()?;
            (entry["kind"] == kind).then(|| entry["body"]["event"].clone())
        })
    };
    wait_for(|| found().is_some());
    found().expect("found")
}

/// Polls `done` for up to 5 s.
pub fn wait_for(done: impl Fn() -> bool) {
    for _ in 0..500 {
        if done() {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("timed out");
}

/// Asks the app's gate about a call to `tool`; the receiver gets the verdict once a human
/// (or the timeout) decided.
pub fn ask(desk: &Desk, tool: &str) -> oneshot::Receiver<Verdict> {
    let authority = desk.shell().authority().expect("an engine runs");
    let (tx, rx) = oneshot::channel();
    let call = call(tool);
    block_on(async {
        authority.authorize(
            call,
            Box::new(move |verdict| {
                let _ = tx.send(verdict);
            }),
        );
    });
    rx
}

/// A call to `tool` of the server `clock` from this process.
pub fn call(tool: &str) -> CallToAuthorize {
    let pid = std::process::id();
    let agent = AgentIdentity {
        pid,
        start_time: postern_supervisor::process_start_time(pid).expect("own start time"),
        executable: None,
        chain: vec!["cargo".into(), "postern-app-tests".into(), "postern".into()],
        cwd: None,
    };
    let record = ExecutionRecord {
        server_label: "clock".parse().unwrap(),
        epoch: ExecutionEpoch::new(1_700_000_000_000, 1),
        launch_command: vec!["/usr/bin/python3".into(), "clock.py".into()],
        executable: Artifact {
            path: "/usr/bin/python3".into(),
            digest: Digest::of(b"python"),
        },
        wrappers: vec![],
        entry: None,
        lockfiles: vec![],
        extra_paths: vec![],
        runtime: None,
        working_directory: "/srv/clock".into(),
        env_names: vec![],
        loader_env: vec![],
        sandbox: Some(postern_domain::Sandbox {
            tool: "bubblewrap".into(),
            hidden: vec!["/home/dev/.ssh".into(), "/home/dev/.postern".into()],
            writable: vec!["/srv/clock".into()],
            network: "only through the egress broker".into(),
        }),
        pinning: Pinning::Pinned,
        pid: 4242,
        started_at_ms: 1_700_000_000_000,
    };
    let catalog = Catalog::new(
        vec![json!({"name": "now", "inputSchema": {"type": "object"}})],
        None,
        json!({"tools": {}}),
    )
    .unwrap();
    CallToAuthorize {
        session: 1,
        request: Request {
            call: CallId::new(1_700_000_000_000, u128::from(rand_u32())),
            caller: Caller::Identified {
                run: AgentRun::of(&agent),
            },
            server: "clock".parse().unwrap(),
            epoch: record.epoch,
            tool: tool.into(),
            credentials: Default::default(),
            catalog: CatalogView {
                presented: Some(Presented {
                    revision: catalog.digest(),
                    epoch: record.epoch,
                }),
                current: catalog.digest(),
                drift: catalog.tool_drift(tool, &catalog),
            },
        },
        agent: Some(agent),
        client: Some("test-agent 1".into()),
        record: record.into(),
        catalog: Arc::new(catalog),
        arguments: json!({}),
        withheld: Vec::new(),
    }
}

fn rand_u32() -> u32 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}
