//! What forwarding Postern's own serialization costs (issue 12: the value decided is the value
//! forwarded), against a baseline measured in the same run: parsing a line as the gate must
//! (duplicate keys refused, the id classified) and forwarding the peer's bytes, which is what
//! the gate did before. Each message is timed both ways, in alternating rounds; the best round
//! of each is kept.
//!
//! ```text
//! cargo bench -p postern-gateway --bench reserialize
//! ```
//!
//! Prints figures only; asserts nothing.

use std::hint::black_box;
use std::time::{Duration, Instant};

use bytes::Bytes;
use postern_gateway::framing::{encode, parse_object, scan};
use serde_json::{Value, json};

const ROUND: Duration = Duration::from_millis(400);
const ROUNDS: usize = 5;

fn main() {
    let cases = [
        ("tools/call, small arguments", call(2)),
        ("tools/call, 40 arguments", call(40)),
        ("tool result, 10 KiB of text", result(10 * 1024)),
        ("tool result, 1 MiB of text", result(1024 * 1024)),
        ("tools/list, 50 tools", catalog(50)),
    ];
    println!(
        "{:<32} {:>10} {:>12} {:>12} {:>7}",
        "message", "bytes", "bytes fwd", "re-serialized", "ratio"
    );
    for (name, line) in cases {
        let (old, new) = best_of(&line);
        println!(
            "{name:<32} {:>10} {:>10.2}µs {:>10.2}µs {:>6.2}x",
            line.len(),
            micros(old),
            micros(new),
            new.as_secs_f64() / old.as_secs_f64()
        );
    }
}

/// The best time per message of the two paths, over [`ROUNDS`] alternating rounds.
fn best_of(line: &Bytes) -> (Duration, Duration) {
    let mut old = Duration::MAX;
    let mut new = Duration::MAX;
    for _ in 0..ROUNDS {
        old = old.min(per_message(|| {
            // Before: parse and check, then forward the peer's bytes.
            let body = parse_object(line).expect("parses");
            black_box(&body);
            line.clone()
        }));
        new = new.min(per_message(|| {
            // Now: the same parse, the scan for CRs and inexact numbers, and our own bytes.
            scan(line).expect("scans");
            let body = parse_object(line).expect("parses");
            encode(&body)
        }));
    }
    (old, new)
}

fn per_message(mut forward: impl FnMut() -> Bytes) -> Duration {
    let start = Instant::now();
    let mut n = 0u32;
    while start.elapsed() < ROUND {
        black_box(forward());
        n += 1;
    }
    start.elapsed() / n
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn line(value: &Value) -> Bytes {
    Bytes::from(serde_json::to_vec(value).expect("serializes"))
}

fn call(arguments: usize) -> Bytes {
    let args: serde_json::Map<String, Value> = (0..arguments)
        .map(|i| {
            (
                format!("arg{i}"),
                json!(format!("value number {i}, with some words")),
            )
        })
        .collect();
    line(&json!({"jsonrpc": "2.0", "id": 17, "method": "tools/call",
                 "params": {"name": "deploy", "arguments": args, "_meta": {"progressToken": 3}}}))
}

fn result(bytes: usize) -> Bytes {
    let text: String = "lorem ipsum dolor sit amet "
        .chars()
        .cycle()
        .take(bytes)
        .collect();
    line(&json!({"jsonrpc": "2.0", "id": 17, "result": {
        "content": [{"type": "text", "text": text}], "isError": false}}))
}

fn catalog(tools: usize) -> Bytes {
    let tools: Vec<Value> = (0..tools)
        .map(|i| json!({"name": format!("tool_{i}"), "description": "Does one thing well, and says so at some length.",
                        "inputSchema": {"type": "object", "properties": {
                            "target": {"type": "string", "enum": ["preview", "production"], "default": "preview"},
                            "count": {"type": "integer", "minimum": 0, "maximum": 1000}}},
                        "annotations": {"readOnlyHint": i % 2 == 0}}))
        .collect();
    line(&json!({"jsonrpc": "2.0", "id": 1, "result": {"tools": tools}}))
}
