//! The CLI reads the engine's management answers as types (crates/engine/src/answer.rs): an
//! answer of the wrong shape, or one to another request, is a clear error and never read as
//! a default ("the vault was already locked" from an answer it could not read).
//!
//! A fake engine listens on the home's socket and answers each request with a line chosen
//! here; the real `postern` binary asks it.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixListener;
use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result};
use postern_e2e::binaries;
use serde_json::{Value, json};

/// Runs `postern <args>` against a fake engine that answers `answer`; returns the request the
/// CLI sent, its exit success, stdout and stderr.
fn against(answer: &Value, args: &[&str]) -> Result<(Value, bool, String, String)> {
    let home = tempfile::tempdir()?;
    std::fs::create_dir_all(home.path().join("run"))?;
    // The fake engine holds the home's lock, as the engine does: the CLI sends nothing to a
    // listener that does not.
    let claim = std::fs::File::open(home.path())?;
    claim.try_lock()?;
    let listener = UnixListener::bind(home.path().join("run/engine.sock"))?;
    let line = answer.to_string();
    let engine = std::thread::spawn(move || -> Result<Value> {
        let (stream, _) = listener.accept()?;
        let mut reader = BufReader::new(stream.try_clone()?);
        let mut request = String::new();
        reader.read_line(&mut request)?;
        let mut stream = stream;
        stream.write_all(format!("{line}\n").as_bytes())?;
        Ok(serde_json::from_str(&request)?)
    });
    let output = postern(home.path(), args)?;
    drop(claim);
    let request = engine
        .join()
        .map_err(|_| anyhow::anyhow!("the fake engine panicked"))??;
    Ok((
        request,
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    ))
}

fn postern(home: &Path, args: &[&str]) -> Result<std::process::Output> {
    Command::new(binaries::postern()?)
        .arg("--home")
        .arg(home)
        .args(args)
        .output()
        .context("running postern")
}

#[test]
fn an_answer_of_the_wrong_shape_is_a_clear_error() -> Result<()> {
    let cases = [
        // The answer before answers were typed: a bare field.
        (
            json!({"locked": true}),
            "postern: the engine gave no usable answer: its answer to `lock` is not one this postern can read",
        ),
        // The right name, a field of the wrong type.
        (
            json!({"answer": {"lock": {"changed": "yes"}}}),
            "postern: the engine gave no usable answer: its answer to `lock` is not one this postern can read",
        ),
        // The answer to another request.
        (
            json!({"answer": {"unlock": {"changed": true}}}),
            "postern: the engine gave no usable answer: it answered `unlock` to the request `lock`",
        ),
    ];
    for (answer, expected) in cases {
        let (request, ok, stdout, stderr) = against(&answer, &["lock"])?;
        assert_eq!(request["control"]["command"], "lock", "{request}");
        assert!(!ok, "{answer}: the CLI succeeded: {stdout}");
        assert!(stdout.is_empty(), "{answer}: it printed {stdout:?}");
        assert!(stderr.starts_with(expected), "{answer}: {stderr}");
    }
    Ok(())
}

#[test]
fn a_typed_answer_and_a_refusal_read_as_themselves() -> Result<()> {
    let (_, ok, stdout, _) = against(&json!({"answer": {"lock": {"changed": false}}}), &["lock"])?;
    assert!(ok);
    assert_eq!(stdout.trim(), "the vault was already locked");

    let refusal = json!({"refused": {"error": "no live grant 01J", "code": null}});
    let (_, ok, _, stderr) = against(&refusal, &["revoke", "01J"])?;
    assert!(!ok);
    assert_eq!(stderr.trim(), "postern: no live grant 01J");
    Ok(())
}
