//! The way back: every answer to a launch that holds placeholders comes back with no value in
//! it, in its headers, its body and its trailers, so a host that echoes what it was sent (a
//! debugging endpoint, an error page quoting the `Authorization` header) does not hand the value
//! to the server's code after all. A value the request carried goes back as the request's own
//! placeholder; any other value of the launch, and other forms of a value (a basic credential's
//! decoded `user:password` and password), as asterisks of the same length.
//!
//! The body is rewritten as it streams: each chunk is appended to what was held back, every
//! value in it replaced, and all passed on but the longest tail that could still begin a value,
//! so a value split across chunks is still found and a message that cannot be one is not held
//! up. The broker asks such a launch's hosts for whole, uncompressed answers (`Accept-Encoding`,
//! `Range` and `If-Range` are dropped from its requests) and refuses an answer that comes
//! compressed all the same ([`compressed`]).

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
    /// What a launch's answers must not carry: each brokered value, as its placeholder when the
    /// request carried that placeholder (`carried`), else as asterisks; other forms of the
    /// values as asterisks.
    pub fn for_launch(launch: &[crate::Brokered], carried: &[String]) -> Swaps {
        let mask = |s: &Secret<String>| "*".repeat(s.expose().len());
        // (value, what replaces it, whether it is the request's own placeholder)
        let mut pairs = Vec::new();
        for b in launch {
            let own = carried.contains(&b.placeholder);
            let back = if own {
                b.placeholder.clone()
            } else {
                mask(&b.value)
            };
            pairs.push((Secret::new(b.value.expose().clone()), back, own));
            for form in &b.forms {
                pairs.push((Secret::new(form.expose().clone()), mask(form), false));
            }
        }
        // Longest first (a value that contains another is replaced whole), and where two calls
        // borrowed the same value, the request's own placeholder first: it is the one found.
        pairs.sort_by_key(|(value, _, own)| (std::cmp::Reverse(value.expose().len()), !own));
        Swaps::new(pairs.into_iter().map(|(value, back, _)| (value, back)))
    }

    /// Each value (non-empty) with what replaces it.
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

    /// How many bytes at the end of `held` must wait for the next chunk: the longest tail
    /// that is the start of a value (so a value split across chunks is found whole).
    fn tail(&self, held: &[u8]) -> usize {
        self.pairs
            .iter()
            .map(|(value, _)| {
                let value = value.expose().as_bytes();
                (1..value.len().min(held.len() + 1))
                    .rev()
                    .find(|&k| held.ends_with(&value[..k]))
                    .unwrap_or(0)
            })
            .max()
            .unwrap_or(0)
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

/// Whether an answer's body is encoded (compressed): its bytes cannot be searched for a value.
/// A content coding other than `identity` says so, and so does a transfer coding other than
/// `chunked` (`Transfer-Encoding: gzip, chunked`: the chunks are taken off, the gzip is not).
pub fn compressed(headers: &HeaderMap) -> bool {
    let coded = |name, plain: &[&[u8]]| {
        headers.get_all(name).iter().any(|value| {
            value
                .as_bytes()
                .split(|b| *b == b',')
                .map(<[u8]>::trim_ascii)
                .filter(|coding| !coding.is_empty())
                .any(|coding| !plain.iter().any(|p| coding.eq_ignore_ascii_case(p)))
        })
    };
    coded(hyper::header::CONTENT_ENCODING, &[b"identity"])
        || coded(hyper::header::TRANSFER_ENCODING, &[b"chunked", b"identity"])
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
                    let pass = this.held.len() - this.swaps.tail(&this.held);
                    if pass == 0 {
                        continue;
                    }
                    let rest = this.held.split_off(pass);
                    let out = std::mem::replace(&mut this.held, rest);
                    return Poll::Ready(Some(Ok(Frame::data(Bytes::from(out)))));
                }
                Err(frame) => {
                    // Trailers end the body: what is held goes first.
                    this.ended = true;
                    this.trailers = Some(match frame.into_trailers() {
                        Ok(mut trailers) => {
                            this.swaps.headers(&mut trailers);
                            Frame::trailers(trailers)
                        }
                        Err(other) => other,
                    });
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.ended && self.held.is_empty() && self.trailers.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        if !self.swaps.same_lengths() {
            return SizeHint::default();
        }
        let inner = self.inner.size_hint();
        let held = self.held.len() as u64;
        let mut hint = SizeHint::new();
        // The upper bound first: `set_lower` insists on lower <= upper.
        if let Some(upper) = inner.upper() {
            hint.set_upper(upper.saturating_add(held));
        }
        hint.set_lower(inner.lower().saturating_add(held));
        hint
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

    #[tokio::test]
    async fn a_value_the_request_did_not_carry_and_other_forms_come_back_as_asterisks() {
        let launch = [crate::Brokered {
            credential: "basic".into(),
            placeholder: "cGxhY2Vob2xkZXI=".into(),
            value: Secret::new("YWxpY2U6cHc=".into()),
            hosts: vec!["h".into()],
            forms: vec![
                Secret::new("alice:pw".into()),
                Secret::new("pw-long".into()),
            ],
        }];
        let carried = Swaps::for_launch(&launch, &["cGxhY2Vob2xkZXI=".into()]);
        assert_eq!(
            through(&["Basic YWxpY2U6cHc= (alice:pw)"], carried).await,
            "Basic cGxhY2Vob2xkZXI= (********)"
        );
        let not = Swaps::for_launch(&launch, &[]);
        assert_eq!(through(&["YWxpY2U6cHc="], not).await, "************");
    }

    #[test]
    fn only_a_tail_that_could_start_a_value_is_held_back() {
        let s = swaps();
        assert_eq!(s.tail(b"a message\n"), 0);
        assert_eq!(s.tail(b"token: ghp_real"), "ghp_real".len());
        assert_eq!(s.tail(b"token: g"), 1);
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

    #[test]
    fn an_answer_in_any_coding_but_chunks_is_compressed() {
        let with = |name: hyper::header::HeaderName, value: &'static str| {
            let mut headers = HeaderMap::new();
            headers.insert(name, HeaderValue::from_static(value));
            headers
        };
        use hyper::header::{CONTENT_ENCODING, TRANSFER_ENCODING};
        assert!(!compressed(&HeaderMap::new()));
        assert!(!compressed(&with(CONTENT_ENCODING, "identity")));
        assert!(!compressed(&with(TRANSFER_ENCODING, "chunked")));
        assert!(compressed(&with(CONTENT_ENCODING, "gzip")));
        assert!(compressed(&with(TRANSFER_ENCODING, "gzip, chunked")));
        assert!(compressed(&with(TRANSFER_ENCODING, "Deflate,Chunked")));
    }
}
