//! The TCP link between a coordinator and a worker's agent: a mutual challenge–response
//! handshake on a shared token, then the JSON lines of [`super::protocol`].
//!
//! The token (env [`TOKEN_ENV`]) never crosses the wire: each side proves it knows it with an
//! HMAC-SHA256 of the other side's fresh nonce, so a recorded handshake cannot be replayed and
//! a rogue coordinator cannot hand workers a job. The link is not encrypted (see docs/distributed.md,
//! "Workers on other hosts"): it carries no secret, since passwords come from each side's environment.

use hmac::{Hmac, KeyInit, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// The environment variable holding the shared token.
pub const TOKEN_ENV: &str = "LOCKBENCH_TOKEN";
/// Shortest token accepted: 128 bits as hex.
pub const TOKEN_MIN_LEN: usize = 32;
/// Bumped when the messages change: a worker of another build is refused at the handshake.
pub const PROTOCOL_VERSION: u32 = 2;

/// Coordinator → agent, first line.
#[derive(Debug, Serialize, Deserialize)]
pub struct Challenge {
    /// The coordinator's protocol version.
    pub version: u32,
    /// Fresh random bytes, hex.
    pub nonce: String,
}

/// Agent → coordinator, the answer.
#[derive(Debug, Serialize, Deserialize)]
pub struct Hello {
    /// The agent's protocol version.
    pub version: u32,
    /// The worker index it claims.
    pub index: u32,
    /// HMAC of the coordinator's nonce and the index.
    pub mac: String,
    /// The agent's own fresh nonce, for the coordinator to answer.
    pub nonce: String,
    /// `/proc/sys/kernel/random/boot_id`: equal to the coordinator's means one host, one clock.
    pub boot_id: String,
    /// Host name, for reports.
    pub host: String,
}

/// Coordinator → agent: accepted (with the coordinator's proof) or refused, and why.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// HMAC of the agent's nonce.
    Welcome { mac: String },
    /// Why the connection is refused; the coordinator closes it.
    Rejected { reason: String },
}

/// The shared token from the environment, checked for length.
pub fn token_from_env() -> Result<String, String> {
    let t = std::env::var(TOKEN_ENV).map_err(|_| {
        format!(
            "{TOKEN_ENV} is not set: coordinator and workers share a token of at least \
             {TOKEN_MIN_LEN} characters (e.g. `export {TOKEN_ENV}=$(openssl rand -hex 16)`)"
        )
    })?;
    if t.len() < TOKEN_MIN_LEN {
        return Err(format!(
            "{TOKEN_ENV} has {} characters; at least {TOKEN_MIN_LEN} are needed",
            t.len()
        ));
    }
    Ok(t)
}

/// A random token for a run whose workers this process starts itself.
pub fn fresh_token() -> String {
    nonce()
}

/// 16 random bytes as hex.
pub fn nonce() -> String {
    let bytes: [u8; 16] = rand::random();
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn mac_of(token: &str, parts: &[&[u8]]) -> Hmac<Sha256> {
    let mut m = Hmac::<Sha256>::new_from_slice(token.as_bytes()).expect("HMAC takes any key");
    for p in parts {
        // Length-prefixed, so ("ab","c") and ("a","bc") differ.
        m.update(&(p.len() as u64).to_le_bytes());
        m.update(p);
    }
    m
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// The agent's proof: HMAC(token, "worker", coordinator nonce, index).
pub fn worker_mac(token: &str, nonce: &str, index: u32) -> String {
    let m = mac_of(token, &[b"worker", nonce.as_bytes(), &index.to_le_bytes()]);
    hex(&m.finalize().into_bytes())
}

/// The coordinator's proof: HMAC(token, "coordinator", agent nonce).
pub fn coordinator_mac(token: &str, nonce: &str) -> String {
    hex(&mac_of(token, &[b"coordinator", nonce.as_bytes()])
        .finalize()
        .into_bytes())
}

/// Checks an agent's proof in constant time.
pub fn verify_worker(token: &str, nonce: &str, index: u32, mac: &str) -> bool {
    let m = mac_of(token, &[b"worker", nonce.as_bytes(), &index.to_le_bytes()]);
    unhex(mac).is_some_and(|b| m.verify_slice(&b).is_ok())
}

/// Checks the coordinator's proof in constant time.
pub fn verify_coordinator(token: &str, nonce: &str, mac: &str) -> bool {
    let m = mac_of(token, &[b"coordinator", nonce.as_bytes()]);
    unhex(mac).is_some_and(|b| m.verify_slice(&b).is_ok())
}

/// Longest line accepted during the handshake (a peer that is not lockbench cannot make the
/// coordinator buffer without bound).
const HANDSHAKE_LINE: usize = 4096;

/// Writes one JSON line.
pub async fn send<T: Serialize>(w: &mut (impl AsyncWrite + Unpin), v: &T) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(v).map_err(std::io::Error::other)?;
    line.push(b'\n');
    w.write_all(&line).await?;
    w.flush().await
}

/// Reads one JSON line of the handshake.
pub async fn recv<T: for<'de> Deserialize<'de>>(
    r: &mut (impl AsyncBufRead + Unpin),
) -> std::io::Result<T> {
    let mut line = String::new();
    let n = (&mut *r)
        .take(HANDSHAKE_LINE as u64)
        .read_line(&mut line)
        .await?;
    if n == 0 {
        return Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            "the peer closed the connection",
        ));
    }
    serde_json::from_str(line.trim_end()).map_err(|e| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!(
                "not a lockbench handshake line ({e}): {:?}",
                line.trim_end()
            ),
        )
    })
}

/// The boot id an agent reports: this host's, or the test knob's [`FAKE_BOOT_ID_ENV`] (empty
/// when unreadable: then no coordinator counts it as its own host).
pub fn reported_boot_id() -> String {
    std::env::var(FAKE_BOOT_ID_ENV).unwrap_or_else(|_| super::clock::boot_id().unwrap_or_default())
}

/// Test knob: a worker that reports this boot id is treated as another host (its clock offset
/// is estimated by ping instead of known to be zero).
pub const FAKE_BOOT_ID_ENV: &str = "LOCKBENCH_TEST_BOOT_ID";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proofs_verify_only_with_the_same_token_nonce_and_index() {
        let t = "0123456789abcdef0123456789abcdef";
        let mac = worker_mac(t, "n1", 3);
        assert!(verify_worker(t, "n1", 3, &mac));
        assert!(!verify_worker(t, "n1", 4, &mac), "another index");
        assert!(!verify_worker(t, "n2", 3, &mac), "another nonce (a replay)");
        assert!(!verify_worker("x".repeat(32).as_str(), "n1", 3, &mac));
        assert!(!verify_worker(t, "n1", 3, "zz"));
        let c = coordinator_mac(t, "w");
        assert!(verify_coordinator(t, "w", &c));
        // The two proofs are domain-separated: a worker's answer is no coordinator's.
        assert!(!verify_coordinator(t, "n1", &mac));
    }

    #[test]
    fn nonces_are_fresh() {
        assert_ne!(nonce(), nonce());
        assert_eq!(nonce().len(), 32);
    }
}
