//! Every IPC call of a window goes to the desk as it came: the command's name, the window's
//! label and the arguments object ([`postern_desk::Desk::call`]). Tauri has checked the call
//! against the window's capability first (tauri.conf.json, with the commands named in
//! build.rs); the desk checks the window's part again.

use std::sync::Arc;

use postern_desk::Desk;
use serde_json::Value;
use tauri::ipc::{Invoke, InvokeBody, InvokeError};
use tauri::{Manager, Runtime};

/// The app's invoke handler. Always takes the call: a command the desk does not know is
/// refused by it, with a clear error.
pub fn handle<R: Runtime>(invoke: Invoke<R>) -> bool {
    let Invoke {
        message, resolver, ..
    } = invoke;
    let webview = message.webview();
    let Some(desk) = webview.try_state::<Arc<Desk>>().map(|d| Arc::clone(&d)) else {
        resolver.reject("the app is starting");
        return true;
    };
    let args = match message.payload() {
        InvokeBody::Json(args) => args.clone(),
        InvokeBody::Raw(_) => Value::Null,
    };
    let window = webview.label().to_owned();
    let command = message.command().to_owned();
    resolver.respond_async(async move {
        desk.call(&window, &command, args)
            .await
            .map_err(InvokeError)
    });
    true
}

#[cfg(test)]
mod tests {
    use postern_desk::parts::{APPROVAL_WINDOW, STATUS_WINDOW};
    use serde_json::Value;

    /// The `allow-<command>` permissions the capability `identifier` grants, as command names.
    fn granted(config: &Value, identifier: &str) -> Vec<String> {
        let capabilities = config["app"]["security"]["capabilities"]
            .as_array()
            .expect("capabilities");
        let capability = capabilities
            .iter()
            .find(|c| c["identifier"] == identifier)
            .unwrap_or_else(|| panic!("no capability {identifier}"));
        let mut commands: Vec<String> = capability["permissions"]
            .as_array()
            .expect("permissions")
            .iter()
            .filter_map(|p| p.as_str()?.strip_prefix("allow-"))
            .map(|p| p.replace('-', "_"))
            .collect();
        commands.sort();
        commands
    }

    fn sorted(list: &[&str]) -> Vec<String> {
        let mut out: Vec<String> = list.iter().map(|c| (*c).to_owned()).collect();
        out.sort();
        out
    }

    #[test]
    fn each_window_s_capability_grants_exactly_the_desk_s_list() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tauri.conf.json");
        let config: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        assert_eq!(granted(&config, "status-window"), sorted(STATUS_WINDOW));
        assert_eq!(granted(&config, "approval-window"), sorted(APPROVAL_WINDOW));
    }
}
