//! `unsafe` is denied in the whole workspace (`[workspace.lints]`) and allowed, each time with
//! a reason, in exactly the small modules ARCHITECTURE.md lists: today the macOS calls no safe
//! binding offers. A new one is a decision to write down there, not something a lint `allow`
//! slips in.

use std::path::{Path, PathBuf};

/// The files that may allow `unsafe`, each in one documented module.
const ALLOWED: [&str; 5] = [
    // ptrace(PT_DENY_ATTACH).
    "crates/engine/src/harden.rs",
    // LAContext (Touch ID or the login password; objc2 marks it unsafe).
    "crates/engine/src/os_auth/local_auth.rs",
    // NSNotificationCenter observers (objc2 marks them unsafe).
    "crates/engine/src/os_lock.rs",
    // proc_pidinfo(PROC_PIDTBSDINFO).
    "crates/supervisor/src/table/libproc.rs",
    // madvise(MADV_DONTNEED) on a window process's clean file pages while it waits on standby.
    "src-tauri/src/standby.rs",
];

#[test]
fn unsafe_is_denied_everywhere_and_allowed_only_where_listed_with_a_reason() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace");
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).expect("Cargo.toml");
    assert!(
        squeeze(&manifest).contains(concat!("unsafe", "_code=\"deny\"")),
        "the workspace denies unsafe code"
    );

    let mut sources = Vec::new();
    for dir in ["crates", "src-tauri/src", "tests/src", "tests/tests"] {
        rust_files(&root.join(dir), &mut sources);
    }
    assert!(sources.len() > 50, "found the sources: {}", sources.len());
    let mut allowing = Vec::new();
    for path in &sources {
        let text = squeeze(&std::fs::read_to_string(path).expect("read a source"));
        let rel = path
            .strip_prefix(root)
            .expect("under the root")
            .to_string_lossy()
            .replace('\\', "/");
        for attr in ["allow(", "expect(", "warn("] {
            let needle = format!("{attr}{}", concat!("unsafe", "_code"));
            for (at, _) in text.match_indices(&needle) {
                let rest = &text[at + needle.len()..];
                assert!(
                    rest.starts_with(",reason="),
                    "{rel}: `{needle}` without a reason"
                );
                allowing.push(rel.clone());
            }
        }
        assert!(
            !text.contains(concat!("#![allow(", "unsafe")),
            "{rel}: unsafe allowed for a whole crate"
        );
    }
    allowing.sort();
    allowing.dedup();
    assert_eq!(allowing, ALLOWED, "the modules that allow unsafe code");
}

/// The text without whitespace, so an attribute reads the same however it is wrapped.
fn squeeze(text: &str) -> String {
    text.chars().filter(|c| !c.is_whitespace()).collect()
}

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}
