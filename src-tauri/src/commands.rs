//! The IPC commands the UI calls. Each one delegates; none holds a rule of its own.

use tauri::{AppHandle, Manager, Runtime};

use crate::{Shell, view::EngineView};

/// The engine's status, or why this app has no engine. `invoke("status")` in the UI.
#[tauri::command]
pub async fn status<R: Runtime>(app: AppHandle<R>) -> EngineView {
    app.state::<Shell>().view()
}

#[cfg(test)]
mod tests {
    use postern_engine::Home;
    use serde_json::{Value, json};
    use tauri::{
        Manager,
        ipc::{CallbackFn, InvokeBody},
        test::{
            INVOKE_KEY, MockRuntime, get_ipc_response, mock_builder, mock_context, noop_assets,
        },
        webview::InvokeRequest,
    };

    use crate::{EngineView, Shell, shell};

    fn app() -> tauri::App<MockRuntime> {
        crate::builder(mock_builder())
            .build(mock_context(noop_assets()))
            .unwrap()
    }

    fn invoke_status(app: &tauri::App<MockRuntime>) -> Value {
        let webview = tauri::WebviewWindowBuilder::new(app, "main", Default::default())
            .build()
            .unwrap();
        let request = InvokeRequest {
            cmd: "status".into(),
            callback: CallbackFn(0),
            error: CallbackFn(1),
            // `tauri://localhost` is the app's own origin on Linux and macOS.
            url: "tauri://localhost".parse().unwrap(),
            body: InvokeBody::Json(json!({})),
            headers: Default::default(),
            invoke_key: INVOKE_KEY.to_string(),
        };
        get_ipc_response(&webview, request)
            .unwrap()
            .deserialize()
            .unwrap()
    }

    async fn running(app: &tauri::App<MockRuntime>) {
        for _ in 0..200 {
            if matches!(app.state::<Shell>().view(), EngineView::Running { .. }) {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        panic!(
            "the engine did not start: {:?}",
            app.state::<Shell>().view()
        );
    }

    #[test]
    fn status_reports_the_running_engine_over_ipc() {
        let home = tempfile::tempdir().unwrap();
        let app = app();
        shell::start_with(app.handle(), Ok(Home::at(home.path())), shell::test_engine);
        tauri::async_runtime::block_on(running(&app));

        let payload = invoke_status(&app);

        assert_eq!(payload["state"], "running", "{payload}");
        let status = &payload["status"];
        assert_eq!(status["home"], home.path().display().to_string());
        assert!(
            status["socket"].as_str().unwrap().ends_with("engine.sock"),
            "{status}"
        );
        assert!(status["servers"].is_array(), "{status}");
        assert!(status["sessions"].is_array(), "{status}");
        tauri::async_runtime::block_on(app.state::<Shell>().shutdown());
    }

    #[test]
    fn status_says_when_no_home_could_be_chosen() {
        let app = app();
        shell::start(app.handle(), Err(postern_engine::HomeError::NoDefault));

        let payload = invoke_status(&app);

        assert_eq!(payload["state"], "unavailable", "{payload}");
        assert_eq!(payload["reason"], "no_home");
        assert_eq!(payload["home"], Value::Null);
    }

    #[test]
    fn a_second_engine_on_the_same_home_is_reported_as_already_running() {
        let home = tempfile::tempdir().unwrap();
        let first = tauri::async_runtime::block_on(shell::test_engine(Home::at(home.path())));
        let first = first.expect("the first engine starts");
        let app = app();
        shell::start_with(app.handle(), Ok(Home::at(home.path())), shell::test_engine);
        let payload = tauri::async_runtime::block_on(async {
            for _ in 0..200 {
                if !matches!(app.state::<Shell>().view(), EngineView::Starting { .. }) {
                    break;
                }
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            }
            invoke_status(&app)
        });

        assert_eq!(payload["state"], "unavailable", "{payload}");
        assert_eq!(payload["reason"], "already_running");
        assert_eq!(payload["home"], home.path().display().to_string());
        assert!(
            payload["message"]
                .as_str()
                .unwrap()
                .contains("already running"),
            "{payload}"
        );
        tauri::async_runtime::block_on(first.shutdown());
    }
}
