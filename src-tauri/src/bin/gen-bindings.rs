//! Writes `ui/src/bindings.ts`, the TypeScript twins of the IPC types.
//!
//! Run: `cargo run -p postern-app --bin gen-bindings`

use std::path::Path;

fn main() -> anyhow::Result<()> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(postern_app::bindings::PATH);
    std::fs::write(&path, postern_app::bindings::typescript())?;
    println!("wrote {}", path.canonicalize()?.display());
    Ok(())
}
