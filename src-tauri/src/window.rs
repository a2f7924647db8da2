//! The app's two windows. Neither outlives its use, nor does this process: the engine and the
//! tray live in the resident process. The status window (`main`) opens when the app is
//! started or the tray asks for it; closing it destroys its webview, and with the last window
//! the process goes (the web process and its memory with it); the tray's Open Postern starts
//! a new one, showing the engine's state then. The approval window (`approvals`) exists while
//! requests wait: it opens on top when a new one arrives and is destroyed when the queue
//! empties (closed by hand, its requests stay open in the tray until answered or timed out).
//! Both load the same UI, which picks its view by label.

use postern_desk::{APPROVALS, MAIN};
use serde_json::Value;
use tauri::{AppHandle, Manager, Runtime, WebviewUrl, WebviewWindowBuilder};

/// The global a new status window finds the engine's view in, taken when the window was asked
/// for (ui/src/ipc.ts reads it): its first paint is the current state, not a loading screen
/// waiting for its first call.
pub const INITIAL_STATUS: &str = "__POSTERN_STATUS__";

/// The global a new approval window finds the queue in, with whether a plain Allow needs a
/// passphrase (`approvals`, `clicksUntil`), taken when the window was asked for (ui/src/ipc.ts
/// reads it).
pub const INITIAL_APPROVALS: &str = "__POSTERN_APPROVALS__";

/// A script that sets `window.<global>` to `value`. Parsed as JSON, not read as a JavaScript
/// literal: in a literal a `"__proto__"` key (which an agent's argument may hold) would set a
/// prototype instead of being a property.
fn initial_script(global: &str, value: &Value) -> String {
    let text = Value::String(value.to_string());
    format!("window.{global} = JSON.parse({text});")
}

/// Whether the window labelled `label` is open.
pub fn is_open<R: Runtime>(app: &AppHandle<R>, label: &str) -> bool {
    app.get_webview_window(label).is_some()
}

/// Shows, unminimizes and focuses the status window, building it (from its configuration in
/// tauri.conf.json) when it was closed, with `status` (the engine's view, as the `status`
/// command gives it) for its first paint.
pub fn show<R: Runtime>(app: &AppHandle<R>, status: Option<&Value>) -> tauri::Result<()> {
    let window = match app.get_webview_window(MAIN) {
        Some(window) => window,
        None => {
            let Some(config) = app.config().app.windows.iter().find(|w| w.label == MAIN) else {
                tracing::warn!("no {MAIN} window in the configuration");
                return Ok(());
            };
            let mut builder = WebviewWindowBuilder::from_config(app, config)?;
            if let Some(status) = status {
                builder = builder.initialization_script(initial_script(INITIAL_STATUS, status));
            }
            builder.build()?
        }
    };
    window.show()?;
    window.unminimize()?;
    window.set_focus()
}

/// Opens the approval window, or shows it if it is open. It takes the keyboard focus only
/// when `focus` is set (a human asked for it); a request arriving never steals it. A new
/// window gets `initial` (INITIAL_APPROVALS) for its first paint.
pub fn open_approvals<R: Runtime>(app: &AppHandle<R>, focus: bool, initial: Option<&Value>) {
    let shown = match app.get_webview_window(APPROVALS) {
        Some(window) => window.show().and_then(|()| {
            if focus {
                window.unminimize()?;
                window.set_focus()?;
            }
            Ok(())
        }),
        None => {
            let mut builder =
                WebviewWindowBuilder::new(app, APPROVALS, WebviewUrl::App("index.html".into()));
            if let Some(initial) = initial {
                builder = builder.initialization_script(initial_script(INITIAL_APPROVALS, initial));
            }
            builder
                .title("Postern: approval requested")
                .inner_size(560.0, 720.0)
                .min_inner_size(420.0, 480.0)
                .center()
                .always_on_top(true)
                .focused(focus)
                .build()
                .map(|_| ())
        }
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
        show(app.handle(), None).unwrap();
        assert!(window.is_visible().unwrap());
    }

    #[test]
    fn the_first_paint_is_parsed_as_json_so_an_agent_s_proto_key_stays_a_property() {
        let value = serde_json::json!({"arguments": {"__proto__": {"hidden": "rm -rf ~"}}, "quote": "a\"b</script>\u{2028}"});
        let script = initial_script("__X__", &value);
        let Some(text) = script
            .strip_prefix("window.__X__ = JSON.parse(")
            .and_then(|rest| rest.strip_suffix(");"))
        else {
            panic!("{script}");
        };
        // One JSON string literal, holding the value's JSON as it is.
        let inner: String = serde_json::from_str(text).unwrap();
        assert_eq!(serde_json::from_str::<Value>(&inner).unwrap(), value);
    }

    #[test]
    fn the_approval_window_opens_once() {
        let app = crate::builder(mock_builder(), crate::ipc::Link::new().0)
            .build(mock_context(noop_assets()))
            .unwrap();
        open_approvals(app.handle(), false, None);
        open_approvals(app.handle(), true, None);
        let windows: Vec<_> = app.webview_windows().into_keys().collect();
        assert_eq!(windows, [APPROVALS]);
        close_approvals(app.handle());
    }
}
