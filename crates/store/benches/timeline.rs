//! The timeline and Activity queries on 1,000,000 Activity rows, each figure next to a
//! baseline measured in the same run.
//!
//! ```text
//! cargo bench -p postern-store --bench timeline
//! ```
//!
//! The journals are filled through the store's own projection (`JournalWriter::project`, what
//! a rebuild from the log runs) from synthetic audit events: 200 agent sessions over 30 days,
//! each 1 to 4 days long with 5,000 calls spread over it, 10 servers, 20 tools, a rebuild
//! (a new epoch) every 1,000 calls (5 epochs per session), 2% of calls refused, a grant at
//! the start of each epoch that ends at its rebuild. No results are projected (they only fill
//! in an outcome), and the audit log itself is left empty (the queries read the journals).
//!
//! Then, each the median of 21 runs:
//!
//! 1. the timeline: the first paint (the whole range, every lane), zoomed windows, a pan, a
//!    second page of lanes; against counting the window's Activity rows (`SELECT count(*)`
//!    over the time index: the least any query that read every row would do);
//! 2. an Activity page (50 rows) per filter, against the first page with no filter;
//! 3. opening a read-only connection and reading one value, and the first paint on a fresh
//!    connection (what the engine does per query) against one kept open.
//!
//! Prints figures only; asserts nothing. `-- --rows N` fills N rows instead.

use std::path::Path;
use std::time::Instant;

use postern_store::{ActivityFilter, Store, TimelineQuery};

#[path = "support/fill.rs"]
mod fill;
use fill::{DAY, SESSIONS, T0, fill_journals};
#[path = "support/measure.rs"]
mod measure;
use measure::{median, window_count};

fn main() {
    let rows: u64 = std::env::args()
        .skip_while(|a| a != "--rows")
        .nth(1)
        .map_or(1_000_000, |n| n.parse().expect("--rows N"));
    let dir = tempfile::tempdir().expect("tempdir");
    println!(
        "postern-store timeline bench: {rows} Activity rows, {SESSIONS} sessions, in {}",
        dir.path().display()
    );
    let fill = Instant::now();
    let events = fill_journals(dir.path(), rows / SESSIONS);
    println!(
        "(projected {events} events in {:.1} s; file {} MB)",
        fill.elapsed().as_secs_f64(),
        std::fs::metadata(dir.path().join(postern_store::JOURNAL_FILE))
            .map_or(0, |m| m.len() >> 20)
    );

    let store = Store::open_read_only(dir.path()).expect("reader");
    let conn =
        rusqlite::Connection::open(dir.path().join(postern_store::JOURNAL_FILE)).expect("sqlite");
    timeline(&store, &conn);
    activity(&store);
    reader_open(dir.path(), &store);
}

fn timeline(store: &Store, conn: &rusqlite::Connection) {
    let window = |since: i64, until: i64| TimelineQuery {
        since: Some(since),
        until: Some(until),
        max_lanes: 200,
        ..TimelineQuery::default()
    };
    let middle = T0 + 15 * DAY;
    let cases = [
        (
            "first paint: whole range, 200 lanes",
            TimelineQuery {
                max_lanes: 200,
                ..TimelineQuery::default()
            },
        ),
        ("zoom: 1 week", window(middle, middle + 7 * DAY)),
        ("zoom: 1 day", window(middle, middle + DAY)),
        ("zoom: 6 hours", window(middle, middle + DAY / 4)),
        ("zoom: 1 hour", window(middle, middle + DAY / 24)),
        ("zoom: 10 minutes", window(middle, middle + DAY / 144)),
        (
            "pan: 1 day, a week later",
            window(middle + 7 * DAY, middle + 8 * DAY),
        ),
        (
            "lanes 51-100 of the whole range",
            TimelineQuery {
                lanes_after: Some(lane_after(store, 50)),
                max_lanes: 50,
                ..TimelineQuery::default()
            },
        ),
    ];
    println!("\n## Timeline (default bounds: 2,000 marks, 200 buckets)\n");
    println!("| query | lanes | marks | buckets (width) | median | window count(*) | ratio |");
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for (name, query) in cases {
        let mut got = None;
        let t = median(|| got = Some(store.timeline(&query).expect("timeline")));
        let got = got.expect("ran");
        let (base, count) = window_count(conn, got.since, got.until);
        let marks: usize = got.lanes.iter().map(|l| l.marks.len()).sum();
        let buckets: usize = got.lanes.iter().map(|l| l.buckets.len()).sum();
        let width = got
            .bucket_width
            .map_or("-".to_owned(), |w| format!("{} ({})", buckets, duration(w)));
        println!(
            "| {name} | {}{} | {marks} | {width} | {:.2} ms | {:.2} ms ({count} rows) | {:.3}x |",
            got.lanes.len(),
            if got.more_lanes { "+" } else { "" },
            t * 1e3,
            base * 1e3,
            t / base
        );
    }
}

