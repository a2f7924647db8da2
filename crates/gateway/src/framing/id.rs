//! The top-level `id` of a line, read from its bytes in constant memory.

use serde_json::Value;

/// The longest key text read while looking for an oversized line's `id` (`"\u0069\u0064"` is
/// 12).
const MAX_KEY_TEXT: usize = 16;

/// Whether a key's text (between its quotes, escapes as written) is `id`.
fn key_is_id(text: &[u8]) -> bool {
    if text == b"id" {
        return true;
    }
    let quoted = [&b"\""[..], text, &b"\""[..]].concat();
    serde_json::from_slice::<String>(&quoted).is_ok_and(|key| key == "id")
}

/// The longest id text recovered from an oversized line (a longer id is not recovered).
const MAX_ID_TEXT: usize = 256;

/// The top-level `id` of a line Postern cannot otherwise read (not JSON, a duplicate key, a
/// lone surrogate, a carriage return): a string or a number, wherever it sits in the object.
pub fn top_level_id(line: &[u8]) -> Option<Value> {
    let mut scanner = IdScanner::default();
    scanner.feed(line);
    scanner.finish_number();
    scanner.id()
}

/// Reads the top-level `id` member of a JSON object from its bytes, chunk by chunk, in
/// constant memory: for a line too large to keep, whose answer must still reach its request.
/// Nested `"id"` keys (inside `params` or `result`) are not it.
#[derive(Debug, Default)]
pub(super) struct IdScanner {
    /// Nesting depth outside strings: 1 inside the top-level object.
    depth: u32,
    in_string: bool,
    escaped: bool,
    /// At depth 1: whether the next string is a key (else a value).
    expect_key: bool,
    /// The key being read at depth 1 (kept only while it may still be `id`).
    key: Vec<u8>,
    /// The last top-level key read.
    last_key_is_id: bool,
    /// The text of the top-level `id` value, while it is read and once done.
    value: Vec<u8>,
    state: IdState,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum IdState {
    #[default]
    Looking,
    /// Reading the id's value (a string, or a number's characters).
    Reading,
    /// The id was read whole.
    Done,
    /// An id too long, or not a scalar: none is recovered.
    Unreadable,
}

impl IdScanner {
    pub(super) fn feed(&mut self, bytes: &[u8]) {
        for &b in bytes {
            if self.state == IdState::Done || self.state == IdState::Unreadable {
                return;
            }
            self.step(b);
        }
    }

    fn step(&mut self, b: u8) {
        if self.in_string {
            let keep = self.depth == 1;
            if self.escaped {
                self.escaped = false;
            } else if b == b'\\' {
                self.escaped = true;
            } else if b == b'"' {
                self.in_string = false;
            }
            if keep && self.state == IdState::Reading {
                self.push_value(b);
                if !self.in_string {
                    self.state = IdState::Done;
                }
            } else if keep && self.expect_key && self.in_string {
                // Enough of the key to read `id` however it is escaped (`"\u0069d"`).
                if self.key.len() <= MAX_KEY_TEXT {
                    self.key.push(b);
                }
            } else if keep && self.expect_key {
                self.last_key_is_id = self.key.len() <= MAX_KEY_TEXT && key_is_id(&self.key);
                self.key.clear();
            }
            return;
        }
        match b {
            b'"' => {
                self.in_string = true;
                if self.depth == 1 && !self.expect_key && self.last_key_is_id {
                    self.state = IdState::Reading;
                    self.push_value(b);
                }
            }
            b'{' | b'[' => {
                if self.depth == 1 && !self.expect_key && self.last_key_is_id {
                    self.state = IdState::Unreadable;
                }
                self.depth += 1;
                if self.depth == 1 {
                    self.expect_key = true;
                }
            }
            b'}' | b']' => {
                self.finish_number();
                self.depth = self.depth.saturating_sub(1);
            }
            b':' if self.depth == 1 => self.expect_key = false,
            b',' if self.depth == 1 => {
                self.finish_number();
                self.expect_key = true;
                self.last_key_is_id = false;
            }
            b' ' | b'\t' | b'\n' | b'\r' => {}
            _ if self.depth == 1 && !self.expect_key && self.last_key_is_id => {
                self.state = IdState::Reading;
                self.push_value(b);
            }
            _ => {}
        }
    }

    fn push_value(&mut self, b: u8) {
        if self.value.len() >= MAX_ID_TEXT {
            self.state = IdState::Unreadable;
        } else {
            self.value.push(b);
        }
    }

    fn finish_number(&mut self) {
        if self.depth == 1 && self.state == IdState::Reading {
            self.state = IdState::Done;
        }
    }

    /// The id read, as JSON (a string or a number; `None` for anything else).
    pub(super) fn id(&self) -> Option<Value> {
        if self.state != IdState::Done {
            return None;
        }
        match serde_json::from_slice(&self.value).ok()? {
            value @ (Value::String(_) | Value::Number(_)) => Some(value),
            _ => None,
        }
    }
}
