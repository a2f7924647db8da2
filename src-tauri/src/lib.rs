//! Postern's desktop shell: it hosts the engine in-process, shows its status in a window,
//! asks a human about approval requests, and keeps running in the tray. Wiring only: every
//! rule lives in the engine crates.
//!
//! - [`shell`]: the engine this process owns (or why it has none), and the change events.
//! - [`view`]: what the status window is told about the engine.
//! - [`approvals`]: open requests as the approval window, notifications and tray show them.
//! - [`commands`]: the typed IPC the UI calls: the gate's ([`commands`]), servers
//!   ([`servers`]), credentials ([`credentials`]), the journals and the audit log
//!   ([`journal`]), grants and every-use settings ([`permissions`]).
//! - [`tray`]: the tray icon, its looks and its menu; [`window`]: the two windows.
//! - [`bindings`]: the TypeScript declarations the UI imports; [`sample`]: the approval card
//!   the UI's tests read.

pub mod approvals;
pub mod bindings;
pub mod commands;
pub mod credentials;
pub mod journal;
pub mod permissions;
#[cfg(any(test, feature = "gen-bindings"))]
pub mod sample;
pub mod servers;
pub mod shell;
#[cfg(test)]
mod testing;
pub mod tray;
pub mod view;
pub mod window;

use tauri::{Manager, RunEvent, Runtime};

pub use shell::Shell;
pub use view::{EngineView, Unavailable};

/// Builds and runs the app until the user quits.
pub fn run() {
    // The engine holds the vault key while unlocked: other processes of the user stay out.
    postern_engine::harden::protect_process();
    init_tracing();
    let app = builder(tauri::Builder::default())
        .setup(|app| {
            tray::create(app.handle())?;
            shell::start(app.handle(), postern_engine::Home::resolve(None));
            Ok(())
        })
        .build(tauri::generate_context!())
        .unwrap_or_else(|err| {
            tracing::error!("cannot start the Postern app: {err}");
            std::process::exit(1);
        });
    app.run(on_run_event);
}

/// The parts of the app that tests share with [`run`]: plugins, state and IPC.
pub fn builder<R: Runtime>(builder: tauri::Builder<R>) -> tauri::Builder<R> {
    builder
        .plugin(tauri_plugin_notification::init())
        .manage(Shell::default())
        .manage(approvals::Announced::default())
        .manage(approvals::Focus::default())
        .manage(tray::TrayState::default())
        .invoke_handler(tauri::generate_handler![
            commands::status,
            commands::approvals,
            commands::approval_focus,
            commands::clicks_until,
            commands::system_auth,
            commands::answer,
            commands::lock,
            commands::dismiss_leaks,
            commands::unlock,
            commands::set_passphrase,
            commands::update_settings,
            commands::show_approvals,
            servers::restart,
            servers::add_server,
            servers::import_sources,
            servers::import_servers,
            servers::rewire_preview,
            servers::rewire,
            servers::agent_snippet,
            credentials::credentials,
            credentials::add_credential,
            credentials::rotate_credential,
            credentials::remove_credential,
            credentials::bind_credential,
            credentials::move_to_keychain,
            credentials::unbind_credential,
            journal::timeline,
            journal::activity,
            journal::sessions_journal,
            journal::audit_entry,
            journal::verify_audit,
            permissions::permissions,
            permissions::revoke_grant,
            permissions::revoke_run,
            permissions::set_every_use,
        ])
}

/// Keeps the app when its last window closes (and on macOS shows the status window when the
/// Dock icon is clicked, building it if it was closed); stops the engine whichever way the event loop
/// ends (the tray's Quit has usually done it already; then this is a no-op).
fn on_run_event<R: Runtime>(app: &tauri::AppHandle<R>, event: RunEvent) {
    match event {
        RunEvent::ExitRequested { code, api, .. } => window::keep_running(code, &api),
        #[cfg(target_os = "macos")]
        RunEvent::Reopen { .. } => {
            if let Err(err) = window::show(app) {
                tracing::warn!("cannot show the window: {err}");
            }
        }
        RunEvent::Exit => tauri::async_runtime::block_on(app.state::<Shell>().shutdown()),
        _ => {}
    }
}

/// Logs to stderr, `RUST_LOG` style (default `info`), in colour only on a terminal.
fn init_tracing() {
    use std::io::IsTerminal;
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .try_init();
}
