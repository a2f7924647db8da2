//! Golden vectors: the format, byte for byte.
//!
//! `tests/golden/v2.json` holds fixed keys, a fixed RNG seed, the inputs of a few records and
//! the exact header bytes, sealed bytes and chain hashes they produce, the records sealed in two
//! runs (records 1 to 3 with one ephemeral key, 4 and 5 with the next). This test regenerates
//! everything and compares it with the file; a difference means the format drifted, which a
//! written version must never do. After a deliberate change of the *test inputs* (never of the
//! format), rewrite the file with `POSTERN_BLESS=1 cargo test -p postern-audit --test golden`.
//!
//! `tests/golden/v1.json` pins version 1 (an ephemeral key per record), which this crate no
//! longer writes: logs begun in it are still read, so its records must still decode, verify and
//! open, and a log continues from a version-1 head in version 2. Both files are read back on
//! their own, so the vectors double as a reference for an independent implementation
//! (`tests/golden/crosscheck.py`).

mod common;

use std::path::PathBuf;

use common::{Event, TestRng, append_runs, build_log};
use postern_audit::{Chain, Head, OpeningKey, RawRecord, SealedRecord, Verified, verify};
use serde_json::{Value, json};

const SECRET: [u8; 32] = [
    0x70, 0x6f, 0x73, 0x74, 0x65, 0x72, 0x6e, 0x2d, 0x61, 0x75, 0x64, 0x69, 0x74, 0x2d, 0x67, 0x6f,
    0x6c, 0x64, 0x65, 0x6e, 0x2d, 0x6b, 0x65, 0x79, 0x2d, 0x76, 0x31, 0x00, 0x01, 0x02, 0x03, 0x04,
];
const SEED: [u8; 32] = *b"postern-audit golden rng seed v1";
const LONGEST_KIND: &str = "a_kind_of_exactly_sixty_four_bytes_which_is_the_longest_allowed_";

fn events() -> Vec<Event> {
    vec![
        (1_767_225_600_000, "vault_unlocked", Vec::new()),
        (
            1_767_225_600_123,
            "server_started",
            br#"{"server":"time","epoch":"01JGZ8XQ4T0000000000000000"}"#.to_vec(),
        ),
        (
            1_767_225_601_000,
            "tool_call_intent",
            br#"{"session":7,"tool":"get_current_time","arguments":{"timezone":"string"}}"#
                .to_vec(),
        ),
        (-1, LONGEST_KIND, (0..=255).collect()),
        (i64::MAX, "tool_call_result", b"\x00\xff".to_vec()),
    ]
}

fn path(version: u8) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("tests/golden/v{version}.json"))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap())
        .collect()
}

fn generate() -> Value {
    let key = OpeningKey::from_bytes(SECRET);
    let events = events();
    let log = build_log(&key, &events, &mut TestRng::new(SEED));
    let records: Vec<Value> = log
        .iter()
        .zip(&events)
        .map(|(record, (time, kind, body))| {
            json!({
                "seq": record.header().seq().get(),
                "time_ms": time,
                "kind": kind,
                "body_hex": hex(body),
                "header_hex": hex(record.header_bytes()),
                "sealed_body_hex": hex(record.sealed_body().as_bytes()),
                "chain_hash": record.chain_hash().to_string(),
            })
        })
        .collect();
    json!({
        "format": "postern-audit v2",
        "rng": "block i = SHA-256(seed || i as u64 big-endian), bytes taken in order; 32 per run",
        "runs": "records 1-3 share the first ephemeral key, records 4-5 the second",
        "opening_key_hex": hex(&SECRET),
        "recipient_key_base64": key.recipient().to_base64(),
        "rng_seed_hex": hex(&SEED),
        "genesis_hash": "0".repeat(64),
        "records": records,
        "head": log.last().unwrap().head().to_string(),
    })
}

#[test]
fn the_format_matches_the_golden_vectors_byte_for_byte() {
    let generated = serde_json::to_string_pretty(&generate()).unwrap() + "\n";
    if std::env::var_os("POSTERN_BLESS").is_some() {
        std::fs::write(path(2), &generated).unwrap();
    }
    let stored = std::fs::read_to_string(path(2))
        .expect("tests/golden/v2.json is committed; regenerate it only with POSTERN_BLESS=1");
    let (stored_json, generated_json): (Value, Value) = (
        serde_json::from_str(&stored).unwrap(),
        serde_json::from_str(&generated).unwrap(),
    );
    // Field by field first, for a readable failure; then the whole text.
    for (i, (s, g)) in stored_json["records"]
        .as_array()
        .unwrap()
        .iter()
        .zip(generated_json["records"].as_array().unwrap())
        .enumerate()
    {
        assert_eq!(s, g, "record {i} drifted from the golden vectors");
    }
    assert_eq!(stored, generated, "the golden vectors drifted");
}

