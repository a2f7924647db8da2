//! Audit-log throughput, each figure next to a baseline measured in the same run.
//!
//! `cargo bench -p postern-audit --bench audit` (single thread, so every rate is per core):
//!
//! - verification without the opening key (structure + chain hashes) vs raw SHA-256 over the
//!   same bytes (the floor: verification is one hash per row plus parsing);
//! - verification opening every body vs the same, plus one X25519 per row;
//! - sealing (append) vs ChaCha20-Poly1305 of the same bodies under one fixed key (what a
//!   symmetric design would cost) and vs one X25519 key agreement.

#[path = "../tests/common/mod.rs"]
mod common;

use std::hint::black_box;
use std::time::{Duration, Instant};

use common::TestRng;
use postern_audit::{Chain, EventKind, OpeningKey, RawRecord, SealedRecord, UnixMillis, verify};
use ring::aead::{Aad, CHACHA20_POLY1305, LessSafeKey, Nonce, UnboundKey};
use sha2::{Digest, Sha256};
use x25519_dalek::{PublicKey, StaticSecret};

const VERIFY_ROWS: usize = 200_000;
const OPEN_ROWS: usize = 20_000;
const SEAL_ROWS: usize = 20_000;
const BODY_LEN: usize = 200;
const ROUNDS: usize = 5;

fn main() {
    let key = OpeningKey::from_bytes([9; 32]);
    let kind = EventKind::from_static("tool_call_intent");
    let bodies: Vec<Vec<u8>> = (0..VERIFY_ROWS).map(body).collect();
    println!(
        "postern-audit bench: {BODY_LEN}-byte bodies, single thread, best of {ROUNDS} alternating rounds"
    );

    let mut rng = TestRng::from_u64(1);
    let mut chain = Chain::genesis(key.recipient());
    let log: Vec<SealedRecord> = bodies
        .iter()
        .enumerate()
        .map(|(i, b)| {
            chain
                .append(UnixMillis::new(i as i64), kind.clone(), b, &mut rng)
                .unwrap()
        })
        .collect();
    let sealed_len = log[0].sealed_body().as_bytes().len() + log[0].header_bytes().len() + 32;
    println!("row: {sealed_len} bytes stored (header + sealed body + hash)");

    let verify_all = || {
        let verified = verify(log.iter().map(SealedRecord::as_raw), None, None).unwrap();
        assert_eq!(verified.records, VERIFY_ROWS as u64);
    };
    let sha_all = || {
        let mut prev = [0u8; 32];
        for r in &log {
            let raw: RawRecord<'_> = r.as_raw();
            let mut h = Sha256::new();
            h.update(prev);
            h.update(raw.header);
            h.update(raw.sealed_body);
            prev = h.finalize().into();
        }
        black_box(prev);
    };
    let (took, base) = best_of_pair(verify_all, sha_all);
    report(
        "verify, bodies hashed",
        VERIFY_ROWS,
        took,
        "raw SHA-256 chain",
        base,
    );

    let opened = &log[..OPEN_ROWS];
    let verify_open = || {
        let verified = verify(opened.iter().map(SealedRecord::as_raw), None, Some(&key)).unwrap();
        assert_eq!(verified.records, OPEN_ROWS as u64);
    };
    let secret = StaticSecret::from([9; 32]);
    let dh_each = || {
        for r in opened {
            let e: [u8; 32] = r.sealed_body().as_bytes()[..32].try_into().unwrap();
            black_box(secret.diffie_hellman(&PublicKey::from(e)));
        }
    };
    let (took, base) = best_of_pair(verify_open, dh_each);
    report(
        "verify, bodies opened",
        OPEN_ROWS,
        took,
        "X25519 per row",
        base,
    );

    let seal_some = || {
        let mut rng = TestRng::from_u64(2);
        let mut chain = Chain::genesis(key.recipient());
        for (i, b) in bodies[..SEAL_ROWS].iter().enumerate() {
            black_box(
                chain
                    .append(UnixMillis::new(i as i64), kind.clone(), b, &mut rng)
                    .unwrap(),
            );
        }
    };
    let cipher = LessSafeKey::new(UnboundKey::new(&CHACHA20_POLY1305, &[7; 32]).unwrap());
    let aead_some = || {
        for b in &bodies[..SEAL_ROWS] {
            let mut buf = b.clone();
            let tag = cipher
                .seal_in_place_separate_tag(
                    Nonce::assume_unique_for_key([0; 12]),
                    Aad::from(b"header"),
                    &mut buf,
                )
                .unwrap();
            black_box((buf, tag.as_ref()[0]));
        }
    };
    let (took, base) = best_of_pair(seal_some, aead_some);
    report("seal (append)", SEAL_ROWS, took, "AEAD, fixed key", base);
    let recipient = PublicKey::from(key.recipient().to_bytes());
    let dh_seal = || {
        for _ in 0..SEAL_ROWS {
            black_box(secret.diffie_hellman(black_box(&recipient)));
        }
    };
    let (took, base) = best_of_pair(seal_some, dh_seal);
    report("seal (append)", SEAL_ROWS, took, "X25519 per row", base);
}

/// A JSON-ish body of BODY_LEN bytes that differs per row.
fn body(i: usize) -> Vec<u8> {
    let mut text =
        format!(r#"{{"session":{i},"server":"time","tool":"get_current_time","args":{{"#);
    while text.len() < BODY_LEN - 2 {
        text.push_str(r#""k":"string","#);
    }
    text.truncate(BODY_LEN - 2);
    text.push_str("}}");
    text.into_bytes()
}

/// Runs `a` and `b` in alternation, ROUNDS times each, and keeps each one's best time, so that
/// load from other processes weighs on both alike.
fn best_of_pair(mut a: impl FnMut(), mut b: impl FnMut()) -> (Duration, Duration) {
    let time = |run: &mut dyn FnMut()| {
        let start = Instant::now();
        run();
        start.elapsed()
    };
    (0..ROUNDS).fold((Duration::MAX, Duration::MAX), |(best_a, best_b), _| {
        (best_a.min(time(&mut a)), best_b.min(time(&mut b)))
    })
}

fn report(what: &str, rows: usize, took: Duration, baseline: &str, base: Duration) {
    let rate = |d: Duration| rows as f64 / d.as_secs_f64();
    println!(
        "{what:<24} {:>11.0} rows/s   baseline {baseline:<20} {:>11.0} rows/s   ratio {:.2}x the baseline's time",
        rate(took),
        rate(base),
        took.as_secs_f64() / base.as_secs_f64(),
    );
}
