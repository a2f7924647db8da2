//! The way back: the answer to a request the broker put a value in goes to the launch with the
//! placeholder where the value was, in its headers and its body, so a host that echoes what it
//! was sent (a debugging endpoint, an error page quoting the `Authorization` header) does not
//! hand the value to the server's code after all.
//!
//! The body is rewritten as it streams: each chunk is appended to what was held back, every
//! value in it replaced, and all but the last `longest value - 1` bytes passed on, so a value
//! split across chunks is still found. The broker asks the host for an uncompressed answer
//! (`Accept-Encoding` is dropped from such requests); a host that compresses all the same
//! sends bytes in which no value can be seen, and they pass as they are.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};
use hyper::header::{CONTENT_LENGTH, HeaderMap, HeaderValue};
use postern_vault::Secret;

/// Values and the placeholders that replace them on the way back.
pub struct Swaps {
    pairs: Vec<(Secret<String>, String)>,
}

impl std::fmt::Debug for Swaps {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Swaps")
            .field("pairs", &self.pairs.len())
            .finish()
    }
}

impl Swaps {
    /// Each value (non-empty) with its placeholder.
    pub fn new(pairs: impl IntoIterator<Item = (Secret<String>, String)>) -> Swaps {
        Swaps {
            pairs: pairs
                .into_iter()
                .filter(|(value, _)| !value.expose().is_empty())
                .collect(),
        }
    }

