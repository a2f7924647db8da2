//! The broker: for each launch that holds placeholders, a listener of its own on loopback
//! (the port tells the broker which launch a connection comes from), speaking HTTP/1.1 proxy:
//!
//! - `CONNECT host:port` opens a tunnel; TLS inside it is answered with a leaf of the broker's
//!   authority for the name the client asked for, and each request in it goes to the CONNECT
//!   target (plain HTTP inside a tunnel goes there too);
//! - an absolute URL (`GET http://host/...`, or `https://` from clients that send those to a
//!   proxy in the clear) goes to its host.
//!
//! Each request is decided by [`substitute::decide`] against the place it goes, then sent on
//! its own upstream connection (TLS verified against the platform's roots). Redirects are the
//! client's to follow: each hop is a new request, decided afresh for its own host.

use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::Incoming;
use hyper::header::{HOST, HeaderValue};
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode, Uri};
use hyper_util::rt::TokioIo;
use postern_domain::ExecutionEpoch;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::rustls::crypto::ring;
use tokio_rustls::rustls::pki_types::ServerName;
use tokio_rustls::rustls::server::Acceptor;
use tokio_rustls::rustls::{ClientConfig, RootCertStore};
use tokio_rustls::{LazyConfigAcceptor, TlsConnector};

use crate::EgressError;
use crate::ca::Authority;
use crate::env::{self, Files};
use crate::redact::{self, Redacting, Swaps};
use crate::substitute::{self, Brokered, Outcome, Route};

type Body = BoxBody<Bytes, hyper::Error>;

/// How many hosts a frozen launch's refused requests are reported toward (audited, counted in
/// the journal, told to the person); the rest are refused all the same.
const MAX_REPORTED: usize = 16;

/// Where the broker reports what it did (the engine: the audit log, the person).
pub trait EgressSink: Send + Sync {
    /// `credentials`' values were put in a request of `launch` to `to` (its host, and its port
    /// unless the scheme's own).
    fn substituted(&self, launch: &LaunchInfo, credentials: &[String], to: &str);
    /// A request of `launch` carried `credentials`' placeholders toward `to` (as above),
    /// where they may not go (or the launch was frozen): it was refused, and the launch is
    /// frozen.
    fn leak(&self, launch: &LaunchInfo, credentials: &[String], to: &str);
    /// Whether credential values may go out in `launch`'s requests now: `false` while the
    /// vault is locked. Asked before each request a value would be put in; a launch whose
    /// server should have stopped at the lock still gets no value from the broker.
    fn may_substitute(&self, launch: &LaunchInfo) -> bool;
}

/// Which launch a request came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaunchInfo {
    /// The server's label.
    pub server: String,
    /// Its epoch (known once the process started).
    pub epoch: Option<ExecutionEpoch>,
}

/// The broker of one engine run.
pub struct Broker {
    ca: Arc<Authority>,
    upstream: Arc<ClientConfig>,
    files: Files,
    sink: Arc<dyn EgressSink>,
}

impl std::fmt::Debug for Broker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Broker")
            .field("files", &self.files)
            .finish_non_exhaustive()
    }
}

