//! Time for the gate's decisions, passed in so that tests can move it (grant expiry, the
//! idle lock, a machine's sleep).
//!
//! Two clocks: the wall clock (unix ms), which grants and the audit log are stamped with, and
//! a monotonic one, which stands still while the machine sleeps (Linux's `CLOCK_MONOTONIC`,
//! macOS's `CLOCK_UPTIME_RAW`, behind `std::time::Instant`). The wall clock running ahead of
//! the monotonic one is how the gate learns the machine slept, on every platform.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// Unix milliseconds now, and a monotonic reading beside them.
pub trait Clock: Send + Sync + 'static {
    /// Now (unix ms).
    fn now_ms(&self) -> u64;
    /// Milliseconds on a clock that never goes back and stands still while the machine
    /// sleeps; only differences between two readings mean anything.
    fn monotonic_ms(&self) -> u64;
}

/// The system clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64)
    }

    fn monotonic_ms(&self) -> u64 {
        static START: OnceLock<Instant> = OnceLock::new();
        START.get_or_init(Instant::now).elapsed().as_millis() as u64
    }
}

/// A clock that starts at the system time and moves only when told (tests).
#[derive(Debug)]
pub struct ManualClock {
    wall: AtomicU64,
    monotonic: AtomicU64,
}

impl ManualClock {
    /// A clock at the system time now.
    pub fn new() -> Self {
        Self {
            wall: AtomicU64::new(SystemClock.now_ms()),
            monotonic: AtomicU64::new(0),
        }
    }

    /// Moves time forward: both clocks.
    pub fn advance(&self, ms: u64) {
        self.wall.fetch_add(ms, Ordering::SeqCst);
        self.monotonic.fetch_add(ms, Ordering::SeqCst);
    }

    /// Moves the wall clock alone, as a machine's sleep does (forward) or someone setting
    /// the time (either way).
    pub fn move_wall(&self, ms: i64) {
        let _ = self
            .wall
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |wall| {
                Some(wall.saturating_add_signed(ms))
            });
    }
}

impl Default for ManualClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> u64 {
        self.wall.load(Ordering::SeqCst)
    }

    fn monotonic_ms(&self) -> u64 {
        self.monotonic.load(Ordering::SeqCst)
    }
}
