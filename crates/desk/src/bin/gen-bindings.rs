//! Writes `ui/src/bindings.ts`, the TypeScript twins of the IPC types, and the sample
//! approval card the UI's tests read (`ui/src/fixtures/approval-card.json`, `approval.json`).
//!
//! Run: `cargo run -p postern-desk --bin gen-bindings`

use std::path::Path;

use postern_desk::{bindings, sample};

fn main() -> anyhow::Result<()> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let files = [
        (bindings::PATH, bindings::typescript()),
        (sample::CARD_PATH, sample::json(&sample::card())),
        (sample::APPROVAL_PATH, sample::json(&sample::approval())),
    ];
    for (path, text) in files {
        let path = dir.join(path);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&path, text)?;
        println!("wrote {}", path.canonicalize()?.display());
    }
    Ok(())
}
