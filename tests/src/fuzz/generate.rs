//! Structure-aware generators: JSON-RPC envelopes as an attacker would write them, and the
//! bytes they render to.
//!
//! A [`Case`] is a few lines, each a piece of (mostly) JSON-RPC ended by some line ending,
//! then a few byte-level mutations. Every JSON token is written by hand ([`Node`]), so a case
//! carries its hostility in its structure: whitespace between tokens (tabs, bare CRs, `\r\n`,
//! form feeds, U+2028), strings with control bytes and U+0085/U+2028/U+2029 raw or escaped,
//! lone surrogates and invalid UTF-8, duplicate keys (spelled alike or escaped differently),
//! ids at the edges (`1.0`, `1e0`, 2^53 + 1, 2^60, `-0`, huge strings, objects), numbers at the
//! edges of `i64`, `u64` and `f64`, huge strings and deep nesting. Proptest shrinks a failing
//! case by its structure, so the input written to the corpus is a small one.

use std::borrow::Cow;

use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::{Index, select};

/// One generated input: lines, then byte-level mutations of the whole.
#[derive(Debug, Clone)]
pub struct Case {
    /// The lines, in order.
    pub lines: Vec<Piece>,
    /// Applied in order to the rendered bytes.
    pub mutations: Vec<Mutation>,
}

/// One line's content and the bytes that end it.
#[derive(Debug, Clone)]
pub struct Piece {
    /// What the line holds.
    pub body: Body,
    /// Its line ending (`"\n"`, `"\r\n"`, a bare `"\r"`, none, ...).
    pub end: &'static str,
}

