//! The egress broker (issue 15): the way out for a server that holds credential placeholders.
//!
//! A credential bound to hosts reaches a launch as a placeholder shaped like its value
//! (`postern_domain::credential::placeholder`); the server's code never holds the value. Its
//! HTTP(S) goes through the broker ([`Broker`]), one loopback listener per launch: the broker
//! intercepts TLS with an authority made at each engine start (its key only in memory), puts
//! the value in place of the placeholder in a request's headers only toward the credential's
//! hosts ([`substitute`]), and refuses, reports and freezes on a placeholder headed anywhere
//! else. What each runtime needs to go through it (proxy variables, a trust store, Node's
//! `fetch`) is in [`env`].

pub mod broker;
pub mod ca;
pub mod env;
pub mod redact;
pub mod substitute;

pub use broker::{Admission, Broker, EgressSink, Launch, LaunchInfo};
pub use substitute::{Brokered, Outcome};

/// Why the broker could not start or open a launch's way out.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EgressError {
    /// A file or a socket.
    #[error("egress broker: {0}")]
    Io(#[from] std::io::Error),
    /// Making a certificate.
    #[error("egress broker: a certificate could not be made: {0}")]
    Certificate(#[from] rcgen::Error),
    /// Setting up TLS.
    #[error("egress broker: TLS: {0}")]
    Tls(#[from] tokio_rustls::rustls::Error),
}
