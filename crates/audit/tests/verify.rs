//! Verification scenarios: an intact log, every single-byte tamper of a small log (exhaustive),
//! deletion, reordering, truncation, rollback, a rechained forgery, wrong keys, resuming.

mod common;

use common::{Event, TestRng, build_log};
use postern_audit::{
    Bodies, Chain, ChainHash, EventKind, Head, OpeningKey, RawRecord, SealedRecord, Seq,
    UnixMillis, Verified, Verifier, VerifyError, verify,
};

/// A stored row: header, sealed body, chain hash.
type Row = [Vec<u8>; 3];

fn key() -> OpeningKey {
    OpeningKey::from_bytes([0x42; 32])
}

fn events(n: usize) -> Vec<Event> {
    (0..n)
        .map(|i| {
            (
                1_700_000_000_000 + i as i64,
                common::KINDS[i % 4],
                format!("event {i}").into_bytes(),
            )
        })
        .collect()
}

fn rows(records: &[SealedRecord]) -> Vec<Row> {
    records
        .iter()
        .map(|r| {
            let raw = r.as_raw();
            [
                raw.header.to_vec(),
                raw.sealed_body.to_vec(),
                raw.chain_hash.to_vec(),
            ]
        })
        .collect()
}

fn check(
    rows: &[Row],
    anchor: Option<Head>,
    key: Option<&OpeningKey>,
) -> Result<Verified, VerifyError> {
    verify(
        rows.iter().map(|[h, b, c]| RawRecord::new(h, b, c)),
        anchor,
        key,
    )
}

#[test]
fn an_intact_log_verifies_with_and_without_the_key() {
    let key = key();
    let log = build_log(&key, &events(5), &mut TestRng::from_u64(1));
    let rows = rows(&log);
    let head = log.last().unwrap().head();
    assert_eq!(
        check(&rows, Some(head), None),
        Ok(Verified {
            head: Some(head),
            records: 5,
            bodies: Bodies::Hashed
        })
    );
    assert_eq!(
        check(&rows, Some(head), Some(&key)),
        Ok(Verified {
            head: Some(head),
            records: 5,
            bodies: Bodies::Opened
        })
    );
    for (record, (time, kind, body)) in log.iter().zip(events(5)) {
        let opened = record.open(&key).unwrap();
        assert_eq!(opened.header().time(), UnixMillis::new(time));
        assert_eq!(opened.header().kind().as_str(), kind);
        assert_eq!(opened.body(), &body);
        assert_eq!(SealedRecord::from_raw(record.as_raw()).as_ref(), Ok(record));
    }
}

#[test]
fn an_empty_log_verifies_unless_an_anchor_says_otherwise() {
    assert_eq!(
        check(&[], None, None),
        Ok(Verified {
            head: None,
            records: 0,
            bodies: Bodies::Hashed
        })
    );
    let anchor = Head::new(Seq::FIRST, ChainHash::GENESIS);
    let err = check(&[], Some(anchor), None).unwrap_err();
    assert_eq!(
        err,
        VerifyError::Truncated {
            anchor: Seq::FIRST,
            last: None
        }
    );
    assert_eq!((err.seq(), err.code()), (Seq::FIRST, "audit_log_truncated"));
}

#[test]
fn every_single_byte_tamper_is_caught_at_its_own_record() {
    let key = key();
    let rows = rows(&build_log(&key, &events(3), &mut TestRng::from_u64(2)));
    let mut cases = 0;
    for record in 0..rows.len() {
        for field in 0..3 {
            for at in 0..rows[record][field].len() {
                for mask in [0x01, 0x80, 0xff] {
                    let mut tampered = rows.clone();
                    tampered[record][field][at] ^= mask;
                    let expected = Seq::new(record as u64 + 1);
                    for key in [None, Some(&key)] {
                        let err = check(&tampered, None, key).unwrap_err();
                        assert_eq!(
                            err.seq(),
                            expected,
                            "record {record} field {field} byte {at}: {err}"
                        );
                    }
                    cases += 1;
                }
            }
        }
    }
    assert!(cases > 3 * 3 * (19 + 48 + 32), "{cases} cases");
}

#[test]
fn each_header_field_fails_with_its_own_reason() {
    let rows = rows(&build_log(&key(), &events(3), &mut TestRng::from_u64(3)));
    let tamper = |at: usize, value: u8| {
        let mut t = rows.clone();
        t[1][0][at] = value;
        check(&t, None, None).unwrap_err()
    };
    let two = Seq::new(2);
    assert_eq!(
        tamper(0, 3),
        VerifyError::UnknownVersion {
            seq: two,
            version: 3
        }
    );
    // An older version this crate reads, after a newer one: a log never goes back.
    assert_eq!(
        tamper(0, 1),
        VerifyError::VersionRegressed {
            seq: two,
            version: 1,
            previous: 2
        }
    );
    assert_eq!(
        tamper(8, 3),
        VerifyError::SequenceGap {
            expected: two,
            found: Seq::new(3)
        }
    );
    assert_eq!(
        tamper(8, 1),
        VerifyError::SequenceRepeated {
            expected: two,
            found: Seq::FIRST
        }
    );
    assert_eq!(tamper(16, 0), VerifyError::ChainBroken { seq: two });
    assert_eq!(tamper(17, 1).code(), "audit_record_malformed");
    assert_eq!(tamper(18, b'Z').code(), "audit_record_malformed");
    assert_eq!(tamper(18, b'z'), VerifyError::ChainBroken { seq: two });
}

