//! Postern's desktop shell: the windows and the tray as Tauri draws them, around the desk
//! ([`postern_desk`]) that hosts the engine. Wiring only: what the windows may ask and what
//! the tray and the approval window show is the desk's; every rule is the engine's.
//!
//! - [`ipc`]: every IPC call of a window, handed to [`Desk::call`] as it came.
//! - [`tray`]: the tray icon, built from the desk's menu; [`window`]: the two windows.
//! - [`TauriSurface`]: how the desk's events, windows, tray and notifications reach Tauri.

pub mod ipc;
pub mod tray;
pub mod window;

use std::sync::Arc;

use postern_desk::Desk;
use postern_desk::tray::Shown;
use tauri::{AppHandle, Emitter, Manager, RunEvent, Runtime};
use tauri_plugin_notification::NotificationExt;

/// Builds and runs the app until the user quits.
pub fn run() {
    // The engine holds the vault key while unlocked: other processes of the user stay out.
    postern_engine::harden::protect_process();
    init_tracing();
    let app = builder(tauri::Builder::default())
        .setup(|app| {
            tray::create(app.handle())?;
            let desk = install(app.handle());
            desk.start(postern_engine::Home::resolve(None));
            Ok(())
        })
        .build(tauri::generate_context!())
        .unwrap_or_else(|err| {
            tracing::error!("cannot start the Postern app: {err}");
            std::process::exit(1);
        });
    app.run(on_run_event);
}

/// The parts of the app that tests share with [`run`]: plugins and IPC.
pub fn builder<R: Runtime>(builder: tauri::Builder<R>) -> tauri::Builder<R> {
    builder
        .plugin(tauri_plugin_notification::init())
        .invoke_handler(ipc::handle)
}

/// Makes the app's desk, drawn by this app, and keeps it as managed state.
pub fn install<R: Runtime>(app: &AppHandle<R>) -> Arc<Desk> {
    let surface = Arc::new(TauriSurface { app: app.clone() });
    let desk = Desk::new(surface, tauri::async_runtime::handle().inner().clone());
    app.manage(Arc::clone(&desk));
    desk
}

/// The desk's surface: Tauri's events, windows, tray icon and notification plugin.
pub struct TauriSurface<R: Runtime> {
    app: AppHandle<R>,
}

impl<R: Runtime> std::fmt::Debug for TauriSurface<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TauriSurface")
    }
}

impl<R: Runtime> postern_desk::Surface for TauriSurface<R> {
    fn emit(&self, event: &str, to: Option<&str>, payload: serde_json::Value) {
        let sent = match to {
            Some(label) => self.app.emit_to(label, event, payload),
            None => self.app.emit(event, payload),
        };
        if let Err(err) = sent {
            tracing::debug!("cannot emit {event}: {err}");
        }
    }

    fn show_main(&self) {
        if let Err(err) = window::show(&self.app) {
            tracing::warn!("cannot show the window: {err}");
        }
    }

    fn open_approvals(&self, focus: bool) {
        window::open_approvals(&self.app, focus);
    }

    fn close_approvals(&self) {
        window::close_approvals(&self.app);
    }

    fn set_tray(&self, shown: &Shown) -> Result<(), String> {
        tray::set(&self.app, shown).map_err(|err| err.to_string())
    }

    fn notify(&self, title: &str, body: &str) -> Result<(), String> {
        let shown = self
            .app
            .notification()
            .builder()
            .title(title)
            .body(body)
            .show()
            .map_err(|err| err.to_string());
        #[cfg(all(unix, not(target_os = "macos")))]
        check_notification_service();
        shown
    }

    fn exit(&self) {
        self.app.exit(0);
    }
}

/// Says once, in the log, when no desktop notification service answers: the plugin sends
/// notifications in the background and drops a failure silently.
#[cfg(all(unix, not(target_os = "macos")))]
fn check_notification_service() {
    static CHECKED: std::sync::Once = std::sync::Once::new();
    CHECKED.call_once(|| {
        std::thread::spawn(|| match notify_rust::get_server_information() {
            Ok(server) => tracing::debug!(server = %server.name, "desktop notifications go to this service"),
            Err(err) => tracing::warn!(
                "no desktop notification service answers ({err}): approval requests show in the approval window and the tray only"
            ),
        });
    });
}

/// Keeps the app when its last window closes (and on macOS shows the status window when the
/// Dock icon is clicked, building it if it was closed); stops the engine whichever way the event loop
/// ends (the tray's Quit has usually done it already; then this is a no-op).
fn on_run_event<R: Runtime>(app: &AppHandle<R>, event: RunEvent) {
    match event {
        RunEvent::ExitRequested { code, api, .. } => window::keep_running(code, &api),
        #[cfg(target_os = "macos")]
        RunEvent::Reopen { .. } => {
            if let Err(err) = window::show(app) {
                tracing::warn!("cannot show the window: {err}");
            }
        }
        RunEvent::Exit => {
            if let Some(desk) = app.try_state::<Arc<Desk>>() {
                tauri::async_runtime::block_on(desk.shutdown());
            }
        }
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