impl Broker {
    /// A broker with a new authority, its files written into `dir`. Upstream TLS is verified
    /// against the platform's roots (read as `rustls-native-certs` does: `SSL_CERT_FILE` and
    /// `SSL_CERT_DIR` replace them) and the certificates in `extra_ca`, a PEM file the person
    /// names (a corporate proxy's CA, a test's).
    pub fn start(
        dir: &Path,
        extra_ca: Option<&Path>,
        sink: Arc<dyn EgressSink>,
    ) -> Result<Broker, EgressError> {
        use tokio_rustls::rustls::pki_types::CertificateDer;
        use tokio_rustls::rustls::pki_types::pem::PemObject;

        let ca = Authority::generate()?;
        let found = rustls_native_certs::load_native_certs();
        for error in &found.errors {
            tracing::warn!("a platform root could not be read: {error}");
        }
        let files = env::write_files(dir, ca.pem(), &found.certs)?;
        let mut roots = RootCertStore::empty();
        let (added, ignored) = roots.add_parsable_certificates(found.certs);
        if let Some(path) = extra_ca {
            let extra = CertificateDer::pem_file_iter(path)
                .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
                .map_err(|e| {
                    std::io::Error::other(format!("the CA file {}: {e}", path.display()))
                })?;
            roots.add_parsable_certificates(extra);
        }
        tracing::debug!(added, ignored, "egress broker: platform roots");
        let mut upstream = ClientConfig::builder_with_provider(Arc::new(ring::default_provider()))
            .with_safe_default_protocol_versions()?
            .with_root_certificates(roots)
            .with_no_client_auth();
        upstream.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Broker {
            ca: Arc::new(ca),
            upstream: Arc::new(upstream),
            files,
            sink,
        })
    }

    /// The files launches' environments point at.
    pub fn files(&self) -> &Files {
        &self.files
    }

    /// Opens the way out for a launch of `server` holding `brokered` placeholders: a listener
    /// of its own on loopback, closed when the [`Launch`] is dropped. `node_options` is the
    /// server's own `NODE_OPTIONS`, kept in front of the broker's. Needs a tokio runtime.
    pub fn open(
        &self,
        server: &str,
        brokered: Vec<Brokered>,
        node_options: Option<&str>,
    ) -> Result<Launch, EgressError> {
        let listener = std::net::TcpListener::bind(("127.0.0.1", 0))?;
        listener.set_nonblocking(true)?;
        let port = listener.local_addr()?.port();
        let shared = Arc::new(Shared {
            info: Mutex::new(LaunchInfo {
                server: server.to_owned(),
                epoch: None,
            }),
            brokered: RwLock::new(brokered),
            frozen: AtomicBool::new(false),
            reported: Mutex::new(std::collections::HashSet::new()),
            ca: Arc::clone(&self.ca),
            upstream: Arc::clone(&self.upstream),
            sink: Arc::clone(&self.sink),
        });
        let listener = TcpListener::from_std(listener)?;
        // The same way out as a Unix socket, for a confined launch whose network namespace
        // has its own loopback (a relay inside serves it on the same port).
        let dir = self.files.ca.parent().unwrap_or(Path::new("."));
        let socket = dir.join(format!("launch-{port}.sock"));
        let _ = std::fs::remove_file(&socket);
        let unix = tokio::net::UnixListener::bind(&socket)?;
        let tasks = [
            tokio::spawn(accept(listener, Arc::clone(&shared))).abort_handle(),
            tokio::spawn(accept(unix, Arc::clone(&shared))).abort_handle(),
        ];
        Ok(Launch {
            env: env::launch_env(&self.files, port, node_options),
            port,
            socket,
            shared,
            tasks,
        })
    }
}

/// One launch's way out: its listener, and what its process's environment must hold.
pub struct Launch {
    env: Vec<(String, String)>,
    port: u16,
    socket: PathBuf,
    shared: Arc<Shared>,
    tasks: [tokio::task::AbortHandle; 2],
}

impl std::fmt::Debug for Launch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Launch")
            .field("port", &self.port)
            .field("frozen", &self.frozen())
            .finish_non_exhaustive()
    }
}

impl Launch {
    /// The proxy and trust variables the launch's process needs.
    pub fn env(&self) -> &[(String, String)] {
        &self.env
    }

    /// The loopback port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The Unix socket it listens on too (removed with the launch).
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// Names the launch's epoch (for what the broker reports), once the process started.
    pub fn set_epoch(&self, epoch: ExecutionEpoch) {
        self.shared
            .info
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .epoch = Some(epoch);
    }

    /// Whether a leak attempt froze it: no request of it gets a value any more.
    pub fn frozen(&self) -> bool {
        self.shared.frozen.load(Ordering::SeqCst)
    }

    /// Adds a placeholder for as long as the returned [`Admission`] lives (the built-in
    /// `http_request` holds one per call: the placeholder of a finished call gets nothing).
    pub fn admit(&self, brokered: Brokered) -> Admission {
        let placeholder = brokered.placeholder.clone();
        self.shared
            .brokered
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .push(brokered);
        Admission {
            shared: Arc::downgrade(&self.shared),
            placeholder,
        }
    }
}

/// A placeholder a launch holds for a while ([`Launch::admit`]); dropping it takes the
/// placeholder back.
pub struct Admission {
    shared: Weak<Shared>,
    placeholder: String,
}

impl std::fmt::Debug for Admission {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Admission")
    }
}

impl Admission {
    /// Takes the placeholder back now (dropping the admission does too).
    pub fn revoke(&self) {
        if let Some(shared) = self.shared.upgrade() {
            shared
                .brokered
                .write()
                .unwrap_or_else(|e| e.into_inner())
                .retain(|b| b.placeholder != self.placeholder);
        }
    }
}

impl Drop for Admission {
    fn drop(&mut self) {
        self.revoke();
    }
}

impl Drop for Launch {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
        let _ = std::fs::remove_file(&self.socket);
        // Tunnels opened before get no value any more either (their placeholders go out as
        // they are, worthless).
        self.shared
            .brokered
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }
}

