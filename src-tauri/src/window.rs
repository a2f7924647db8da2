//! The status window. Closing it hides it: the engine keeps serving agents from the tray.

use tauri::{AppHandle, Manager, Runtime, Window, WindowEvent};

/// The status window's label (`app.windows[0].label` in tauri.conf.json).
pub const MAIN: &str = "main";

/// Shows, unminimizes and focuses the status window.
pub fn show<R: Runtime>(app: &AppHandle<R>) -> tauri::Result<()> {
    let Some(window) = app.get_webview_window(MAIN) else {
        tracing::warn!("no {MAIN} window to show");
        return Ok(());
    };
    window.show()?;
    window.unminimize()?;
    window.set_focus()
}

/// Window event hook: a close request hides the window instead of closing it.
pub fn on_event<R: Runtime>(window: &Window<R>, event: &WindowEvent) {
    if let WindowEvent::CloseRequested { api, .. } = event {
        api.prevent_close();
        if let Err(err) = window.hide() {
            tracing::warn!("cannot hide the window: {err}");
        }
    }
}
