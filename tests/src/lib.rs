//! The end-to-end harness: drive the real `postern` binary with a real MCP client (rmcp's)
//! against real MCP servers, and compare what an agent sees through Postern with what it sees
//! talking to the same server directly.
//!
//! - [`gate::Gate`]: a temporary Postern home with servers configured, and `postern daemon`.
//! - [`client::Client`]: an rmcp client session over stdio, either [`client::Client::direct`]
//!   (the server command itself) or [`client::Client::through`] (`postern mcp <label>`).
//! - [`keychain`]: a private, unlocked Secret Service (D-Bus + gnome-keyring) per gate.
//! - [`https`]: a local HTTPS server with a test CA, for the built-in `http_request`.
//! - [`wire`]: a tap on the client's stdio that keeps the exact JSON it sent and received.
//! - [`servers`]: the third-party test peers installed by `scripts/setup-test-deps.sh`.
//! - [`fixture`]: what reached the project's fixture server, by its own account.
//! - [`compare`]: JSON comparisons with readable failure messages.
//! - [`fuzz`]: the gate's fuzz driver (framing and parsing against hostile input).
//! - [`binaries`]: finds (and builds, under cargo) `postern` and the fixture server.
//! - [`run_as`]: a gate whose processes run as another user (the polkit tests).

pub mod agents;
pub mod binaries;
pub mod client;
pub mod compare;
pub mod fixture;
pub mod fuzz;
pub mod gate;
pub mod https;
pub mod human;
pub mod keychain;
pub mod model;
pub mod raw;
pub mod rebuild;
pub mod run_as;
pub mod servers;
pub mod tty;
pub mod wire;

pub use client::{Client, Profile, Seen};
pub use gate::Gate;
pub use servers::ServerCommand;

/// Runs a test scenario with an overall deadline, so a request left hanging fails the test
/// with a message instead of hanging CI.
pub async fn within<T>(
    limit: std::time::Duration,
    scenario: impl Future<Output = anyhow::Result<T>>,
) -> anyhow::Result<T> {
    match tokio::time::timeout(limit, scenario).await {
        Ok(result) => result,
        Err(_) => anyhow::bail!("the scenario did not finish within {limit:?}"),
    }
}
