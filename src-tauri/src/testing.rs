//! Test helpers: an app on Tauri's mock runtime with a real engine (secrets in memory), and
//! calls put in front of its gate the way the gateway does (`Authorizer::authorize`), from
//! the test process itself as the agent run.

use std::sync::Arc;
use std::time::Duration;

use postern_domain::catalog::Catalog;
use postern_domain::{
    AgentIdentity, AgentRun, Artifact, CallId, Caller, CatalogView, Digest, ExecutionEpoch,
    ExecutionRecord, Pinning, Presented, Request,
};
use postern_engine::Home;
use postern_gateway::authorize::{Authorizer, CallToAuthorize, Verdict};
use serde_json::{Value, json};
use tauri::Manager;
use tauri::ipc::{CallbackFn, InvokeBody};
use tauri::test::{
    INVOKE_KEY, MockRuntime, get_ipc_response, mock_builder, mock_context, noop_assets,
};
use tauri::webview::InvokeRequest;
use tokio::sync::oneshot;

use crate::{EngineView, Shell};

/// An app on the mock runtime, without an engine.
pub fn app() -> tauri::App<MockRuntime> {
    crate::builder(mock_builder())
        .build(mock_context(noop_assets()))
        .unwrap()
}

/// An app whose engine runs on a fresh home (kept alive by the returned directory).
pub fn running_app() -> (tauri::App<MockRuntime>, tempfile::TempDir) {
    let home = tempfile::tempdir().unwrap();
    let app = app();
    crate::shell::start_with(
        app.handle(),
        Ok(Home::at(home.path())),
        crate::shell::test_hosted,
    );
    wait_for(|| matches!(app.state::<Shell>().view(), EngineView::Running { .. }));
    // An engine starts locked; the first-run step chooses the passphrase, which unlocks it.
    invoke(
        &app,
        "set_passphrase",
        serde_json::json!({"passphrase": "postern-app-tests", "proof": null}),
    )
    .unwrap();
    (app, home)
}

/// Invokes the IPC command `cmd` from the status window, as the UI does: the answer, or the
/// refusal (`CommandError`).
pub fn invoke(app: &tauri::App<MockRuntime>, cmd: &str, body: Value) -> Result<Value, Value> {
    let webview = match app.get_webview_window(crate::window::MAIN) {
        Some(webview) => webview,
        None => tauri::WebviewWindowBuilder::new(app, crate::window::MAIN, Default::default())
            .build()
            .unwrap(),
    };
    let request = InvokeRequest {
        cmd: cmd.into(),
        callback: CallbackFn(0),
        error: CallbackFn(1),
        // `tauri://localhost` is the app's own origin on Linux and macOS.
        url: "tauri://localhost".parse().unwrap(),
        body: InvokeBody::Json(body),
        headers: Default::default(),
        invoke_key: INVOKE_KEY.to_string(),
    };
    get_ipc_response(&webview, request).map(|r| r.deserialize().unwrap())
}

/// Stops the app's engine.
pub fn stop(app: &tauri::App<MockRuntime>) {
    tauri::async_runtime::block_on(app.state::<Shell>().shutdown());
}

/// The body of the newest audit record of `kind`, opened (the vault is unlocked), once the
/// audit writer committed one.
pub fn audit_event(app: &tauri::App<MockRuntime>, kind: &str) -> Value {
    let found = || -> Option<Value> {
        let status = app.state::<Shell>().with_engine(|e| e.status().ok())??;
        let head: u64 = status.audit.head?.split(':').next()?.parse().ok()?;
        (1..=head).rev().find_map(|seq| {
            let entry = invoke(app, "audit_entry", json!({ "seq": seq })).ok()?;
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
pub fn ask(app: &tauri::App<MockRuntime>, tool: &str) -> oneshot::Receiver<Verdict> {
    let authority = app.state::<Shell>().authority().expect("an engine runs");
    let (tx, rx) = oneshot::channel();
    let call = call(tool);
    tauri::async_runtime::block_on(async {
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
