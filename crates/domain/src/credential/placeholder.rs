//! Placeholders (issue 15): what a launch holds in place of a credential bound to hosts. The
//! server's code sees a value of the same shape (the same known prefix and the same length, so
//! a server that checks its token's look at start still starts), and the egress broker puts
//! the real value in its place only in a request's headers, only toward the credential's hosts.
//!
//! A placeholder is made from fresh randomness for each launch (each epoch), so one seen in a
//! request names the launch and the credential it was given for, and a placeholder copied out
//! of one launch is worth nothing in another. The randomness is passed in: this module does no
//! I/O.

/// Prefixes token issuers put on their values (longest first), kept as they are so a
/// placeholder looks like the value it stands for.
const KNOWN_PREFIXES: &[&str] = &[
    "github_pat_",
    "sk-ant-api03-",
    "sk-ant-",
    "sk-proj-",
    "glpat-",
    "xoxb-",
    "xoxp-",
    "xapp-",
    "ghp_",
    "gho_",
    "ghu_",
    "ghs_",
    "ghr_",
    "npm_",
    "pypi-",
    "hf_",
    "sk_live_",
    "sk_test_",
    "rk_live_",
    "sk-",
    "AKIA",
];

/// The fewest random characters a placeholder carries (62 symbols each: about 143 bits), so
/// that one is never guessed and never occurs by chance in other text.
pub const MIN_RANDOM_CHARS: usize = 24;

/// The bytes of randomness [`placeholder`] needs at most for a value of `len` bytes.
pub fn randomness_needed(len: usize) -> usize {
    len.max(MIN_RANDOM_CHARS) + KNOWN_PREFIXES.iter().map(|p| p.len()).max().unwrap_or(0)
}

/// A placeholder for `value`: its known prefix, then random letters and digits up to the
/// value's length (at least [`MIN_RANDOM_CHARS`] of them), drawn from `random`, which must hold
/// at least [`randomness_needed`] bytes. Never the value itself.
pub fn placeholder(value: &str, random: &[u8]) -> String {
    const ALPHABET: &[u8; 62] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let prefix = KNOWN_PREFIXES
        .iter()
        .find(|p| value.starts_with(**p))
        .copied()
        .unwrap_or("");
    let body = value
        .len()
        .saturating_sub(prefix.len())
        .max(MIN_RANDOM_CHARS);
    assert!(
        random.len() >= body,
        "placeholder: {} random bytes given, {body} needed",
        random.len()
    );
    let mut out = String::with_capacity(prefix.len() + body);
    out.push_str(prefix);
    // 62 does not divide 256: the first 248 values map evenly, the rest are folded, a bias of
    // at most 1 in 31 on 8 symbols that leaves well over 128 bits in 24 characters.
    out.extend(
        random[..body]
            .iter()
            .map(|b| char::from(ALPHABET[usize::from(*b) % ALPHABET.len()])),
    );
    if out == value {
        // Astronomically unlikely; still, a placeholder that equals the value hides nothing.
        out.push('0');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn random(seed: u8) -> Vec<u8> {
        (0..randomness_needed(200))
            .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
            .collect()
    }

    #[test]
    fn a_known_token_keeps_its_prefix_and_length() {
        let github = "ghp_0123456789abcdefghijABCDEFGHIJ012345";
        let shaped = placeholder(github, &random(1));
        assert!(shaped.starts_with("ghp_"), "{shaped}");
        assert_eq!(shaped.len(), github.len());
        assert_ne!(shaped, github);
        assert!(shaped[4..].chars().all(|c| c.is_ascii_alphanumeric()));

        let anthropic = format!("sk-ant-api03-{}", "x".repeat(95));
        let shaped = placeholder(&anthropic, &random(2));
        assert!(shaped.starts_with("sk-ant-api03-"));
        assert_eq!(shaped.len(), anthropic.len());
    }

    #[test]
    fn an_unknown_or_short_value_gets_enough_randomness() {
        let shaped = placeholder("hunter2", &random(3));
        assert_eq!(shaped.len(), MIN_RANDOM_CHARS);
        assert!(!shaped.contains("hunter2"));
        let long = "a".repeat(64);
        assert_eq!(placeholder(&long, &random(4)).len(), 64);
    }

    #[test]
    fn each_launch_gets_another_placeholder() {
        let value = "ghp_0123456789abcdefghijABCDEFGHIJ012345";
        assert_ne!(
            placeholder(value, &random(5)),
            placeholder(value, &random(6))
        );
    }
}