struct Shared {
    info: Mutex<LaunchInfo>,
    /// The placeholders it holds: those of its launch, and the built-in's per call.
    brokered: RwLock<Vec<Brokered>>,
    frozen: AtomicBool,
    /// The hosts a leak attempt of this launch was reported toward: a frozen launch that keeps
    /// trying is refused every time, reported once per host.
    reported: Mutex<std::collections::HashSet<String>>,
    ca: Arc<Authority>,
    upstream: Arc<ClientConfig>,
    sink: Arc<dyn EgressSink>,
}

impl Shared {
    fn info(&self) -> LaunchInfo {
        self.info.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// Where a request goes: the host the broker connects to (and decides by).
#[derive(Debug, Clone)]
struct Destination {
    host: String,
    port: u16,
    tls: bool,
}

impl Destination {
    /// Where it goes as a URL names it (and a `Host` header): the host, an IPv6 address in
    /// brackets, and the port unless it is the scheme's own.
    fn shown(&self) -> String {
        let host = match self.host.contains(':') {
            true => format!("[{}]", self.host),
            false => self.host.clone(),
        };
        let default = if self.tls { 443 } else { 80 };
        match self.port == default {
            true => host,
            false => format!("{host}:{}", self.port),
        }
    }
}

/// A listener of proxy connections: loopback TCP, or the Unix socket a confined launch's relay
/// reaches.
trait Listen: Send + 'static {
    type Stream: AsyncRead + AsyncWrite + Unpin + Send + 'static;
    fn next(&self) -> impl Future<Output = std::io::Result<Self::Stream>> + Send;
}

impl Listen for TcpListener {
    type Stream = TcpStream;
    async fn next(&self) -> std::io::Result<TcpStream> {
        self.accept().await.map(|(stream, _)| stream)
    }
}

impl Listen for tokio::net::UnixListener {
    type Stream = tokio::net::UnixStream;
    async fn next(&self) -> std::io::Result<tokio::net::UnixStream> {
        self.accept().await.map(|(stream, _)| stream)
    }
}

async fn accept(listener: impl Listen, shared: Arc<Shared>) {
    loop {
        let stream = match listener.next().await {
            Ok(stream) => stream,
            Err(e) => {
                tracing::warn!("egress broker: accept failed: {e}");
                continue;
            }
        };
        let shared = Arc::clone(&shared);
        tokio::spawn(async move {
            let service = service_fn(move |req| proxy(req, Arc::clone(&shared)));
            if let Err(e) = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .with_upgrades()
                .await
            {
                tracing::debug!("egress broker: a proxy connection ended: {e}");
            }
        });
    }
}

async fn proxy(
    req: Request<Incoming>,
    shared: Arc<Shared>,
) -> Result<Response<Body>, hyper::Error> {
    if req.method() == Method::CONNECT {
        let Some((host, port)) = req
            .uri()
            .authority()
            .and_then(|a| Some((bare(a.host()), a.port_u16()?)))
        else {
            return Ok(said(StatusCode::BAD_REQUEST, "CONNECT names host:port"));
        };
        tokio::spawn(async move {
            match hyper::upgrade::on(req).await {
                Ok(upgraded) => tunnel(TokioIo::new(upgraded), host, port, shared).await,
                Err(e) => tracing::debug!("egress broker: the tunnel did not open: {e}"),
            }
        });
        return Ok(Response::new(empty()));
    }
    let uri = req.uri().clone();
    let tls = match uri.scheme_str() {
        Some("https") => true,
        Some("http") => false,
        _ => {
            return Ok(said(
                StatusCode::BAD_REQUEST,
                "a request to a proxy names its URL in full (http:// or https://)",
            ));
        }
    };
    let Some(host) = uri.host().map(bare) else {
        return Ok(said(StatusCode::BAD_REQUEST, "the URL has no host"));
    };
    let port = uri.port_u16().unwrap_or(if tls { 443 } else { 80 });
    forward(req, Destination { host, port, tls }, shared).await
}

/// A tunnel to `host:port`: TLS inside it is intercepted, plain HTTP served as it is.
async fn tunnel<I>(mut io: I, host: String, port: u16, shared: Arc<Shared>)
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let mut first = [0u8; 1];
    if !matches!(io.read(&mut first).await, Ok(1)) {
        return;
    }
    let io = Prefixed {
        prefix: Some(first[0]),
        inner: io,
    };
    // 0x16: a TLS handshake record.
    if first[0] != 0x16 {
        let dest = Destination {
            host,
            port,
            tls: false,
        };
        return serve(TokioIo::new(io), dest, shared).await;
    }
    let start = match LazyConfigAcceptor::new(Acceptor::default(), io).await {
        Ok(start) => start,
        Err(e) => return tracing::debug!("egress broker: no TLS hello: {e}"),
    };
    // The leaf answers for the name the client asked for; the request still goes, and is
    // decided, by the CONNECT target.
    let name = start
        .client_hello()
        .server_name()
        .map_or_else(|| host.clone(), str::to_owned);
    let config = match shared.ca.server_config(&name) {
        Ok(config) => config,
        Err(e) => return tracing::warn!("egress broker: no certificate for {name}: {e}"),
    };
    match start.into_stream(config).await {
        Ok(stream) => {
            let dest = Destination {
                host,
                port,
                tls: true,
            };
            serve(TokioIo::new(stream), dest, shared).await;
        }
        Err(e) => tracing::debug!("egress broker: TLS with the server failed: {e}"),
    }
}

