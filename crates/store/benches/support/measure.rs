//! How both timeline benches time things (crates/store/benches/timeline.rs and
//! crates/desk/benches/timeline.rs include this file): a median of repeated runs, and the
//! baseline every timeline query is compared with, SQLite counting the rows in its window.

use std::time::Instant;

/// Timed runs per measurement (after one warm-up run).
pub const RUNS: usize = 21;

/// The median time of `RUNS` runs of `run` (seconds), after one untimed run.
pub fn median(mut run: impl FnMut()) -> f64 {
    run();
    let mut times: Vec<f64> = (0..RUNS)
        .map(|_| {
            let start = Instant::now();
            run();
            start.elapsed().as_secs_f64()
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[RUNS / 2]
}

/// The baseline: the median time of `count(*)` over the Activity rows in `[since, until)`
/// (seconds), and that count.
pub fn window_count(conn: &rusqlite::Connection, since: i64, until: i64) -> (f64, i64) {
    let mut count = 0;
    let time = median(|| {
        count = conn
            .query_row(
                "SELECT count(*) FROM journal_activity WHERE time >= ?1 AND time < ?2",
                [since, until],
                |r| r.get(0),
            )
            .expect("count");
    });
    (time, count)
}
