//! Text from agents and servers, shown to a person. Tool names, argument names and values,
//! process and client names come from processes Postern does not trust, and a terminal, a
//! tray menu or a notification obeys what is in them: control sequences hide or rewrite
//! lines, bidirectional controls reorder what is read, a newline in a one-line field forges
//! the next line. These functions show each such character as a `\uXXXX` escape (JSON's own
//! form, so JSON stays valid and means the same).

use std::borrow::Cow;
use std::fmt::Write as _;

/// `text` with its control characters (but newline and tab) and bidirectional controls
/// escaped: for text that may span lines.
pub fn visible(text: &str) -> Cow<'_, str> {
    escaped(text, |c| c != '\n' && c != '\t')
}

/// `text` with every control character (newline and tab too) and bidirectional control
/// escaped: for a field shown on one line (a name, a label, a menu entry).
pub fn one_line(text: &str) -> Cow<'_, str> {
    escaped(text, |_| true)
}

fn escaped(text: &str, control_hidden: impl Fn(char) -> bool) -> Cow<'_, str> {
    let hidden = |c: char| (c.is_control() && control_hidden(c)) || is_bidi_control(c);
    if !text.chars().any(hidden) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if hidden(c) {
            let _ = write!(out, "\\u{:04x}", u32::from(c));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// The characters that change the direction text is shown in (Unicode's bidi controls).
fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_and_bidi_characters_are_shown_not_obeyed() {
        assert_eq!(visible("plain"), "plain");
        assert!(matches!(visible("plain"), Cow::Borrowed(_)));
        assert_eq!(
            visible("a\u{1b}[8m\u{202e}b\r\u{7f}\u{85}\tc\nd"),
            "a\\u001b[8m\\u202eb\\u000d\\u007f\\u0085\tc\nd"
        );
        assert_eq!(
            one_line("key\n  code: same\tx"),
            "key\\u000a  code: same\\u0009x"
        );
    }
}
