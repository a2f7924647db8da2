//! Runs tauri-build on the repository's one `tauri.conf.json`.
//!
//! tauri-build, `generate_context!()` and the Tauri CLI all read `tauri.conf.json` from the
//! directory holding the crate's `Cargo.toml`; `src-tauri/tauri.conf.json` is a symlink to the
//! root file, so every relative path in it is relative to `src-tauri/` (see docs/app.md).
//!
//! With the `custom-protocol` feature (on by default) the frontend in `ui/dist` is embedded in
//! the binary. On a fresh clone nobody has built it yet; rather than failing the whole
//! workspace build, the binary then embeds a one-page notice that says how to build the UI.

use std::path::{Path, PathBuf};

fn main() {
    println!("cargo:rerun-if-changed=../ui/dist/index.html");
    println!("cargo:rerun-if-changed=../tauri.conf.json");
    println!("cargo:rerun-if-changed=../crates/desk/src/parts.rs");
    let manifest_dir = PathBuf::from(env("CARGO_MANIFEST_DIR"));
    let ui_built = manifest_dir.join("../ui/dist/index.html").is_file();
    if std::env::var_os("CARGO_FEATURE_CUSTOM_PROTOCOL").is_some() && !ui_built {
        embed_ui_missing_notice(Path::new(&env("OUT_DIR")));
    }
    // The build script runs once: leaking the list is how tauri-build takes it (`&'static`).
    let manifest = tauri_build::AppManifest::new().commands(commands().leak());
    tauri_build::try_build(tauri_build::Attributes::new().app_manifest(manifest))
        .expect("tauri-build");
}

/// Which commands each window may call: the desk's list (crates/desk/src/parts.rs).
mod parts {
    include!("../crates/desk/src/parts.rs");
}

/// Every IPC command the windows call, each once. Naming them in the app manifest makes
/// tauri-build generate an `allow-<command>` permission for each, and a window may then call
/// only the commands its capability in tauri.conf.json grants: the approval window gets the
/// queue, the answer and the lock, nothing that adds, reads or binds anything.
fn commands() -> Vec<&'static str> {
    let mut all: Vec<&'static str> = parts::STATUS_WINDOW.to_vec();
    for command in parts::APPROVAL_WINDOW {
        if !all.contains(command) {
            all.push(command);
        }
    }
    all
}

/// Points `generate_context!` at a placeholder page through `TAURI_CONFIG`, which the macro
/// merges over the config file (merged with any `TAURI_CONFIG` the Tauri CLI passed).
fn embed_ui_missing_notice(out_dir: &Path) {
    let dir = out_dir.join("ui-missing");
    std::fs::create_dir_all(&dir).expect("create OUT_DIR/ui-missing");
    std::fs::write(dir.join("index.html"), NOTICE).expect("write the placeholder page");
    let mut config: serde_json::Value = std::env::var("TAURI_CONFIG")
        .ok()
        .and_then(|raw| serde_json::from_str(&raw).ok())
        .unwrap_or_else(|| serde_json::json!({}));
    config["build"]["frontendDist"] = serde_json::Value::String(dir.display().to_string());
    println!("cargo:rustc-env=TAURI_CONFIG={config}");
    println!(
        "cargo:warning=ui/dist is missing: embedding a placeholder page. Build the UI with \
         `npm --prefix ui ci && npm --prefix ui run build` (scripts/run-app.sh does both)."
    );
}

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("cargo sets {name}"))
}

const NOTICE: &str = r#"<!doctype html>
<html><head><meta charset="utf-8"><title>Postern</title></head>
<body>
<h1>The Postern UI was not built</h1>
<p>This binary was compiled before <code>ui/dist</code> existed. Build the UI, then the app:</p>
<pre>npm --prefix ui ci &amp;&amp; npm --prefix ui run build
cargo build -p postern-app</pre>
<p>or run <code>scripts/run-app.sh</code>, which does both.</p>
</body></html>
"#;
