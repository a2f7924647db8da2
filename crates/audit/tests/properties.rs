//! Property tests: sealing is lossless, and every kind of tampering is caught at the right
//! sequence number.

mod common;

use common::{Event, KINDS, TestRng, build_log};
use postern_audit::{
    OpenError, OpeningKey, RawRecord, SealedRecord, Seq, Verified, VerifyError, verify,
};
use proptest::prelude::*;

type Row = [Vec<u8>; 3];

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
    anchor: Option<postern_audit::Head>,
    key: Option<&OpeningKey>,
) -> Result<Verified, VerifyError> {
    verify(
        rows.iter().map(|[h, b, c]| RawRecord::new(h, b, c)),
        anchor,
        key,
    )
}

fn event() -> impl Strategy<Value = Event> {
    (
        any::<i64>(),
        0..KINDS.len(),
        proptest::collection::vec(any::<u8>(), 0..300),
    )
        .prop_map(|(time, kind, body)| (time, KINDS[kind], body))
}

/// A key, an RNG seed and 1..=10 events.
fn log() -> impl Strategy<Value = ([u8; 32], u64, Vec<Event>)> {
    (
        any::<[u8; 32]>(),
        any::<u64>(),
        proptest::collection::vec(event(), 1..=10),
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn sealing_and_opening_round_trip((secret, seed, events) in log()) {
        let key = OpeningKey::from_bytes(secret);
        let log = build_log(&key, &events, &mut TestRng::from_u64(seed));
        for (i, (record, (time, kind, body))) in log.iter().zip(&events).enumerate() {
            let reread = SealedRecord::from_raw(record.as_raw()).unwrap();
            let opened = reread.open(&key).unwrap();
            prop_assert_eq!(opened.header().seq(), Seq::new(i as u64 + 1));
            prop_assert_eq!(opened.header().time().as_millis(), *time);
            prop_assert_eq!(opened.header().kind().as_str(), *kind);
            prop_assert_eq!(opened.body(), body);
        }
        let head = log.last().unwrap().head();
        let verified = check(&rows(&log), Some(head), Some(&key)).unwrap();
        prop_assert_eq!(verified.head, Some(head));
        prop_assert_eq!(verified.records, events.len() as u64);
    }

    #[test]
    fn a_wrong_key_fails_to_open((secret, seed, events) in log(), other in any::<[u8; 32]>()) {
        prop_assume!(secret != other);
        let key = OpeningKey::from_bytes(secret);
        let wrong = OpeningKey::from_bytes(other);
        // Distinct secrets can clamp to the same scalar; those are the same key.
        prop_assume!(key.recipient() != wrong.recipient());
        let log = build_log(&key, &events, &mut TestRng::from_u64(seed));
        for record in &log {
            prop_assert_eq!(record.open(&wrong), Err(OpenError::Unreadable));
        }
        prop_assert_eq!(
            check(&rows(&log), None, Some(&wrong)),
            Err(VerifyError::BodyUnreadable { seq: Seq::FIRST })
        );
    }

    #[test]
    fn flipping_any_byte_is_caught_at_its_record(
        (secret, seed, events) in log(),
        pick in any::<(prop::sample::Index, usize, prop::sample::Index, u8)>(),
    ) {
        let (record, field, at, mask) = pick;
        prop_assume!(mask != 0);
        let key = OpeningKey::from_bytes(secret);
        let mut rows = rows(&build_log(&key, &events, &mut TestRng::from_u64(seed)));
        let record = record.index(rows.len());
        let field = field % 3;
        let at = at.index(rows[record][field].len());
        rows[record][field][at] ^= mask;
        let expected = Seq::new(record as u64 + 1);
        prop_assert_eq!(check(&rows, None, None).unwrap_err().seq(), expected);
        prop_assert_eq!(check(&rows, None, Some(&key)).unwrap_err().seq(), expected);
    }

    #[test]
    fn deleting_a_record_is_caught_at_its_seq(
        (secret, seed, events) in log(),
        victim in any::<prop::sample::Index>(),
    ) {
        let key = OpeningKey::from_bytes(secret);
        let log = build_log(&key, &events, &mut TestRng::from_u64(seed));
        let anchor = log.last().unwrap().head();
        let mut rows = rows(&log);
        let victim = victim.index(rows.len());
        rows.remove(victim);
        let expected = Seq::new(victim as u64 + 1);
        // With the anchor at the head, even deleting the last record is caught.
        prop_assert_eq!(check(&rows, Some(anchor), None).unwrap_err().seq(), expected);
        if victim + 1 < log.len() {
            prop_assert_eq!(
                check(&rows, None, None),
                Err(VerifyError::SequenceGap { expected, found: Seq::new(victim as u64 + 2) })
            );
        }
    }

    #[test]
    fn swapping_two_records_is_caught_at_the_first(
        (secret, seed, events) in log(),
        a in any::<prop::sample::Index>(),
        b in any::<prop::sample::Index>(),
    ) {
        let key = OpeningKey::from_bytes(secret);
        let mut rows = rows(&build_log(&key, &events, &mut TestRng::from_u64(seed)));
        let (a, b) = (a.index(rows.len()), b.index(rows.len()));
        prop_assume!(a != b);
        rows.swap(a, b);
        let first = a.min(b);
        prop_assert_eq!(
            check(&rows, None, None),
            Err(VerifyError::SequenceGap {
                expected: Seq::new(first as u64 + 1),
                found: Seq::new(a.max(b) as u64 + 1),
            })
        );
    }

    #[test]
    fn truncating_the_tail_is_caught_against_the_anchor(
        (secret, seed, events) in log(),
        anchor_at in any::<prop::sample::Index>(),
        keep in any::<prop::sample::Index>(),
    ) {
        let key = OpeningKey::from_bytes(secret);
        let log = build_log(&key, &events, &mut TestRng::from_u64(seed));
        let anchor_at = anchor_at.index(log.len());
        let anchor = log[anchor_at].head();
        let keep = keep.index(anchor_at + 1); // 0..=anchor_at records survive
        let rows = rows(&log[..keep]);
        let err = check(&rows, Some(anchor), None).unwrap_err();
        prop_assert_eq!(
            err.clone(),
            VerifyError::Truncated {
                anchor: anchor.seq(),
                last: keep.checked_sub(1).map(|k| Seq::new(k as u64 + 1)),
            }
        );
        prop_assert_eq!(err.seq(), Seq::new(keep as u64 + 1));
        prop_assert!(check(&rows, None, None).is_ok());
    }
}