#[test]
fn deleting_swapping_and_duplicating_records_is_caught_where_it_happens() {
    let rows = rows(&build_log(&key(), &events(6), &mut TestRng::from_u64(4)));

    let mut deleted = rows.clone();
    deleted.remove(2);
    assert_eq!(
        check(&deleted, None, None),
        Err(VerifyError::SequenceGap {
            expected: Seq::new(3),
            found: Seq::new(4)
        })
    );

    let mut swapped = rows.clone();
    swapped.swap(1, 4);
    assert_eq!(
        check(&swapped, None, None),
        Err(VerifyError::SequenceGap {
            expected: Seq::new(2),
            found: Seq::new(5)
        })
    );

    let mut duplicated = rows.clone();
    duplicated.insert(3, rows[2].clone());
    assert_eq!(
        check(&duplicated, None, None),
        Err(VerifyError::SequenceRepeated {
            expected: Seq::new(4),
            found: Seq::new(3)
        })
    );
}

#[test]
fn truncation_and_rollback_are_caught_only_with_an_anchor() {
    let key = key();
    let log = build_log(&key, &events(6), &mut TestRng::from_u64(5));
    let rows = rows(&log);
    let anchor = log[4].head();

    // Cut after record 3: fine on its own, truncated against an anchor at 5.
    assert!(check(&rows[..3], None, None).is_ok());
    let err = check(&rows[..3], Some(anchor), None).unwrap_err();
    assert_eq!(
        err,
        VerifyError::Truncated {
            anchor: Seq::new(5),
            last: Some(Seq::new(3))
        }
    );
    assert_eq!(err.seq(), Seq::new(4));
    // Records past the anchor are allowed (appended since the anchor was stored).
    assert!(check(&rows, Some(anchor), None).is_ok());

    // Rollback: an alternative history from record 3 on, properly sealed and chained.
    let mut chain = Chain::resume(key.recipient(), log[1].head()).unwrap();
    let mut rng = TestRng::from_u64(99);
    let mut forged = rows[..2].to_vec();
    for (time, kind, _) in &events(6)[2..] {
        let kind = EventKind::parse(kind).unwrap();
        let record = chain
            .append(UnixMillis::new(*time), kind, b"nothing happened", &mut rng)
            .unwrap();
        let raw = record.as_raw();
        forged.push([
            raw.header.to_vec(),
            raw.sealed_body.to_vec(),
            raw.chain_hash.to_vec(),
        ]);
    }
    // Keyless chain and public-key sealing: the forgery is internally consistent...
    assert!(check(&forged, None, Some(&key)).is_ok());
    // ...and the anchor is what catches it.
    assert_eq!(
        check(&forged, Some(anchor), Some(&key)),
        Err(VerifyError::AnchorMismatch { seq: Seq::new(5) })
    );
}

#[test]
fn the_wrong_key_opens_nothing() {
    let rows = rows(&build_log(&key(), &events(2), &mut TestRng::from_u64(6)));
    let wrong = OpeningKey::from_bytes([0x43; 32]);
    assert!(check(&rows, None, None).is_ok());
    assert_eq!(
        check(&rows, None, Some(&wrong)),
        Err(VerifyError::BodyUnreadable { seq: Seq::FIRST })
    );
}

#[test]
fn a_verifier_resumes_from_a_verified_head_and_stays_failed() {
    let key = key();
    let log = build_log(&key, &events(6), &mut TestRng::from_u64(7));
    let rows = rows(&log);
    let mut first = Verifier::new();
    for [h, b, c] in &rows[..3] {
        first.push(RawRecord::new(h, b, c)).unwrap();
    }
    let head = first.finish().unwrap().head.unwrap();
    assert_eq!(head, log[2].head());

    let mut rest = Verifier::resume(head)
        .with_opening_key(&key)
        .with_anchor(log[5].head());
    for [h, b, c] in &rows[3..] {
        rest.push(RawRecord::new(h, b, c)).unwrap();
    }
    assert_eq!(rest.finish().unwrap().head, Some(log[5].head()));

    let mut failing = Verifier::new();
    let [h, b, c] = &rows[1];
    let err = failing.push(RawRecord::new(h, b, c)).unwrap_err();
    let [h, b, c] = &rows[0];
    assert_eq!(failing.push(RawRecord::new(h, b, c)), Err(err.clone()));
    assert_eq!(failing.finish(), Err(err));
}
