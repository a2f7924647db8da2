//! The app's two windows. Neither outlives its use, nor does this process: the engine and the
//! tray live in the resident process. The status window (`main`) opens when the app is
//! started or the tray asks for it; closing it destroys its webview, and with the last window
//! the process goes (the web process and its memory with it); the tray's Open Postern starts
//! a new one, showing the engine's state then. The approval window (`approvals`) exists while
//! requests wait: it opens on top when a new one arrives and is destroyed when the queue
//! empties (closed by hand, its requests stay open in the tray until answered or timed out).
//! Both load the same UI, which picks its view by label.

use postern_desk::{APPROVALS, MAIN};
use tauri::{AppHandle, Manager, Runtime, WebviewUrl, WebviewWindowBuilder};

/// Shows, unminimizes and focuses the status window, building it (from its configuration in
/// tauri.conf.json) when it was closed.
pub fn show<R: Runtime>(app: &AppHandle<R>) -> tauri::Result<()> {
    let window = match app.get_webview_window(MAIN) {
        Some(window) => window,
        None => {
            let Some(config) = app.config().app.windows.iter().find(|w| w.label == MAIN) else {
                tracing::warn!("no {MAIN} window in the configuration");
                return Ok(());
            };
            WebviewWindowBuilder::from_config(app, config)?.build()?
        }
    };
    window.show()?;
    window.unminimize()?;
    window.set_focus()
}

/// Opens the approval window, or shows it if it is open. It takes the keyboard focus only
/// when `focus` is set (a human asked for it); a request arriving never steals it.
pub fn open_approvals<R: Runtime>(app: &AppHandle<R>, focus: bool) {
    let shown = match app.get_webview_window(APPROVALS) {
        Some(window) => window.show().and_then(|()| {
            if focus {
                window.unminimize()?;
                window.set_focus()?;
            }
            Ok(())
        }),
        None => WebviewWindowBuilder::new(app, APPROVALS, WebviewUrl::App("index.html".into()))
            .title("Postern: approval requested")
            .inner_size(560.0, 720.0)
            .min_inner_size(420.0, 480.0)
            .center()
            .always_on_top(true)
            .focused(focus)
            .build()
            .map(|_| ()),
    };
    if let Err(err) = shown {
        tracing::warn!("cannot open the approval window: {err}");
    }
}

/// Closes the approval window, if it is open.
pub fn close_approvals<R: Runtime>(app: &AppHandle<R>) {
    if let Some(window) = app.get_webview_window(APPROVALS)
        && let Err(err) = window.destroy()
    {
        tracing::warn!("cannot close the approval window: {err}");
    }
}

#[cfg(test)]
mod tests {
    use tauri::test::{mock_builder, mock_context, noop_assets};

    use super::*;

    // The mock runtime reports no window destruction to the app, so closing is checked end
    // to end (ui/e2e/app.e2e.mjs: the approval window's handle goes away).
    #[test]
    fn show_shows_a_hidden_status_window() {
        let app = crate::builder(mock_builder(), crate::ipc::Link::new().0)
            .build(mock_context(noop_assets()))
            .unwrap();
        let window = WebviewWindowBuilder::new(&app, MAIN, Default::default())
            .visible(false)
            .build()
            .unwrap();
        show(app.handle()).unwrap();
        assert!(window.is_visible().unwrap());
    }

    #[test]
    fn the_approval_window_opens_once() {
        let app = crate::builder(mock_builder(), crate::ipc::Link::new().0)
            .build(mock_context(noop_assets()))
            .unwrap();
        open_approvals(app.handle(), false);
        open_approvals(app.handle(), true);
        let windows: Vec<_> = app.webview_windows().into_keys().collect();
        assert_eq!(windows, [APPROVALS]);
        close_approvals(app.handle());
    }
}