/// What a line holds.
#[derive(Debug, Clone)]
pub enum Body {
    /// One JSON value (most often a JSON-RPC envelope).
    Json(Node),
    /// Several values on one line, separated by a gap (`{..}{..}`, `{..}\r{..}`).
    Concat(Vec<Node>, &'static str),
    /// The CR smuggle of issue 12: `head` up to a key's value, `\r`, a whole `hidden` message
    /// as that value, `\r`, the closing braces. One message to JSON; three lines to a reader
    /// that splits on `\r`.
    Smuggle {
        /// The visible message's members before the key that holds the hidden one.
        head: Vec<(Text, Node)>,
        /// The hidden message.
        hidden: Box<Node>,
    },
    /// Arbitrary bytes.
    Bytes(Vec<u8>),
}

/// A JSON value as written: every token and gap chosen.
#[derive(Debug, Clone)]
pub enum Node {
    /// A literal written as is: `null`, `true`, a number's text (valid or not).
    Lit(Cow<'static, str>),
    /// A string.
    Str(Text),
    /// An array, its gaps used in turn between tokens.
    Arr(Vec<Node>, Vec<&'static str>),
    /// An object, members in the order written (duplicates kept), gaps used in turn.
    Obj(Vec<(Text, Node)>, Vec<&'static str>),
    /// `levels` arrays (or single-key objects) around `inner`.
    Deep {
        /// How many levels.
        levels: usize,
        /// Objects (`{"a":`) rather than arrays.
        object: bool,
        /// The innermost value.
        inner: Box<Node>,
    },
}

/// A string's contents as written between its quotes.
#[derive(Debug, Clone)]
pub struct Text(pub Vec<Frag>);

/// A piece of a string as written.
#[derive(Debug, Clone)]
pub enum Frag {
    /// Text written as is: plain characters, escapes (`\u2028`), or hostile raw characters.
    Text(Cow<'static, str>),
    /// Bytes that are not UTF-8.
    Bytes(&'static [u8]),
    /// `unit` written `times` times (huge strings, cheaply).
    Repeat(&'static str, usize),
}

/// A byte-level change to a rendered case.
#[derive(Debug, Clone)]
pub enum Mutation {
    /// Cut the input at a point (a truncated line).
    Truncate(Index),
    /// Insert a byte.
    Insert(Index, u8),
    /// XOR a byte.
    Flip(Index, u8),
    /// Remove a few bytes.
    Remove(Index, usize),
}

/// The tools a generated `tools/call` names.
#[derive(Debug, Clone, Copy)]
pub struct Tools(pub &'static [&'static str]);

/// Tools for the framing pass: real, unknown, empty and escaped spellings.
pub const ANY_TOOLS: Tools = Tools(&[
    "echo",
    "crash",
    "seen",
    "",
    "nope",
    "ech\\u006f",
    "echo\\u2028",
    "echo\u{2028}",
]);

/// Tools for the session pass: only ones that are harmless to run (`echo`, however spelled).
pub const HARMLESS_TOOLS: Tools = Tools(&["echo", "ech\\u006f", "\\u0065cho"]);

impl Case {
    /// The bytes this case stands for.
    pub fn render(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for piece in &self.lines {
            piece.body.render(&mut out);
            out.extend_from_slice(piece.end.as_bytes());
        }
        for mutation in &self.mutations {
            mutation.apply(&mut out);
        }
        out
    }
}

impl Body {
    fn render(&self, out: &mut Vec<u8>) {
        match self {
            Body::Json(node) => node.render(out),
            Body::Concat(nodes, gap) => {
                for (i, node) in nodes.iter().enumerate() {
                    if i > 0 {
                        out.extend_from_slice(gap.as_bytes());
                    }
                    node.render(out);
                }
            }
            Body::Smuggle { head, hidden } => {
                out.push(b'{');
                for (key, value) in head {
                    key.render(out);
                    out.push(b':');
                    value.render(out);
                    out.push(b',');
                }
                out.extend_from_slice(b"\"params\":{\"x\":\r");
                hidden.render(out);
                out.extend_from_slice(b"\r}}");
            }
            Body::Bytes(bytes) => out.extend_from_slice(bytes),
        }
    }
}

impl Node {
    /// Writes the value's text.
    pub fn render(&self, out: &mut Vec<u8>) {
        match self {
            Node::Lit(text) => out.extend_from_slice(text.as_bytes()),
            Node::Str(text) => text.render(out),
            Node::Arr(items, gaps) => {
                render_seq(out, (b'[', b']'), gaps, items, |item, _, out| {
                    item.render(out)
                });
            }
            Node::Obj(members, gaps) => {
                render_seq(
                    out,
                    (b'{', b'}'),
                    gaps,
                    members,
                    |(key, value), gaps, out| {
                        key.render(out);
                        gaps.write(out);
                        out.push(b':');
                        gaps.write(out);
                        value.render(out);
                    },
                );
            }
            Node::Deep {
                levels,
                object,
                inner,
            } => {
                let (open, close): (&[u8], &[u8]) = if *object {
                    (b"{\"a\":", b"}")
                } else {
                    (b"[", b"]")
                };
                for _ in 0..*levels {
                    out.extend_from_slice(open);
                }
                inner.render(out);
                for _ in 0..*levels {
                    out.extend_from_slice(close);
                }
            }
        }
    }
}

impl Text {
    fn plain(text: &'static str) -> Text {
        Text(vec![Frag::Text(Cow::Borrowed(text))])
    }

    fn render(&self, out: &mut Vec<u8>) {
        out.push(b'"');
        for frag in &self.0 {
            match frag {
                Frag::Text(text) => out.extend_from_slice(text.as_bytes()),
                Frag::Bytes(bytes) => out.extend_from_slice(bytes),
                Frag::Repeat(unit, times) => {
                    for _ in 0..*times {
                        out.extend_from_slice(unit.as_bytes());
                    }
                }
            }
        }
        out.push(b'"');
    }
}

impl Mutation {
    fn apply(&self, bytes: &mut Vec<u8>) {
        if bytes.is_empty() {
            return;
        }
        match self {
            Mutation::Truncate(at) => bytes.truncate(at.index(bytes.len())),
            Mutation::Insert(at, byte) => {
                let at = at.index(bytes.len() + 1);
                bytes.insert(at, *byte);
            }
            Mutation::Flip(at, mask) => {
                let at = at.index(bytes.len());
                bytes[at] ^= mask;
            }
            Mutation::Remove(at, n) => {
                let start = at.index(bytes.len());
                bytes.drain(start..(start + n).min(bytes.len()));
            }
        }
    }
}

/// Writes an array or object: `open`, the items separated by commas, `close`, the gaps in
/// turn around every token.
fn render_seq<T>(
    out: &mut Vec<u8>,
    (open, close): (u8, u8),
    gaps: &[&'static str],
    items: &[T],
    item: impl Fn(&T, &mut Gaps<'_>, &mut Vec<u8>),
) {
    let mut gaps = Gaps::new(gaps);
    out.push(open);
    for (i, it) in items.iter().enumerate() {
        gaps.write(out);
        if i > 0 {
            out.push(b',');
            gaps.write(out);
        }
        item(it, &mut gaps, out);
    }
    gaps.write(out);
    out.push(close);
}

/// The gaps of one array or object, written in turn (none when there are none).
struct Gaps<'a> {
    gaps: &'a [&'static str],
    next: usize,
}

impl<'a> Gaps<'a> {
    fn new(gaps: &'a [&'static str]) -> Self {
        Self { gaps, next: 0 }
    }

    fn write(&mut self, out: &mut Vec<u8>) {
        if self.gaps.is_empty() {
            return;
        }
        out.extend_from_slice(self.gaps[self.next % self.gaps.len()].as_bytes());
        self.next += 1;
    }
}

// ---- strategies ----

/// A whole case: one to four lines and, now and then, a mutation or two.
pub fn case(tools: Tools) -> impl Strategy<Value = Case> {
    let mutations = prop_oneof![
        12 => Just(Vec::new()),
        1 => vec(mutation(), 1..3),
    ];
    (vec(piece(tools), 1..4), mutations).prop_map(|(lines, mutations)| Case { lines, mutations })
}

/// One line for the session pass: a case without huge values, so that a few thousand of them
/// stay a bounded amount of traffic.
pub fn session_case() -> impl Strategy<Value = Case> {
    case(HARMLESS_TOOLS).prop_filter("bounded size", |case| case.render().len() <= 16 << 10)
}

fn piece(tools: Tools) -> impl Strategy<Value = Piece> {
    let body = prop_oneof![
        40 => envelope(tools).prop_map(Body::Json),
        2 => value().prop_map(Body::Json),
        2 => (vec(envelope(tools), 2..4), select(GAPS)).prop_map(|(n, gap)| Body::Concat(n, gap)),
        1 => (id(), method(), vec((key(), value()), 0..2), envelope(tools)).prop_map(
            |(id, method, extra, hidden)| {
                let mut head = vec![
                    (Text::plain("jsonrpc"), Node::Str(Text::plain("2.0"))),
                    (Text::plain("id"), id),
                    (Text::plain("method"), method),
                ];
                head.extend(extra);
                Body::Smuggle { head, hidden: Box::new(hidden) }
            }
        ),
        1 => vec(any::<u8>(), 0..48).prop_map(Body::Bytes),
    ];
    let end = prop_oneof![
        12 => Just("\n"),
        3 => Just("\r\n"),
        1 => select(&["", "\r", "\n\n", "\r\r\n", " \n", "\t\r\n", "\u{2028}\n"][..]),
    ];
    (body, end).prop_map(|(body, end)| Piece { body, end })
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        any::<Index>().prop_map(Mutation::Truncate),
        (any::<Index>(), select(MUTANT_BYTES)).prop_map(|(at, b)| Mutation::Insert(at, b)),
        (any::<Index>(), 1..=255u8).prop_map(|(at, mask)| Mutation::Flip(at, mask)),
        (any::<Index>(), 1..8usize).prop_map(|(at, n)| Mutation::Remove(at, n)),
    ]
}

/// A JSON-RPC envelope: a request, a notification, a result or an error response, or
/// something in between; its members shuffled (the id last, as the TypeScript SDK writes
/// it), sometimes with a duplicate or an extra member.
pub fn envelope(tools: Tools) -> BoxedStrategy<Node> {
    let shape = prop_oneof![
        8 => Just(Shape::Request),
        3 => Just(Shape::Notification),
        3 => Just(Shape::Result),
        2 => Just(Shape::Error),
        1 => Just(Shape::Odd),
    ];
    let jsonrpc = prop_oneof![
        30 => Just(Node::Str(Text::plain("2.0"))),
        1 => select(ODD_JSONRPC).prop_map(|t| Node::Lit(Cow::Borrowed(t))),
    ];
    let extras = prop_oneof![
        8 => Just(Vec::new()),
        1 => vec((key(), value()), 1..3),
    ];
    let duplicate = prop_oneof![
        14 => Just(None),
        1 => (select(DUPLICABLE), value()).prop_map(|(k, v)| Some((Text::plain(k), v))),
    ];
    let params = prop_oneof![
        4 => call_params(tools).prop_map(Some),
        2 => object().prop_map(Some),
        1 => value().prop_map(Some),
        2 => Just(None),
    ]
    .boxed();
    (
        (shape, jsonrpc, id(), method(), params),
        (value(), value(), extras, duplicate, gaps(), any::<bool>()),
        any::<u64>(),
    )
        .prop_map(
            |(
                (shape, jsonrpc, id, method, params),
                (result, data, extras, dup, gaps, canonical),
                shuffle,
            )| {
                let mut members = Vec::new();
                let has_jsonrpc = shape != Shape::Odd || shuffle & 1 == 0;
                if has_jsonrpc {
                    members.push((Text::plain("jsonrpc"), jsonrpc));
                }
                let (has_id, has_method, has_result, has_error) = match shape {
                    Shape::Request => (true, true, false, false),
                    Shape::Notification => (false, true, false, false),
                    Shape::Result => (true, false, true, false),
                    Shape::Error => (true, false, false, true),
                    Shape::Odd => (
                        shuffle & 2 != 0,
                        shuffle & 4 != 0,
                        shuffle & 8 != 0,
                        shuffle & 16 != 0,
                    ),
                };
                if has_id {
                    members.push((Text::plain("id"), id));
                }
                if has_method {
                    members.push((Text::plain("method"), method));
                    if let Some(params) = params {
                        members.push((Text::plain("params"), params));
                    }
                }
                if has_result {
                    members.push((Text::plain("result"), result));
                }
                if has_error {
                    let error = vec![
                        (Text::plain("code"), Node::Lit(Cow::Borrowed("-32603"))),
                        (Text::plain("message"), Node::Str(Text::plain("no"))),
                        (Text::plain("data"), data),
                    ];
                    members.push((Text::plain("error"), Node::Obj(error, Vec::new())));
                }
                members.extend(extras);
                if let Some(dup) = dup {
                    let at = (shuffle >> 8) as usize % (members.len() + 1);
                    members.insert(at, dup);
                }
                if !canonical {
                    shuffle_members(&mut members, shuffle >> 16);
                }
                Node::Obj(members, gaps)
            },
        )
        .boxed()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    Request,
    Notification,
    Result,
    Error,
    Odd,
}

/// A cheap deterministic shuffle (Fisher-Yates over a 64-bit state).
fn shuffle_members<T>(items: &mut [T], mut state: u64) {
    for i in (1..items.len()).rev() {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let j = (state >> 33) as usize % (i + 1);
        items.swap(i, j);
    }
}

/// A `tools/call`'s params: a tool's name, arguments (with a text, perhaps nested ids), and
/// sometimes `_meta`.
fn call_params(tools: Tools) -> BoxedStrategy<Node> {
    let arguments = (text(), vec((key(), value()), 0..3), any::<bool>()).prop_map(
        |(text, mut more, nested_id)| {
            if nested_id {
                more.push((Text::plain("id"), Node::Lit(Cow::Borrowed("7"))));
            }
            more.insert(0, (Text::plain("text"), Node::Str(text)));
            Node::Obj(more, Vec::new())
        },
    );
    (
        select(tools.0),
        arguments,
        prop::option::weighted(0.1, id()),
        gaps(),
    )
        .prop_map(|(tool, arguments, meta, gaps)| {
            let mut members = vec![
                (Text::plain("name"), Node::Str(Text::plain(tool))),
                (Text::plain("arguments"), arguments),
            ];
            if let Some(token) = meta {
                let meta = vec![(Text::plain("progressToken"), token)];
                members.push((Text::plain("_meta"), Node::Obj(meta, Vec::new())));
            }
            Node::Obj(members, gaps)
        })
        .boxed()
}

/// An id: mostly ordinary, often at an edge.
pub fn id() -> BoxedStrategy<Node> {
    prop_oneof![
        6 => (0..1000u32).prop_map(|n| Node::Lit(Cow::Owned(n.to_string()))),
        3 => select(WORDS).prop_map(|w| Node::Str(Text::plain(w))),
        3 => select(ODD_IDS).prop_map(|t| Node::Lit(Cow::Borrowed(t))),
        1 => any::<i64>().prop_map(|n| Node::Lit(Cow::Owned(n.to_string()))),
        1 => number(),
        1 => text().prop_map(Node::Str),
        1 => prop_oneof![20 => 200usize..300, 1 => 1usize..100_000]
            .prop_map(|n| Node::Str(Text(vec![Frag::Repeat("i", n)]))),
        1 => object(),
    ]
    .boxed()
}

fn method() -> BoxedStrategy<Node> {
    prop_oneof![
        30 => select(METHODS).prop_map(|m| Node::Str(Text::plain(m))),
        1 => text().prop_map(Node::Str),
        1 => value(),
    ]
    .boxed()
}

/// Any JSON value, up to three levels of arrays and objects deep (and a deep nest now and
/// then).
pub fn value() -> BoxedStrategy<Node> {
    let leaf = prop_oneof![
        1 => select(&["null", "true", "false"][..]).prop_map(|t| Node::Lit(Cow::Borrowed(t))),
        4 => number(),
        5 => text().prop_map(Node::Str),
        1 => deep(),
    ]
    .boxed();
    // Built level by level once (prop_recursive would rebuild its levels for every value).
    (0..3).fold(leaf.clone(), |inner, _| {
        prop_oneof![
            3 => leaf.clone(),
            1 => (vec(inner.clone(), 0..4), gaps()).prop_map(|(items, gaps)| Node::Arr(items, gaps)),
            1 => (vec((key(), inner), 0..4), gaps())
                .prop_map(|(members, gaps)| Node::Obj(members, gaps)),
        ]
        .boxed()
    })
}

fn object() -> BoxedStrategy<Node> {
    (vec((key(), value()), 0..4), gaps())
        .prop_map(|(members, gaps)| Node::Obj(members, gaps))
        .boxed()
}

/// Nesting around the serde_json recursion limit (128) and far beyond it.
fn deep() -> impl Strategy<Value = Node> {
    let levels = prop_oneof![
        3 => 1usize..20,
        1 => select(&[126usize, 127, 128, 129, 130, 131, 1000][..]),
    ];
    (levels, any::<bool>(), number()).prop_map(|(levels, object, inner)| Node::Deep {
        levels,
        object,
        inner: Box::new(inner),
    })
}

/// A number's text: edge values, valid and malformed, and random integers and floats
/// written several ways.
pub fn number() -> BoxedStrategy<Node> {
    let text = prop_oneof![
        4 => select(EDGE_NUMBERS).prop_map(Cow::Borrowed),
        1 => select(BAD_NUMBERS).prop_map(Cow::Borrowed),
        2 => any::<i64>().prop_map(|n| Cow::Owned(n.to_string())),
        1 => any::<u64>().prop_map(|n| Cow::Owned(n.to_string())),
        2 => (any::<f64>(), 0..3u8).prop_map(|(f, style)| Cow::Owned(match style {
            0 => format!("{f:?}"),
            1 => format!("{f:e}"),
            _ => format!("{f:E}"),
        })),
        1 => (any::<u64>(), 0..25u32, -400..400i32, 0..4u8).prop_map(|(m, frac, exp, style)| {
            let digits = m.to_string();
            let (int, rest) = digits.split_at(digits.len().saturating_sub(frac as usize).max(1));
            Cow::Owned(match style {
                0 => format!("{int}.{rest}0e{exp}"),
                1 => format!("-{int}.{rest}E+{}", exp.unsigned_abs()),
                2 => format!("{int}{rest}00000000000000000000"),
                _ => format!("0.{}{int}{rest}", "0".repeat(frac as usize)),
            })
        }),
    ];
    text.prop_map(Node::Lit).boxed()
}

/// A string's contents: mostly words, sometimes the characters line readers disagree on,
/// escapes (valid and not), control bytes, invalid UTF-8, or a lot of the same.
pub fn text() -> BoxedStrategy<Text> {
    let frag = prop_oneof![
        24 => select(WORDS).prop_map(|w| Frag::Text(Cow::Borrowed(w))),
        3 => any::<char>().prop_map(|c| Frag::Text(Cow::Owned(escape_raw(c)))),
        3 => select(RAW_SPECIALS).prop_map(|s| Frag::Text(Cow::Borrowed(s))),
        4 => select(ESCAPES).prop_map(|s| Frag::Text(Cow::Borrowed(s))),
        1 => select(BAD_ESCAPES).prop_map(|s| Frag::Text(Cow::Borrowed(s))),
        1 => select(CONTROL).prop_map(|s| Frag::Text(Cow::Borrowed(s))),
        1 => select(NOT_UTF8).prop_map(Frag::Bytes),
        1 => (select(REPEATED), prop_oneof![60 => 1usize..300, 1 => 1000usize..100_000])
            .prop_map(|(unit, times)| Frag::Repeat(unit, times)),
    ];
    vec(frag, 0..4).prop_map(Text).boxed()
}

/// A character as it may sit raw in a JSON string: `"` and `\` escaped (the others, control
/// characters included, raw: those are hostile on purpose).
fn escape_raw(c: char) -> String {
    match c {
        '"' => "\\\"".to_owned(),
        '\\' => "\\\\".to_owned(),
        c => c.to_string(),
    }
}

fn key() -> BoxedStrategy<Text> {
    prop_oneof![
        8 => select(KEYS).prop_map(Text::plain),
        1 => text(),
    ]
    .boxed()
}

/// The gaps between an object's or array's tokens: none, JSON's own whitespace, or what some
/// reader takes for a line break or JSON does not allow.
fn gaps() -> BoxedStrategy<Vec<&'static str>> {
    prop_oneof![
        8 => Just(Vec::new()),
        4 => vec(select(&["", " ", "\t", " \t  "][..]), 1..4),
        1 => vec(select(GAPS), 1..4),
    ]
    .boxed()
}

// ---- pools ----

const GAPS: &[&str] = &[
    "", " ", "\t", "\r", "\r\n", "\n", " \r ", "\x0c", "\x0b", "\u{a0}", "\u{85}", "\u{2028}",
    "\u{2029}", "\u{feff}", "\0",
];

const MUTANT_BYTES: &[u8] = &[
    b'\r', b'\n', b'"', b'\\', b'{', b'}', b'[', b']', b',', b':', 0, 0x85, 0xc2, 0xe2, 0xff,
];

const WORDS: &[&str] = &[
    "a",
    "id",
    "hi",
    "x y",
    "hello world",
    "2.0",
    "1",
    "1.0",
    "tools/call",
    "production",
    "s1",
    "é",
    "日本",
    "😀",
    "/etc/passwd",
    "file:///tmp/a",
    "\\u0041",
    "<script>",
];

const RAW_SPECIALS: &[&str] = &[
    "\u{85}",
    "\u{2028}",
    "\u{2029}",
    "\u{feff}",
    "\u{a0}",
    "\u{7f}",
    "\u{fffd}",
    "\u{10ffff}",
    "\u{200b}",
    "\u{0301}",
];

const ESCAPES: &[&str] = &[
    "\\n",
    "\\r",
    "\\t",
    "\\b",
    "\\f",
    "\\/",
    "\\\\",
    "\\\"",
    "\\u0000",
    "\\u000d",
    "\\u000A",
    "\\u0085",
    "\\u2028",
    "\\u2029",
    "\\u001f",
    "\\u007f",
    "\\ud83d\\ude00",
    "\\uD83D\\uDE00",
    "\\u00e9",
    "\\uffff",
    "\\ufeff",
    "\\r\\n",
];

const BAD_ESCAPES: &[&str] = &[
    "\\ud800",
    "\\udc00",
    "\\ud800\\u0041",
    "\\x41",
    "\\u12",
    "\\U0041",
    "\\a",
    "\\",
    "\\u",
    "\\'",
];

const CONTROL: &[&str] = &[
    "\0", "\x01", "\x1b", "\x1f", "\t", "\r", "\n", "\r\n", "\"", "\\",
];

const NOT_UTF8: &[&[u8]] = &[
    b"\xff",
    b"\xc0\x80",
    b"\xed\xa0\x80",
    b"\xe2\x80",
    b"\x80",
    b"\xf4\x90\x80\x80",
    b"\xc2",
    b"\xe2\x80\xa8\xe2",
];

const REPEATED: &[&str] = &["a", "\\u2028", "\u{2028}", "é", "\\\\", "\\\"", " "];

const KEYS: &[&str] = &[
    "id",
    "method",
    "jsonrpc",
    "params",
    "result",
    "error",
    "name",
    "arguments",
    "uri",
    "_meta",
    "requestId",
    "text",
    "target",
    "data",
    "a",
    "b",
    "c",
    "d",
    "e",
    "f",
    "g",
    "h",
    "k",
    "x",
    "y",
    "z",
    "ID",
    "id ",
    "",
    "\\u0069d",
    "i\\u0064",
    "\\u006dethod",
    "\\\"id\\\"",
    "\u{2028}",
];

/// Top-level keys an envelope may repeat, spelled alike or escaped differently.
const DUPLICABLE: &[&str] = &[
    "id",
    "method",
    "jsonrpc",
    "params",
    "result",
    "\\u0069d",
    "m\\u0065thod",
    "id\\u0000",
];

const METHODS: &[&str] = &[
    "tools/call",
    "tools/call",
    "tools/call",
    "tools/list",
    "resources/read",
    "resources/list",
    "resources/templates/list",
    "prompts/get",
    "prompts/list",
    "completion/complete",
    "logging/setLevel",
    "tasks/get",
    "tasks/result",
    "tasks/cancel",
    "initialize",
    "ping",
    "server/discover",
    "notifications/initialized",
    "notifications/cancelled",
    "notifications/progress",
    "notifications/tools/list_changed",
    "notifications/",
    "notifications/list",
    "vendor/frobnicate",
    "sampling/createMessage",
    "tools/call ",
    "TOOLS/CALL",
    "tools\\/call",
    "tools/c\\u0061ll",
    "tools/call\\u0000",
    "tools/call\\u2028",
    "tools/call\u{2028}",
    "",
];

const ODD_JSONRPC: &[&str] = &[
    "\"2.0 \"",
    "\"2\\u002e0\"",
    "2.0",
    "\"1.0\"",
    "null",
    "\"2.0\\u0000\"",
];

const ODD_IDS: &[&str] = &[
    "1.0",
    "1e0",
    "1E0",
    "-0",
    "-0.0",
    "0",
    "9007199254740991",
    "9007199254740992",
    "-9007199254740992",
    "9007199254740993",
    "-9007199254740993",
    "1152921504606846976",
    "9223372036854775807",
    "-9223372036854775808",
    "18446744073709551615",
    "18446744073709551616",
    "1e400",
    "0.5",
    "null",
    "true",
    "{}",
    "[]",
    "[1]",
    "{\"id\":1}",
    "\"\"",
    "\"1\"",
    "\"a\\u2028b\"",
    "\"a\u{2028}b\"",
    "\"\\ud800\"",
];

const EDGE_NUMBERS: &[&str] = &[
    "0",
    "-0",
    "1",
    "-1",
    "1.0",
    "1e0",
    "1E+0",
    "-0.0",
    "0.0",
    "0e0",
    "0.1",
    "0.5",
    "1.5",
    "100",
    "1e2",
    "0.1e1",
    "10e-1",
    "2.5e-3",
    "1e-7",
    "0.000001",
    "0.3",
    "0.30000000000000004",
    "1.00000000000000000001",
    "9007199254740991",
    "9007199254740992",
    "9007199254740993",
    "-9007199254740992",
    "-9007199254740993",
    "9007199254740993.0",
    "9007199254740992.0",
    "1152921504606846976",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775808",
    "-9223372036854775809",
    "18446744073709551615",
    "18446744073709551616",
    "123456789012345678901234567890",
    "4.9e-324",
    "5e-324",
    "2e-324",
    "1e-400",
    "2.2250738585072014e-308",
    "2.2250738585072011e-308",
    "1.7976931348623157e308",
    "1.7976931348623157E+308",
    "-1.7976931348623157e308",
    "1.7976931348623158e308",
    "1.7976931348623159e308",
    "1e308",
    "1e309",
    "1e400",
];

const BAD_NUMBERS: &[&str] = &[
    "01",
    "-01",
    "1.",
    "-",
    "+1",
    ".5",
    "1e",
    "1e+",
    "--1",
    "0x10",
    "NaN",
    "Infinity",
    "-Infinity",
    "1_000",
    "1.2.3",
    "1ee2",
    "\u{661}",
    "00",
    "-.5",
    "1e1.5",
];
