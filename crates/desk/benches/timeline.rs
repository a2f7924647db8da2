//! What the app's Timeline and Activity tabs cost to open with 1,000,000 Activity rows in the
//! journal: the exact queries the window sends (src/timeline.ts, src/activity.ts), run the way
//! the app's `timeline` and `activity` commands run them (`postern_engine::journal`, a fresh
//! read-only connection each), plus turning the answer into the IPC payload (JSON). Each figure
//! is the median of 21 runs, next to a baseline measured in the same run: counting the window's
//! Activity rows over the time index (`SELECT count(*)`, the least any query that read every row
//! would do).
//!
//! ```text
//! cargo bench -p postern-desk --bench timeline            # -- --rows N for another size
//! ```
//!
//! The journals are filled the way a rebuild from the log fills them (the store's projection,
//! `JournalWriter::project`) from synthetic events, the same model as the store's own bench
//! (crates/store/benches/timeline.rs): 200 agent sessions over 30 days, 5,000 calls each, 10
//! servers, 20 tools, a rebuild every 1,000 calls, 2% refused, a grant per epoch. Prints figures
//! only; asserts nothing.

use std::time::Instant;

use postern_engine::Home;
use postern_engine::journal::{self, ActivityFilter, TimelineQuery};

// The same synthetic journal as the store's own timeline bench.
#[path = "../../store/benches/support/fill.rs"]
mod fill;
use fill::{DAY, SESSIONS, T0, fill_journals};
#[path = "../../store/benches/support/measure.rs"]
mod measure;
use measure::{median, window_count};

/// The window's buckets for a 1180 px wide drawing: one per 4 px of plot (src/timeline.ts).
const BUCKETS: u32 = 247;

fn main() {
    let rows: u64 = std::env::args()
        .skip_while(|a| a != "--rows")
        .nth(1)
        .map_or(1_000_000, |n| n.parse().expect("--rows N"));
    let dir = tempfile::tempdir().expect("tempdir");
    let home = Home::at(dir.path());
    println!("postern-app timeline bench: {rows} Activity rows, {SESSIONS} sessions");
    let fill = Instant::now();
    let events = fill_journals(dir.path(), rows / SESSIONS);
    println!(
        "(projected {events} events in {:.1} s)\n",
        fill.elapsed().as_secs_f64()
    );
    let conn =
        rusqlite::Connection::open(dir.path().join(postern_store::JOURNAL_FILE)).expect("sqlite");

    let window = |since: i64, until: i64| TimelineQuery {
        since: Some(since),
        until: Some(until),
        ..first_paint()
    };
    let middle = T0 + 15 * DAY;
    let cases = [
        ("first paint: the whole range (Fit)", first_paint()),
        ("zoom: 1 day", window(middle, middle + DAY)),
        ("zoom: 1 hour", window(middle, middle + DAY / 24)),
        ("zoom: 10 minutes", window(middle, middle + DAY / 144)),
        (
            "pan: 1 hour, a week later",
            window(middle + 7 * DAY, middle + 7 * DAY + DAY / 24),
        ),
    ];
    println!(
        "| Timeline tab: query | lanes | marks | buckets | query | + JSON payload | payload | window count(*) | query / count |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (name, query) in cases {
        let mut got = None;
        let t = median(|| got = Some(journal::timeline(&home, &query).expect("timeline")));
        let got = got.expect("ran");
        let mut bytes = 0;
        let with_json = median(|| {
            let answer = journal::timeline(&home, &query).expect("timeline");
            bytes = serde_json::to_vec(&answer).expect("json").len();
        });
        let (base, count) = window_count(&conn, got.since, got.until);
        let marks: usize = got.lanes.iter().map(|l| l.marks.len()).sum();
        let buckets: usize = got.lanes.iter().map(|l| l.buckets.len()).sum();
        println!(
            "| {name} | {}{} | {marks} | {buckets} | {:.2} ms | {:.2} ms | {} KiB | {:.2} ms ({count} rows) | {:.3}x |",
            got.lanes.len(),
            if got.more_lanes { "+" } else { "" },
            t * 1e3,
            with_json * 1e3,
            bytes / 1024,
            base * 1e3,
            t / base,
        );
    }

    let page = ActivityFilter {
        limit: 50,
        ..ActivityFilter::default()
    };
    let mut n = 0;
    let t = median(|| n = journal::activity(&home, &page).expect("page").len());
    println!("\n| Activity tab: first page | rows | query |\n|---|---:|---:|");
    println!("| newest 50, no filter | {n} | {:.2} ms |", t * 1e3);
}

/// The query the Timeline tab sends when it opens (src/timeline.ts): the engine's whole range,
/// 50 lanes, the default marks bound, a bucket per 4 px.
fn first_paint() -> TimelineQuery {
    TimelineQuery {
        since: None,
        until: None,
        lanes_after: None,
        max_lanes: 50,
        max_marks: 0,
        buckets: BUCKETS,
    }
}
