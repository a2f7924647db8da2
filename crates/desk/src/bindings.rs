//! The TypeScript declarations of every type that crosses the IPC boundary, committed as
//! `ui/src/bindings.ts`. Regenerate with `cargo run -p postern-desk --bin gen-bindings`;
//! a test fails when the committed file drifts.
//!
//! The approval card is the domain's type, which has no TypeScript derive: its twin is
//! written by hand in `ui/src/approval-card.ts`, and a committed sample
//! (`ui/src/fixtures/approval-card.json`, see [`crate::sample`]) keeps the two honest.

use ts_rs::TS;

use crate::approvals::{Approval, Chosen};
use crate::commands::{CommandError, ErrorCode, ProofInput};
use crate::credentials::{CredentialItem, CredentialKind, CredentialUseItem, NewCredential};
use crate::journal::{AnchorView, Verification};
use crate::servers::{AgentSnippet, ImportSource, Imported, NewServer, Rewired};
use crate::view::{EngineView, Unavailable};

/// Where the file lives, relative to this crate's directory.
pub const PATH: &str = "../../ui/src/bindings.ts";

/// The engine's status types followed by this app's own IPC types.
pub fn typescript() -> String {
    let engine = postern_engine::typescript_bindings();
    // The engine's header line first, then the one import the app's types need.
    let (header, decls) = engine.split_once("\n\n").unwrap_or(("", &engine));
    let mut out =
        format!("{header}\n\nimport type {{ ApprovalCard }} from \"./approval-card\";\n\n{decls}");
    out.push_str("// From crates/desk/src/view.rs: the engine as the app sees it.\n\n");
    push(&mut out, [EngineView::decl(), Unavailable::decl()]);
    out.push_str(
        "// From crates/desk/src/approvals.rs and commands.rs: approvals and the commands' types.\n\n",
    );
    push(
        &mut out,
        [
            Approval::decl(),
            Chosen::decl(),
            postern_engine::SettingsUpdate::decl(),
            ProofInput::decl(),
            CommandError::decl(),
            ErrorCode::decl(),
        ],
    );
    out.push_str(
        "// From crates/desk/src/servers.rs and postern_engine::import: servers from the window.\n\n",
    );
    push(
        &mut out,
        [
            NewServer::decl(),
            ImportSource::decl(),
            postern_engine::import::Found::decl(),
            postern_engine::import::Client::decl(),
            postern_engine::import::Entry::decl(),
            postern_engine::import::Route::decl(),
            postern_engine::rewire::Coverage::decl(),
            postern_engine::rewire::Plan::decl(),
            postern_engine::rewire::Change::decl(),
            Rewired::decl(),
            Imported::decl(),
            AgentSnippet::decl(),
        ],
    );
    out.push_str("// From crates/desk/src/credentials.rs: credentials, never their values.\n\n");
    push(
        &mut out,
        [
            CredentialItem::decl(),
            CredentialUseItem::decl(),
            CredentialKind::decl(),
            NewCredential::decl(),
        ],
    );
    out.push_str("// From crates/desk/src/journal.rs: verifying the audit log.\n\n");
    push(&mut out, [Verification::decl(), AnchorView::decl()]);
    out
}

fn push(out: &mut String, decls: impl IntoIterator<Item = String>) {
    for decl in decls {
        out.push_str("export ");
        out.push_str(&decl);
        out.push_str("\n\n");
    }
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
             cargo run -p postern-desk --bin gen-bindings\n\nand commit the result.",
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
