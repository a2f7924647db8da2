//! A local HTTPS server for the `http_request` tests: a throwaway CA and a server certificate
//! for `localhost` and 127.0.0.1 (rcgen), TLS over tokio (tokio-rustls), and a tiny HTTP/1.1
//! responder that records every request it receives (method, path, headers) and answers from
//! the test's route function. The daemon trusts the CA through `SSL_CERT_FILE`.
//!
//! ```ignore
//! let ca = TestCa::new(dir.path())?;
//! let server = HttpsServer::start(&ca, |req| Reply::ok("hi")).await?;
//! let url = server.url("localhost", "/data");
//! ```

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result, bail};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::rustls::crypto::ring;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// The largest request head the responder reads.
const MAX_HEAD: usize = 64 * 1024;

/// A test certificate authority and the TLS configuration of a server it certified.
#[derive(Debug)]
pub struct TestCa {
    pem: PathBuf,
    config: Arc<ServerConfig>,
}

impl TestCa {
    /// Makes a CA (its certificate written to `dir/test-ca.pem`, for `SSL_CERT_FILE`) and a
    /// server certificate it signed for `localhost` and 127.0.0.1.
    pub fn new(dir: &Path) -> Result<TestCa> {
        let mut ca = CertificateParams::new(Vec::<String>::new())?;
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name
            .push(DnType::CommonName, "Postern test CA");
        ca.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca_key = KeyPair::generate()?;
        let ca_cert = ca.self_signed(&ca_key)?;
        let issuer = Issuer::new(ca, ca_key);

        let mut server =
            CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()])?;
        server
            .distinguished_name
            .push(DnType::CommonName, "localhost");
        server.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        server.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        let server_key = KeyPair::generate()?;
        let server_cert = server.signed_by(&server_key, &issuer)?;

        let pem = dir.join("test-ca.pem");
        std::fs::write(&pem, ca_cert.pem()).context("writing the test CA")?;
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(server_key.serialize_der()));
        let chain: Vec<CertificateDer<'static>> = vec![server_cert.der().clone()];
        let config = ServerConfig::builder_with_provider(Arc::new(ring::default_provider()))
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_single_cert(chain, key)?;
        Ok(TestCa {
            pem,
            config: Arc::new(config),
        })
    }

    /// The CA certificate's file (PEM), for `SSL_CERT_FILE`.
    pub fn pem_path(&self) -> &Path {
        &self.pem
    }
}

/// One request the server received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Received {
    /// `GET`, `POST`, ...
    pub method: String,
    /// The request target, e.g. `/data?x=1`.
    pub path: String,
    /// The headers, names in lower case, in order.
    pub headers: Vec<(String, String)>,
    /// The body, as text.
    pub body: String,
}

impl Received {
    /// The first value of header `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// What the server answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Reply {
    /// `200 OK` with `body`.
    pub fn ok(body: impl Into<String>) -> Reply {
        Reply {
            status: 200,
            headers: Vec::new(),
            body: body.into(),
        }
    }

    /// An empty answer with `status`.
    pub fn status(status: u16) -> Reply {
        Reply {
            status,
            headers: Vec::new(),
            body: String::new(),
        }
    }

    /// Adds a header.
    pub fn header(mut self, name: &str, value: &str) -> Reply {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }
}

/// An HTTPS server on 127.0.0.1 (reachable as `localhost` too), stopped on drop.
#[derive(Debug)]
pub struct HttpsServer {
    port: u16,
    received: Arc<Mutex<Vec<Received>>>,
    task: JoinHandle<()>,
}

impl HttpsServer {
    /// Starts serving, with a certificate from `ca`, answering each request with `route`.
    pub async fn start(
        ca: &TestCa,
        route: impl Fn(&Received) -> Reply + Send + Sync + 'static,
    ) -> Result<HttpsServer> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let port = listener.local_addr()?.port();
        let acceptor = TlsAcceptor::from(Arc::clone(&ca.config));
        let received = Arc::new(Mutex::new(Vec::new()));
        let route = Arc::new(route);
        let log = Arc::clone(&received);
        let task = tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let (acceptor, route, log) =
                    (acceptor.clone(), Arc::clone(&route), Arc::clone(&log));
                tokio::spawn(async move {
                    let Ok(mut tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let Ok(request) = read_request(&mut tls).await else {
                        return;
                    };
                    let reply = route(&request);
                    log.lock()
                        .unwrap_or_else(|poisoned| poisoned.into_inner())
                        .push(request);
                    let _ = tls.write_all(&render(&reply)).await;
                    let _ = tls.shutdown().await;
                });
            }
        });
        Ok(HttpsServer {
            port,
            received,
            task,
        })
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `https://<host>:<port><path>`.
    pub fn url(&self, host: &str, path: &str) -> String {
        format!("https://{host}:{}{path}", self.port)
    }

    /// Every request received so far, oldest first.
    pub fn received(&self) -> Vec<Received> {
        self.received
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    /// The last request received; fails if there was none.
    pub fn last(&self) -> Result<Received> {
        self.received()
            .pop()
            .context("the test server received no request")
    }
}

impl Drop for HttpsServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Reads one HTTP/1.1 request: the head up to the blank line, then `content-length` bytes.
async fn read_request<S: tokio::io::AsyncRead + Unpin>(stream: &mut S) -> Result<Received> {
    let mut buf = Vec::new();
    let head_end = loop {
        if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break at;
        }
        if buf.len() > MAX_HEAD {
            bail!("request head too long");
        }
        let mut chunk = [0u8; 4096];
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            bail!("the connection closed before the request head ended");
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut first = lines.next().unwrap_or_default().split(' ');
    let method = first.next().unwrap_or_default().to_owned();
    let path = first.next().unwrap_or_default().to_owned();
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let length: usize = headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = buf[head_end + 4..].to_vec();
    while body.len() < length {
        let mut chunk = [0u8; 4096];
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            break;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    Ok(Received {
        method,
        path,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    })
}

fn render(reply: &Reply) -> Vec<u8> {
    let mut out = format!(
        "HTTP/1.1 {} {}\r\ncontent-length: {}\r\nconnection: close\r\n",
        reply.status,
        reason(reply.status),
        reply.body.len()
    );
    for (k, v) in &reply.headers {
        out.push_str(&format!("{k}: {v}\r\n"));
    }
    out.push_str("\r\n");
    out.push_str(&reply.body);
    out.into_bytes()
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        301 => "Moved Permanently",
        302 => "Found",
        404 => "Not Found",
        _ => "Status",
    }
}