    /// Whether there is nothing to replace.
    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty()
    }

    /// Whether every placeholder is as long as its value (the body keeps its length).
    fn same_lengths(&self) -> bool {
        self.pairs
            .iter()
            .all(|(value, placeholder)| value.expose().len() == placeholder.len())
    }

    /// How many bytes must be held back so a value split across chunks is found whole.
    fn overlap(&self) -> usize {
        self.pairs
            .iter()
            .map(|(value, _)| value.expose().len())
            .max()
            .unwrap_or(1)
            .saturating_sub(1)
    }

    /// Replaces every value in `bytes`; says whether one was found.
    fn replace(&self, bytes: &mut Vec<u8>) -> bool {
        let mut found = false;
        for (value, placeholder) in &self.pairs {
            let value = value.expose().as_bytes();
            let mut at = 0;
            while let Some(i) = find(&bytes[at..], value) {
                let start = at + i;
                bytes.splice(start..start + value.len(), placeholder.bytes());
                at = start + placeholder.len();
                found = true;
            }
        }
        found
    }

    /// Replaces every value in the answer's headers; drops `Content-Length` when the body
    /// may change length.
    pub fn headers(&self, headers: &mut HeaderMap) {
        for value in headers.values_mut() {
            let mut bytes = value.as_bytes().to_vec();
            if self.replace(&mut bytes)
                && let Ok(new) = HeaderValue::from_bytes(&bytes)
            {
                *value = new;
            }
        }
        if !self.same_lengths() {
            headers.remove(CONTENT_LENGTH);
        }
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() || haystack.len() < needle.len() {
        return None;
    }
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// A body with [`Swaps`] applied as it streams.
#[derive(Debug)]
pub struct Redacting<B> {
    inner: B,
    swaps: Swaps,
    /// Bytes read but not passed on yet (the tail a value may continue from).
    held: Vec<u8>,
    /// A trailers frame read while bytes were still held back.
    trailers: Option<Frame<Bytes>>,
    ended: bool,
}

impl<B> Redacting<B> {
    /// `inner` with `swaps` applied.
    pub fn new(inner: B, swaps: Swaps) -> Self {
        Redacting {
            inner,
            swaps,
            held: Vec::new(),
            trailers: None,
            ended: false,
        }
    }

    /// Everything held, to pass on now.
    fn flush(&mut self) -> Option<Frame<Bytes>> {
        if self.held.is_empty() {
            return None;
        }
        Some(Frame::data(Bytes::from(std::mem::take(&mut self.held))))
    }
}

impl<B> Body for Redacting<B>
where
    B: Body<Data = Bytes> + Unpin,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let this = self.get_mut();
        loop {
            if this.ended {
                return Poll::Ready(this.flush().or_else(|| this.trailers.take()).map(Ok));
            }
            let frame = match Pin::new(&mut this.inner).poll_frame(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(None) => {
                    this.ended = true;
                    continue;
                }
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(e))),
                Poll::Ready(Some(Ok(frame))) => frame,
            };
            match frame.into_data() {
                Ok(data) => {
                    this.held.extend_from_slice(&data);
                    this.swaps.replace(&mut this.held);
                    let keep = this.swaps.overlap().min(this.held.len());
                    let pass = this.held.len() - keep;
                    if pass == 0 {
                        continue;
                    }
                    let rest = this.held.split_off(pass);
                    let out = std::mem::replace(&mut this.held, rest);
                    return Poll::Ready(Some(Ok(Frame::data(Bytes::from(out)))));
                }
                Err(trailers) => {
                    // Trailers end the body: what is held goes first.
                    this.ended = true;
                    this.trailers = Some(trailers);
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.ended && self.held.is_empty() && self.trailers.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        if self.swaps.same_lengths() {
            let mut hint = self.inner.size_hint();
            let held = self.held.len() as u64;
            hint.set_lower(hint.lower() + held);
            if let Some(upper) = hint.upper() {
                hint.set_upper(upper + held);
            }
            hint
        } else {
            SizeHint::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;

    use http_body_util::BodyExt;

    use super::*;

    /// A body of the given chunks, one frame each.
    struct Chunks(VecDeque<Bytes>);

    impl Body for Chunks {
        type Data = Bytes;
        type Error = std::convert::Infallible;

        fn poll_frame(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
            Poll::Ready(self.0.pop_front().map(|b| Ok(Frame::data(b))))
        }
    }

    fn swaps() -> Swaps {
        Swaps::new([(
            Secret::new("ghp_realvalue0001".to_owned()),
            "ghp_PLACEHOLDER99".to_owned(),
        )])
    }

    async fn through(chunks: &[&str], swaps: Swaps) -> String {
        let body = Chunks(
            chunks
                .iter()
                .map(|c| Bytes::copy_from_slice(c.as_bytes()))
                .collect(),
        );
        let out = Redacting::new(body, swaps)
            .collect()
            .await
            .expect("collected")
            .to_bytes();
        String::from_utf8(out.to_vec()).expect("utf-8")
    }

    #[tokio::test]
    async fn a_value_echoed_back_reaches_the_launch_as_its_placeholder_even_split_across_chunks() {
        let echoed = "you sent: Bearer ghp_realvalue0001, twice: ghp_realvalue0001.";
        let expected = "you sent: Bearer ghp_PLACEHOLDER99, twice: ghp_PLACEHOLDER99.";
        assert_eq!(through(&[echoed], swaps()).await, expected);
        // Split at every byte boundary, in two and in one-byte chunks.
        for cut in 1..echoed.len() {
            let (a, b) = echoed.split_at(cut);
            assert_eq!(through(&[a, b], swaps()).await, expected, "cut at {cut}");
        }
        let bytes: Vec<String> = echoed.chars().map(String::from).collect();
        let chunks: Vec<&str> = bytes.iter().map(String::as_str).collect();
        assert_eq!(through(&chunks, swaps()).await, expected);
        // Nothing to find: the body passes as it came.
        assert_eq!(through(&["plain", " text"], swaps()).await, "plain text");
    }

    #[test]
    fn a_value_in_an_answers_headers_is_replaced_and_the_length_kept_when_it_can_be() {
        let mut headers = HeaderMap::new();
        headers.insert(
            "x-echo",
            HeaderValue::from_static("token=ghp_realvalue0001"),
        );
        headers.insert(CONTENT_LENGTH, HeaderValue::from_static("40"));
        swaps().headers(&mut headers);
        assert_eq!(headers["x-echo"], "token=ghp_PLACEHOLDER99");
        assert_eq!(headers[CONTENT_LENGTH], "40");

        let shorter = Swaps::new([(Secret::new("longer-value".to_owned()), "ph".to_owned())]);
        shorter.headers(&mut headers);
        assert!(headers.get(CONTENT_LENGTH).is_none());
    }
}
