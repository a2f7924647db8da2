//! What the CLI prints for people. Much of it comes from agents and servers: tool arguments,
//! process and client names, catalog text, refusals quoting them. A terminal obeys the control
//! sequences in such text (an `ESC [8m` hides the rest of an approval card, `ESC [1A ESC [2K`
//! erases the line above) and bidirectional controls reorder what is shown. So every line the
//! CLI writes for a person goes through [`Terminal`], which shows each control character
//! (other than newline and tab) and each bidirectional control as a `\uXXXX` escape: a human
//! reads what is there, never what it does to the screen. The escape is JSON's own, so JSON
//! output stays valid and means the same.

use std::io::{self, StdoutLock, Write};

/// Standard output for people.
pub fn out() -> Terminal<StdoutLock<'static>> {
    Terminal::new(io::stdout().lock())
}

/// `text` with its control and bidirectional characters escaped (for stderr).
pub fn clean(text: &str) -> String {
    postern_domain::text::visible(text).into_owned()
}

/// A writer that escapes control and bidirectional characters, a line at a time (so a
/// character split across two writes is still seen whole).
pub struct Terminal<W: Write> {
    inner: W,
    line: Vec<u8>,
}

impl<W: Write> Terminal<W> {
    /// Writes to `inner`.
    pub fn new(inner: W) -> Self {
        Self {
            inner,
            line: Vec::new(),
        }
    }

    /// Writes the buffered bytes up to and including the last newline.
    fn emit_lines(&mut self) -> io::Result<()> {
        let Some(end) = self.line.iter().rposition(|b| *b == b'\n') else {
            return Ok(());
        };
        let rest = self.line.split_off(end + 1);
        let lines = std::mem::replace(&mut self.line, rest);
        self.inner
            .write_all(clean(&String::from_utf8_lossy(&lines)).as_bytes())
    }
}

impl<W: Write> Write for Terminal<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.line.extend_from_slice(buf);
        if buf.contains(&b'\n') {
            self.emit_lines()?;
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.emit_lines()?;
        if !self.line.is_empty() {
            let rest = std::mem::take(&mut self.line);
            self.inner
                .write_all(clean(&String::from_utf8_lossy(&rest)).as_bytes())?;
        }
        self.inner.flush()
    }
}

impl<W: Write> Drop for Terminal<W> {
    fn drop(&mut self) {
        let _ = self.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn through(writes: &[&[u8]]) -> String {
        let mut shown = Vec::new();
        {
            let mut t = Terminal::new(&mut shown);
            for w in writes {
                t.write_all(w).expect("write");
            }
        }
        String::from_utf8(shown).expect("utf8")
    }

    #[test]
    fn escapes_hide_nothing_and_move_nothing() {
        let card = "agent: claude\u{1b}[8m -> postern\n  /rm -rf ~\u{1b}[8m = \"x\"\n";
        assert_eq!(
            through(&[card.as_bytes()]),
            "agent: claude\\u001b[8m -> postern\n  /rm -rf ~\\u001b[8m = \"x\"\n"
        );
        assert_eq!(
            through(&["a\u{202e}cba\u{2066}\r\u{7f}\u{85}\tok\n".as_bytes()]),
            "a\\u202ecba\\u2066\\u000d\\u007f\\u0085\tok\n"
        );
    }

    #[test]
    fn a_character_split_across_writes_and_an_unfinished_line_are_shown_whole() {
        let bytes = "é\u{202e}".as_bytes();
        assert_eq!(
            through(&[&bytes[..1], &bytes[1..3], &bytes[3..], b"\nlast"]),
            "é\\u202e\nlast"
        );
    }

    #[test]
    fn json_stays_json_with_the_same_meaning() {
        let value = serde_json::json!({"name": "x\u{1b}[2J\u{202e}\u{85}"});
        let shown = through(&[format!("{value}\n").as_bytes()]);
        let back: serde_json::Value = serde_json::from_str(&shown).expect("still JSON");
        assert_eq!(back, value);
    }
}