async fn serve<I>(io: TokioIo<I>, dest: Destination, shared: Arc<Shared>)
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = service_fn(move |req| forward(req, dest.clone(), Arc::clone(&shared)));
    if let Err(e) = hyper::server::conn::http1::Builder::new()
        .serve_connection(io, service)
        .await
    {
        tracing::debug!("egress broker: a tunnelled connection ended: {e}");
    }
}

/// Decides a request and, when it may go, sends it on and hands back the answer.
async fn forward(
    mut req: Request<Incoming>,
    dest: Destination,
    shared: Arc<Shared>,
) -> Result<Response<Body>, hyper::Error> {
    let target = req.uri().clone();
    let frozen = shared.frozen.load(Ordering::SeqCst);
    let (outcome, swaps, address) = {
        let brokered = shared.brokered.read().unwrap_or_else(|e| e.into_inner());
        let address = substitute::local_address(&dest.host, dest.port, &brokered);
        let route = Route {
            host: &dest.host,
            port: dest.port,
            tls: dest.tls,
            address,
        };
        let outcome = substitute::decide(req.headers_mut(), &target, route, &brokered, frozen);
        let address = address.map(str::to_owned);
        // The answer gives back the placeholders this request carried, and no other.
        let carried: &[String] = match &outcome {
            Outcome::Forward { placeholders, .. } => placeholders,
            Outcome::Leak { .. } => &[],
        };
        let swaps = Swaps::for_launch(&brokered, carried);
        (outcome, swaps, address)
    };
    match outcome {
        Outcome::Leak { credentials, why } => {
            shared.frozen.store(true, Ordering::SeqCst);
            // Once per host, and for at most MAX_REPORTED hosts: a launch trying host after
            // host is refused every time, without a record each.
            let first = {
                let mut reported = shared.reported.lock().unwrap_or_else(|e| e.into_inner());
                reported.len() < MAX_REPORTED && reported.insert(dest.shown())
            };
            if first {
                let info = shared.info();
                tracing::warn!(server = %info.server, to = %dest.shown(), ?credentials, ?why, "egress broker: a placeholder where it may not go; refused, the launch is frozen");
                shared.sink.leak(&info, &credentials, &dest.shown());
            }
            return Ok(said(
                StatusCode::FORBIDDEN,
                &format!(
                    "Postern's egress broker refused this request: it carries the placeholder of {} {}. This launch gets no credential value until a person looks.",
                    credentials.join(", "),
                    why.reason(&dest.shown())
                ),
            ));
        }
        Outcome::Forward { substituted, .. } if !substituted.is_empty() => {
            let info = shared.info();
            if !shared.sink.may_substitute(&info) {
                // The request (with the values already in its headers) is dropped here.
                tracing::warn!(server = %info.server, host = %dest.host, "egress broker: a request for a credential while the vault is locked; refused");
                return Ok(said(
                    StatusCode::FORBIDDEN,
                    "Postern's egress broker refused this request: Postern's vault is locked, and no credential value goes out until a person unlocks it.",
                ));
            }
            shared.sink.substituted(&info, &substituted, &dest.shown());
        }
        Outcome::Forward { .. } => {}
    }
    let path = target.path_and_query().map_or("/", |p| p.as_str());
    *req.uri_mut() = path.parse().unwrap_or_else(|_| Uri::from_static("/"));
    // A request that carries a value goes to the destination by name too: its Host (which
    // named the same host, or it was refused above) is written as the broker connects.
    if (!req.headers().contains_key(HOST) || !swaps.is_empty())
        && let Ok(value) = HeaderValue::from_str(&dest.shown())
    {
        req.headers_mut().insert(HOST, value);
    }
    req.headers_mut().remove("proxy-authorization");
    req.headers_mut().remove("proxy-connection");
    if !swaps.is_empty() {
        // A whole, uncompressed answer, which the broker can take the values back out of.
        for name in [
            hyper::header::ACCEPT_ENCODING,
            hyper::header::RANGE,
            hyper::header::IF_RANGE,
        ] {
            req.headers_mut().remove(name);
        }
    }
    // A value for this machine by name goes to the address its credential names.
    let connect = match address {
        Some(address) if !swaps.is_empty() => address,
        _ => dest.host.clone(),
    };
    match send(req, &dest, &connect, &shared.upstream).await {
        Ok(response) if swaps.is_empty() => Ok(response.map(BodyExt::boxed)),
        Ok(response) if redact::compressed(response.headers()) => Ok(said(
            StatusCode::BAD_GATEWAY,
            &format!(
                "Postern's egress broker refused {}'s answer: it came compressed though asked not to be, so the broker cannot check that it carries no credential value",
                dest.host
            ),
        )),
        Ok(mut response) => {
            swaps.headers(response.headers_mut());
            // A reason phrase hyper kept would be written back as it came.
            response
                .extensions_mut()
                .remove::<hyper::ext::ReasonPhrase>();
            Ok(response.map(|body| Redacting::new(body, swaps).boxed()))
        }
        Err(why) => Ok(said(
            StatusCode::BAD_GATEWAY,
            &format!(
                "Postern's egress broker could not reach {}:{}: {why}",
                dest.host, dest.port
            ),
        )),
    }
}

