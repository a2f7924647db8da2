//! Shared by the integration tests and the benchmark: a deterministic RNG and a log builder.

#![allow(
    dead_code,
    reason = "each test binary uses a different part of this module"
)]

use postern_audit::rand_core::{Infallible, TryCryptoRng, TryRng};
use postern_audit::{Chain, EventKind, OpeningKey, PreparedSeal, SealedRecord, UnixMillis};
use sha2::{Digest, Sha256};

/// A reproducible byte stream for tests ONLY: block `i` is SHA-256(seed || i as u64 BE), and
/// bytes are handed out in order. Frozen: the golden vectors depend on it.
pub struct TestRng {
    seed: [u8; 32],
    counter: u64,
    block: [u8; 32],
    used: usize,
}

impl TestRng {
    pub fn new(seed: [u8; 32]) -> TestRng {
        TestRng {
            seed,
            counter: 0,
            block: [0; 32],
            used: 32,
        }
    }

    pub fn from_u64(seed: u64) -> TestRng {
        let mut bytes = [0u8; 32];
        bytes[..8].copy_from_slice(&seed.to_be_bytes());
        TestRng::new(bytes)
    }
}

impl TryRng for TestRng {
    type Error = Infallible;

    fn try_next_u32(&mut self) -> Result<u32, Infallible> {
        let mut b = [0u8; 4];
        self.try_fill_bytes(&mut b)?;
        Ok(u32::from_be_bytes(b))
    }

    fn try_next_u64(&mut self) -> Result<u64, Infallible> {
        let mut b = [0u8; 8];
        self.try_fill_bytes(&mut b)?;
        Ok(u64::from_be_bytes(b))
    }

    fn try_fill_bytes(&mut self, dst: &mut [u8]) -> Result<(), Infallible> {
        for byte in dst {
            if self.used == 32 {
                let mut hasher = Sha256::new();
                hasher.update(self.seed);
                hasher.update(self.counter.to_be_bytes());
                self.block = hasher.finalize().into();
                self.counter += 1;
                self.used = 0;
            }
            *byte = self.block[self.used];
            self.used += 1;
        }
        Ok(())
    }
}

impl TryCryptoRng for TestRng {}

/// One event to append: time, kind, body.
pub type Event = (i64, &'static str, Vec<u8>);

/// The kinds the tests draw from.
pub const KINDS: [&str; 4] = [
    "server_started",
    "tool_call_intent",
    "tool_call_result",
    "vault_locked",
];

/// Records sealed with one ephemeral key in [`build_log`] (the writer's group commit).
pub const RUN: usize = 3;

/// Appends `events` to a fresh log sealed to `key`'s recipient, in runs of [`RUN`] records
/// sharing a [`PreparedSeal`] (a group commit each), the seals drawn from `rng` in order.
pub fn build_log(key: &OpeningKey, events: &[Event], rng: &mut TestRng) -> Vec<SealedRecord> {
    let mut chain = Chain::genesis(key.recipient());
    append_runs(&mut chain, events, rng)
}

/// Appends `events` to `chain` in runs of [`RUN`] records sharing a seal.
pub fn append_runs(chain: &mut Chain, events: &[Event], rng: &mut TestRng) -> Vec<SealedRecord> {
    events
        .chunks(RUN)
        .flat_map(|run| {
            let mut seal = PreparedSeal::new(chain.recipient(), rng).expect("a seal");
            run.iter()
                .map(|(time, kind, body)| {
                    let kind = EventKind::parse(kind).expect("test kinds are valid");
                    chain
                        .append_prepared(UnixMillis::new(*time), kind, body, &mut seal)
                        .expect("append")
                })
                .collect::<Vec<_>>()
        })
        .collect()
}