#[test]
fn the_stored_vectors_of_both_versions_decode_verify_and_open() {
    for version in [1, 2] {
        let (rows, _, _) = stored(version);
        let records: Vec<SealedRecord> = rows
            .iter()
            .map(|[h, s, c, _]| SealedRecord::from_raw(RawRecord::new(h, s, c)).unwrap())
            .collect();
        assert!(records.iter().all(|r| r.header().version() == version));
        if version == 2 {
            let ephemeral = |i: usize| &records[i].sealed_body().as_bytes()[..32];
            assert!(ephemeral(0) == ephemeral(2) && ephemeral(2) != ephemeral(3));
            assert_eq!(ephemeral(3), ephemeral(4));
        }
    }
}

#[test]
fn a_log_begun_in_version_1_goes_on_in_version_2_and_verifies_whole() {
    let (rows, head, key) = stored(1);
    let mut chain = Chain::resume(key.recipient(), head).unwrap();
    let more = append_runs(&mut chain, &events(), &mut TestRng::new(SEED));
    assert!(more.iter().all(|r| r.header().version() == 2));
    let all: Vec<RawRecord<'_>> = rows
        .iter()
        .map(|[h, s, c, _]| RawRecord::new(h, s, c))
        .chain(more.iter().map(SealedRecord::as_raw))
        .collect();
    let verified = verify(all, chain.head(), Some(&key)).expect("the whole log verifies");
    assert_eq!(verified.records, 10);
    for record in &more {
        record.open(&key).expect("a version-2 record opens");
    }
}

#[test]
fn a_version_1_record_after_version_2_ones_is_refused_even_with_its_hash_relinked() {
    let (rows, _, _) = stored(2);
    let mut rows: Vec<[Vec<u8>; 3]> = rows.into_iter().map(|[h, s, c, _]| [h, s, c]).collect();
    // Record 4 rewritten as version 1 by someone who recomputes the chain from there.
    let mut prev = postern_audit::ChainHash::from_slice(&rows[2][2]).unwrap();
    for row in &mut rows[3..] {
        row[0][0] = 1;
        prev = postern_audit::ChainHash::link(&prev, &row[0], &row[1]);
        row[2] = prev.as_bytes().to_vec();
    }
    let verified = verify(
        rows.iter().map(|[h, s, c]| RawRecord::new(h, s, c)),
        None,
        None,
    );
    assert_eq!(verified.unwrap_err().code(), "audit_version_regressed");
}

/// A stored file's rows (header, sealed body, chain hash, body), head and key, after checking
/// that each row decodes, the whole verifies against the head with the key, and each opens to
/// its body.
fn stored(version: u8) -> (Vec<[Vec<u8>; 4]>, Head, OpeningKey) {
    let stored: Value =
        serde_json::from_str(&std::fs::read_to_string(path(version)).unwrap()).unwrap();
    let key = OpeningKey::from_bytes(
        unhex(stored["opening_key_hex"].as_str().unwrap())
            .try_into()
            .unwrap(),
    );
    assert_eq!(key.recipient().to_base64(), stored["recipient_key_base64"]);
    let rows: Vec<[Vec<u8>; 4]> = stored["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            ["header_hex", "sealed_body_hex", "chain_hash", "body_hex"]
                .map(|field| unhex(r[field].as_str().unwrap()))
        })
        .collect();
    assert_eq!(rows.len(), 5);
    let head: Head = stored["head"].as_str().unwrap().parse().unwrap();
    let verified = verify(
        rows.iter().map(|[h, s, c, _]| RawRecord::new(h, s, c)),
        Some(head),
        Some(&key),
    );
    assert_eq!(verified.map(|v: Verified| v.head), Ok(Some(head)));
    for ([h, s, c, body], json) in rows.iter().zip(stored["records"].as_array().unwrap()) {
        let record = SealedRecord::from_raw(RawRecord::new(h, s, c)).unwrap();
        assert_eq!(record.header().kind().as_str(), json["kind"]);
        assert_eq!(
            record.header().time().as_millis(),
            json["time_ms"].as_i64().unwrap()
        );
        assert_eq!(record.open(&key).unwrap().body(), body);
    }
    (rows, head, key)
}