/// Sends `req` to `dest` over a connection to `connect` (its host, or the address of this
/// machine its credential names), TLS verified for `dest`'s host.
async fn send(
    req: Request<Incoming>,
    dest: &Destination,
    connect: &str,
    upstream: &Arc<ClientConfig>,
) -> Result<Response<Incoming>, String> {
    let tcp = TcpStream::connect((connect, dest.port))
        .await
        .map_err(|e| e.to_string())?;
    if !dest.tls {
        return exchange(TokioIo::new(tcp), req).await;
    }
    let name = ServerName::try_from(dest.host.clone()).map_err(|e| e.to_string())?;
    let tls = TlsConnector::from(Arc::clone(upstream))
        .connect(name, tcp)
        .await
        .map_err(|e| format!("TLS: {e}"))?;
    exchange(TokioIo::new(tls), req).await
}

async fn exchange<I>(io: TokioIo<I>, req: Request<Incoming>) -> Result<Response<Incoming>, String>
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, connection) = hyper::client::conn::http1::handshake(io)
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            tracing::debug!("egress broker: an upstream connection ended: {e}");
        }
    });
    sender.send_request(req).await.map_err(|e| e.to_string())
}

/// A host as the broker connects to and compares it: an IPv6 address without brackets.
fn bare(host: &str) -> String {
    host.trim_start_matches('[')
        .trim_end_matches(']')
        .to_ascii_lowercase()
}

fn empty() -> Body {
    Empty::<Bytes>::new()
        .map_err(|never| match never {})
        .boxed()
}

fn said(status: StatusCode, text: &str) -> Response<Body> {
    let mut response = Response::new(
        Full::new(Bytes::from(format!("{text}\n")))
            .map_err(|never| match never {})
            .boxed(),
    );
    *response.status_mut() = status;
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

/// A stream with one byte read ahead put back in front.
struct Prefixed<I> {
    prefix: Option<u8>,
    inner: I,
}

impl<I: AsyncRead + Unpin> AsyncRead for Prefixed<I> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        if let Some(byte) = self.prefix.take() {
            buf.put_slice(&[byte]);
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<I: AsyncWrite + Unpin> AsyncWrite for Prefixed<I> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, data)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::Destination;

    #[test]
    fn a_destination_is_shown_as_a_url_names_it() {
        let shown = |host: &str, port, tls| {
            Destination {
                host: host.into(),
                port,
                tls,
            }
            .shown()
        };
        assert_eq!(shown("api.github.com", 443, true), "api.github.com");
        assert_eq!(shown("localhost", 80, false), "localhost");
        assert_eq!(shown("localhost", 443, false), "localhost:443");
        assert_eq!(shown("localhost", 8080, true), "localhost:8080");
        // An IPv6 address with a port is bracketed (a Host header must be).
        assert_eq!(shown("::1", 8443, true), "[::1]:8443");
        assert_eq!(shown("::1", 443, true), "[::1]");
    }
}