fn activity(store: &Store) {
    let f = ActivityFilter::default;
    let day = DAY;
    let back = T0 + 10 * day;
    let cases: Vec<(&str, ActivityFilter)> = vec![
        ("no filter (baseline)", f()),
        (
            "--session (5,000 calls)",
            ActivityFilter {
                session: Some(lane_id(store, 100)),
                ..f()
            },
        ),
        (
            "--server (1 of 10)",
            ActivityFilter {
                server: Some("server-3".into()),
                ..f()
            },
        ),
        (
            "--epoch (1,000 calls)",
            ActivityFilter {
                epoch: Some(some_epoch(store)),
                ..f()
            },
        ),
        (
            "--tool (1 of 20)",
            ActivityFilter {
                tool: Some("tool-7".into()),
                ..f()
            },
        ),
        (
            "--tool --server",
            ActivityFilter {
                tool: Some("tool-7".into()),
                server: Some("server-3".into()),
                ..f()
            },
        ),
        (
            "--decision denied (2%)",
            ActivityFilter {
                decision: Some("denied".into()),
                ..f()
            },
        ),
        (
            "--decision catalog_stale (1%)",
            ActivityFilter {
                decision: Some("catalog_stale".into()),
                ..f()
            },
        ),
        (
            "--since/--until: 1 hour, 20 days back",
            ActivityFilter {
                since: Some(back),
                until: Some(back + day / 24),
                ..f()
            },
        ),
        (
            "--since: the last 20 days",
            ActivityFilter {
                since: Some(back),
                ..f()
            },
        ),
        (
            "--server + 1 day, 20 days back",
            ActivityFilter {
                server: Some("server-3".into()),
                since: Some(back),
                until: Some(back + day),
                ..f()
            },
        ),
        (
            "--tool, oldest page via --until",
            ActivityFilter {
                tool: Some("tool-7".into()),
                until: Some(T0 + day),
                ..f()
            },
        ),
        (
            "--decision denied + 1 day, 20 days back",
            ActivityFilter {
                decision: Some("denied".into()),
                since: Some(back),
                until: Some(back + day),
                ..f()
            },
        ),
        (
            "--before (a page in the middle)",
            ActivityFilter {
                before: Some(middle_seq(store)),
                ..f()
            },
        ),
        (
            "--session --before (its middle)",
            ActivityFilter {
                session: Some(lane_id(store, 100)),
                before: Some(middle_seq_of(store, lane_id(store, 100))),
                ..f()
            },
        ),
    ];
    let baseline = median(|| {
        store
            .activity(&ActivityFilter { limit: 50, ..f() })
            .expect("page");
    });
    println!("\n## Activity page (50 rows, newest first)\n");
    println!(
        "| filter | rows | median | vs first page, no filter ({:.3} ms) |",
        baseline * 1e3
    );
    println!("|---|---:|---:|---:|");
    for (name, mut filter) in cases {
        filter.limit = 50;
        let mut rows = 0;
        let t = median(|| rows = store.activity(&filter).expect("page").len());
        println!(
            "| {name} | {rows} | {:.3} ms | {:.1}x |",
            t * 1e3,
            t / baseline
        );
    }
}

fn reader_open(home: &Path, store: &Store) {
    let open = median(|| {
        let reader = Store::open_read_only(home).expect("reader");
        reader.journal_seq().expect("seq");
    });
    let warm = median(|| {
        store.journal_seq().expect("seq");
    });
    println!(
        "\n## Read-only connection\n\nopen + one read: {:.3} ms; the read on an open connection: \
         {:.3} ms ({:.0}x)",
        open * 1e3,
        warm * 1e3,
        open / warm
    );
    // What `Engine::timeline` does: a fresh connection (no statement cache, no page cache of
    // its own) for each query.
    let first_paint = TimelineQuery {
        max_lanes: 200,
        ..TimelineQuery::default()
    };
    let fresh = median(|| {
        let reader = Store::open_read_only(home).expect("reader");
        reader.timeline(&first_paint).expect("timeline");
    });
    let reused = median(|| {
        store.timeline(&first_paint).expect("timeline");
    });
    println!(
        "first paint on a fresh connection: {:.2} ms; on an open one: {:.2} ms ({:.2}x)",
        fresh * 1e3,
        reused * 1e3,
        fresh / reused
    );
}

/// The id of the `n`th session (1-based), by id.
fn lane_id(store: &Store, n: u32) -> i64 {
    let lanes = store
        .timeline(&TimelineQuery {
            max_lanes: n,
            max_marks: 1,
            buckets: 1,
            ..TimelineQuery::default()
        })
        .expect("lanes");
    lanes.lanes.last().expect("a lane").id
}

fn lane_after(store: &Store, n: u32) -> i64 {
    lane_id(store, n)
}

fn some_epoch(store: &Store) -> String {
    let page = store
        .activity(&ActivityFilter {
            session: Some(lane_id(store, 100)),
            limit: 1,
            ..ActivityFilter::default()
        })
        .expect("page");
    page[0].epoch.clone().expect("an epoch")
}

/// A seq about half way back through all the calls.
fn middle_seq(store: &Store) -> i64 {
    let newest = store
        .activity(&ActivityFilter {
            limit: 1,
            ..ActivityFilter::default()
        })
        .expect("page");
    newest[0].seq / 2
}

fn middle_seq_of(store: &Store, session: i64) -> i64 {
    let page = store
        .activity(&ActivityFilter {
            session: Some(session),
            limit: 10_000,
            ..ActivityFilter::default()
        })
        .expect("page");
    page[page.len() / 2].seq
}

fn duration(ms: i64) -> String {
    match ms {
        ms if ms % DAY == 0 => format!("{} d", ms / DAY),
        ms if ms % 3_600_000 == 0 => format!("{} h", ms / 3_600_000),
        ms if ms % 60_000 == 0 => format!("{} min", ms / 60_000),
        ms => format!("{:.1} s", ms as f64 / 1e3),
    }
}
