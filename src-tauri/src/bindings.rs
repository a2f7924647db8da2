//! The TypeScript declarations of every type that crosses the IPC boundary, committed as
//! `ui/src/bindings.ts`. Regenerate with `cargo run -p postern-app --bin gen-bindings`;
//! a test fails when the committed file drifts.

use ts_rs::TS;

use crate::view::{EngineView, Unavailable};

/// Where the file lives, relative to this crate's directory.
pub const PATH: &str = "../ui/src/bindings.ts";

/// The engine's status types followed by this app's own IPC types.
pub fn typescript() -> String {
    let mut out = postern_engine::typescript_bindings();
    out.push_str("// From src-tauri/src/view.rs: the engine as the app sees it.\n\n");
    for decl in [EngineView::decl(), Unavailable::decl()] {
        out.push_str("export ");
        out.push_str(&decl);
        out.push_str("\n\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    #[test]
    fn committed_bindings_match_the_rust_types() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(super::PATH);
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            committed == super::typescript(),
            "{} is out of date with the Rust types; regenerate it with\n\n    \
             cargo run -p postern-app --bin gen-bindings\n\nand commit the result.",
            path.display()
        );
    }

    #[test]
    fn the_view_is_a_union_tagged_by_state() {
        let ts = super::typescript();
        assert!(ts.contains("export type EngineView ="), "{ts}");
        assert!(ts.contains("\"state\": \"running\""), "{ts}");
        assert!(
            ts.contains("export type Unavailable = \"already_running\""),
            "{ts}"
        );
    }
}
