//! The broker against a real HTTPS host on loopback and a client that goes through it as the
//! servers' runtimes do (CONNECT, then TLS trusting only the broker's authority): the value
//! reaches the bound host, a placeholder toward another host is refused, reported and freezes
//! the launch, and an absolute-URL request in the clear is decided the same way.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use postern_egress::{Broker, Brokered, EgressSink, LaunchInfo};
use postern_vault::Secret;
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::rustls::crypto::ring;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{
    CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName,
};
use tokio_rustls::rustls::{ClientConfig, RootCertStore, ServerConfig};
use tokio_rustls::{TlsAcceptor, TlsConnector};

const VALUE: &str = "ghp_the-real-value-4711";
// Shaped like the value (the same length), as `postern_domain::credential::placeholder` makes them.
const PLACEHOLDER: &str = "ghp_PLACEHOLDERxxxxxxxx";

#[derive(Default)]
struct Seen {
    substituted: Mutex<Vec<(String, String)>>,
    leaks: Mutex<Vec<(String, String)>>,
    /// The vault is locked: no value may go out.
    locked: AtomicBool,
}

impl EgressSink for Seen {
    fn substituted(&self, _: &LaunchInfo, credentials: &[String], host: &str) {
        let mut seen = self.substituted.lock().unwrap();
        seen.extend(credentials.iter().map(|c| (c.clone(), host.to_owned())));
    }
    fn leak(&self, _: &LaunchInfo, credentials: &[String], host: &str) {
        let mut seen = self.leaks.lock().unwrap();
        seen.extend(credentials.iter().map(|c| (c.clone(), host.to_owned())));
    }
    fn may_substitute(&self, _: &LaunchInfo) -> bool {
        !self.locked.load(Ordering::SeqCst)
    }
}

/// An HTTPS host for `localhost` and 127.0.0.1 (its own CA, written to `dir/upstream-ca.pem`)
/// that answers each request with the `authorization` header it received.
async fn upstream(dir: &Path) -> (u16, Arc<Mutex<Vec<String>>>) {
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_key = KeyPair::generate().unwrap();
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    std::fs::write(dir.join("upstream-ca.pem"), ca_cert.pem()).unwrap();
    let issuer = Issuer::new(ca, ca_key);
    let leaf = CertificateParams::new(vec!["localhost".into(), "127.0.0.1".into()]).unwrap();
    let key = KeyPair::generate().unwrap();
    let cert = leaf.signed_by(&key, &issuer).unwrap();
    let config = ServerConfig::builder_with_provider(Arc::new(ring::default_provider()))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![cert.der().clone()],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
        )
        .unwrap();
    let acceptor = TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let received = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&received);
    tokio::spawn(async move {
        loop {
            let (tcp, _) = listener.accept().await.unwrap();
            let (acceptor, seen) = (acceptor.clone(), Arc::clone(&seen));
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let head = read_head(&mut tls).await;
                let auth = header(&head, "authorization").unwrap_or_default();
                seen.lock().unwrap().push(auth.clone());
                let body = format!("auth={auth}");
                let answer = format!(
                    "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = tls.write_all(answer.as_bytes()).await;
                let _ = tls.shutdown().await;
            });
        }
    });
    (port, received)
}

async fn read_head<S: tokio::io::AsyncRead + Unpin>(stream: &mut S) -> String {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if stream.read(&mut byte).await.unwrap_or(0) == 0 {
            break;
        }
        head.push(byte[0]);
    }
    String::from_utf8_lossy(&head).into_owned()
}

fn header(head: &str, name: &str) -> Option<String> {
    head.lines().find_map(|line| {
        let (k, v) = line.split_once(':')?;
        k.eq_ignore_ascii_case(name).then(|| v.trim().to_owned())
    })
}

/// What a runtime does: CONNECT through the broker, TLS to `host` trusting the broker's
/// authority only, one GET with `authorization`. The status line and the body.
async fn get_through(proxy: u16, ca: &Path, host: &str, port: u16, auth: &str) -> String {
    get_through_as(proxy, ca, (host, port), host, auth).await
}

/// [`get_through`] with the request's `Host` header as `host_header` says.
async fn get_through_as(
    proxy: u16,
    ca: &Path,
    (host, port): (&str, u16),
    host_header: &str,
    auth: &str,
) -> String {
    let mut tcp = TcpStream::connect(("127.0.0.1", proxy)).await.unwrap();
    tcp.write_all(
        format!("CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n").as_bytes(),
    )
    .await
    .unwrap();
    let connected = read_head(&mut tcp).await;
    assert!(connected.starts_with("HTTP/1.1 200"), "{connected}");
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(ca).unwrap() {
        roots.add(cert.unwrap()).unwrap();
    }
    let config = ClientConfig::builder_with_provider(Arc::new(ring::default_provider()))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let name = ServerName::try_from(host.to_owned()).unwrap();
    let mut tls = TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
        .unwrap();
    let request = format!(
        "GET /user HTTP/1.1\r\nHost: {host_header}\r\nAuthorization: {auth}\r\nConnection: close\r\n\r\n"
    );
    tls.write_all(request.as_bytes()).await.unwrap();
    let mut answer = String::new();
    let _ = tls.read_to_string(&mut answer).await;
    answer
}

/// A launch holding `github`'s placeholder, bound to `localhost` on the upstream's `port`.
fn launch(port: u16) -> Vec<Brokered> {
    vec![Brokered {
        credential: "github".into(),
        placeholder: PLACEHOLDER.into(),
        value: Secret::new(VALUE.into()),
        hosts: vec![format!("localhost:{port}")],
        forms: Vec::new(),
    }]
}

/// A broker reporting to a fresh [`Seen`], its way out for [`launch`], and the upstream host.
struct Setup {
    _dir: tempfile::TempDir,
    /// The upstream host's port, and the `authorization` headers it received.
    port: u16,
    received: Arc<Mutex<Vec<String>>>,
    seen: Arc<Seen>,
    broker: Broker,
    way_out: postern_egress::Launch,
}

async fn setup() -> Setup {
    setup_bound(|port| format!("localhost:{port}")).await
}

/// [`setup`] with the credential bound to `host(port)` alone.
async fn setup_bound(host: impl FnOnce(u16) -> String) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let (port, received) = upstream(dir.path()).await;
    let seen = Arc::new(Seen::default());
    let broker = Broker::start(
        &dir.path().join("egress"),
        Some(&dir.path().join("upstream-ca.pem")),
        Arc::clone(&seen) as Arc<dyn EgressSink>,
    )
    .unwrap();
    let mut bound = launch(port);
    bound[0].hosts = vec![host(port)];
    let way_out = broker.open("fixture", bound, None).unwrap();
    Setup {
        _dir: dir,
        port,
        received,
        seen,
        broker,
        way_out,
    }
}

#[tokio::test]
async fn the_value_reaches_its_host_and_a_placeholder_anywhere_else_is_refused_and_freezes() {
    let Setup {
        _dir,
        port,
        received,
        seen,
        broker,
        way_out,
    } = setup().await;
    let proxy = way_out.port();
    let ca = broker.files().ca.clone();
    assert!(
        way_out
            .env()
            .contains(&("HTTPS_PROXY".into(), format!("http://127.0.0.1:{proxy}")))
    );

    let bearer = format!("Bearer {PLACEHOLDER}");
    let answer = get_through(proxy, &ca, "localhost", port, &bearer).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    // The host got the value (checked below); its echo comes back with the placeholder.
    assert!(
        answer.ends_with(&format!("auth=Bearer {PLACEHOLDER}")) && !answer.contains(VALUE),
        "{answer}"
    );
    assert_eq!(
        *seen.substituted.lock().unwrap(),
        [("github".to_owned(), format!("localhost:{port}"))]
    );

    // The same host under another name is another host: refused, reported, nothing sent.
    let answer = get_through(proxy, &ca, "127.0.0.1", port, &bearer).await;
    assert!(answer.starts_with("HTTP/1.1 403"), "{answer}");
    assert!(answer.contains("github"), "{answer}");
    assert!(!answer.contains(VALUE));
    assert_eq!(
        *seen.leaks.lock().unwrap(),
        [("github".to_owned(), format!("127.0.0.1:{port}"))]
    );
    assert!(way_out.frozen());
    // Frozen: the bound host gets no value either now.
    let answer = get_through(proxy, &ca, "localhost", port, &bearer).await;
    assert!(answer.starts_with("HTTP/1.1 403"), "{answer}");
    assert_eq!(
        *received.lock().unwrap(),
        [format!("Bearer {VALUE}")],
        "the host saw one request, with the value"
    );
    // A request without a placeholder still goes out.
    let answer = get_through(proxy, &ca, "127.0.0.1", port, "Basic eDp5").await;
    assert!(answer.ends_with("auth=Basic eDp5"), "{answer}");
}

/// A server that tunnels to the credential's host and names another site in `Host` (a front
/// that routes by `Host`, a CDN's or an ingress's, would hand the value to that site) gets
/// no value: refused as a leak, nothing sent, the launch frozen.
#[tokio::test]
async fn a_host_header_naming_another_site_gets_no_value() {
    let t = setup().await;
    let ca = t.broker.files().ca.clone();
    let bearer = format!("Bearer {PLACEHOLDER}");
    let proxy = t.way_out.port();
    let answer = get_through_as(
        proxy,
        &ca,
        ("localhost", t.port),
        "evil.tenant.example",
        &bearer,
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 403"), "{answer}");
    assert!(answer.contains("Host header"), "{answer}");
    assert!(t.received.lock().unwrap().is_empty(), "the host saw it");
    assert!(t.seen.substituted.lock().unwrap().is_empty());
    assert_eq!(
        *t.seen.leaks.lock().unwrap(),
        [("github".to_owned(), format!("localhost:{}", t.port))]
    );
    assert!(t.way_out.frozen());
}

/// A server that calls its service as `localhost` while its credential names the address
/// `127.0.0.1` (what `credential add` asks for: `localhost` is two addresses) gets the value
/// through, sent to that address, and is not frozen.
#[tokio::test]
async fn a_value_for_localhost_goes_to_the_address_its_credential_names() {
    let t = setup_bound(|port| format!("127.0.0.1:{port}")).await;
    let ca = t.broker.files().ca.clone();
    let bearer = format!("Bearer {PLACEHOLDER}");
    let answer = get_through(t.way_out.port(), &ca, "localhost", t.port, &bearer).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert_eq!(*t.received.lock().unwrap(), [format!("Bearer {VALUE}")]);
    assert!(!t.way_out.frozen());
    assert!(t.seen.leaks.lock().unwrap().is_empty());
    assert_eq!(
        *t.seen.substituted.lock().unwrap(),
        [("github".to_owned(), format!("localhost:{}", t.port))]
    );
}

/// A value bound to one port on this machine goes to no other port there, where any process
/// of the user's could listen: refused as a leak before anything connects, the launch frozen.
#[tokio::test]
async fn a_value_bound_to_a_loopback_port_goes_to_no_other_port() {
    let t = setup().await;
    let ca = t.broker.files().ca.clone();
    let bearer = format!("Bearer {PLACEHOLDER}");
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let other = listener.local_addr().unwrap().port();
    // (Were it let through, the broker would wait on a TLS handshake this listener never
    // makes: the wait is bounded.)
    let answer = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        get_through(t.way_out.port(), &ca, "localhost", other, &bearer),
    )
    .await
    .expect("the broker answered without connecting to the other port");
    assert!(answer.starts_with("HTTP/1.1 403"), "{answer}");
    assert!(
        answer.contains(&format!("toward localhost:{other}, where it may not go")),
        "{answer}"
    );
    assert!(!answer.contains(VALUE));
    let accepted =
        tokio::time::timeout(std::time::Duration::from_millis(200), listener.accept()).await;
    assert!(accepted.is_err(), "the other port was connected to");
    assert_eq!(
        *t.seen.leaks.lock().unwrap(),
        [("github".to_owned(), format!("localhost:{other}"))]
    );
    assert!(t.way_out.frozen());
    assert!(t.received.lock().unwrap().is_empty());
}

/// While the vault is locked the broker puts no value in a request, even for a launch whose
/// server should have stopped at the lock and did not; unlocked again, the value goes out.
#[tokio::test]
async fn no_value_goes_out_while_the_vault_is_locked() {
    let t = setup().await;
    let ca = t.broker.files().ca.clone();
    let bearer = format!("Bearer {PLACEHOLDER}");

    t.seen.locked.store(true, Ordering::SeqCst);
    let answer = get_through(t.way_out.port(), &ca, "localhost", t.port, &bearer).await;
    assert!(answer.starts_with("HTTP/1.1 403"), "{answer}");
    assert!(answer.contains("vault is locked"), "{answer}");
    assert!(
        t.received.lock().unwrap().is_empty(),
        "the host saw a request"
    );
    assert!(t.seen.substituted.lock().unwrap().is_empty());
    assert!(t.seen.leaks.lock().unwrap().is_empty(), "not a leak");
    assert!(!t.way_out.frozen(), "a lock does not freeze the launch");

    t.seen.locked.store(false, Ordering::SeqCst);
    let answer = get_through(t.way_out.port(), &ca, "localhost", t.port, &bearer).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert_eq!(*t.received.lock().unwrap(), [format!("Bearer {VALUE}")]);
}

#[tokio::test]
async fn a_closed_launch_takes_no_more_connections() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::start(
        &dir.path().join("egress"),
        None,
        Arc::new(Seen::default()) as Arc<dyn EgressSink>,
    )
    .unwrap();
    let way_out = broker
        .open("fixture", launch(443), Some("--max-old-space-size=64"))
        .unwrap();
    let options = way_out
        .env()
        .iter()
        .find(|(k, _)| k == "NODE_OPTIONS")
        .map(|(_, v)| v.clone())
        .unwrap();
    assert!(
        options.starts_with("--max-old-space-size=64 --require="),
        "{options}"
    );
    let port = way_out.port();
    drop(way_out);
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    assert!(TcpStream::connect(("127.0.0.1", port)).await.is_err());
}

/// Two calls of one launch borrow the same credential (the built-in `http_request`): each
/// answer gives back its own request's placeholder, never the other's; a placeholder taken
/// back gets nothing.
#[tokio::test]
async fn a_lent_placeholder_comes_back_only_to_its_own_request_and_not_after_it_is_taken_back() {
    let dir = tempfile::tempdir().unwrap();
    let (port, received) = upstream(dir.path()).await;
    let broker = Broker::start(
        &dir.path().join("egress"),
        Some(&dir.path().join("upstream-ca.pem")),
        Arc::new(Seen::default()) as Arc<dyn EgressSink>,
    )
    .unwrap();
    let way_out = broker.open("postern", Vec::new(), None).unwrap();
    let lend = |placeholder: &str| {
        way_out.admit(Brokered {
            credential: "github".into(),
            placeholder: placeholder.into(),
            value: Secret::new(VALUE.into()),
            hosts: vec!["localhost".into()],
            forms: Vec::new(),
        })
    };
    let first = lend("ghp_FIRSTxxxxxxxxxxxxxx");
    let second = lend("ghp_SECONDxxxxxxxxxxxxx");
    let ca = broker.files().ca.clone();
    let proxy = way_out.port();

    let answer = get_through(
        proxy,
        &ca,
        "localhost",
        port,
        "Bearer ghp_SECONDxxxxxxxxxxxxx",
    )
    .await;
    assert!(
        answer.ends_with("auth=Bearer ghp_SECONDxxxxxxxxxxxxx"),
        "{answer}"
    );
    assert!(
        !answer.contains("FIRST") && !answer.contains(VALUE),
        "{answer}"
    );
    assert_eq!(*received.lock().unwrap(), [format!("Bearer {VALUE}")]);

    // Taken back (the call ended, or the vault locked): the placeholder goes out as it is.
    first.revoke();
    let answer = get_through(
        proxy,
        &ca,
        "localhost",
        port,
        "Bearer ghp_FIRSTxxxxxxxxxxxxxx",
    )
    .await;
    assert!(
        answer.ends_with("auth=Bearer ghp_FIRSTxxxxxxxxxxxxxx"),
        "{answer}"
    );
    assert_eq!(
        received.lock().unwrap()[1],
        "Bearer ghp_FIRSTxxxxxxxxxxxxxx"
    );
    drop(second);
    let answer = get_through(
        proxy,
        &ca,
        "localhost",
        port,
        "Bearer ghp_SECONDxxxxxxxxxxxxx",
    )
    .await;
    assert_eq!(
        received.lock().unwrap()[2],
        "Bearer ghp_SECONDxxxxxxxxxxxxx",
        "{answer}"
    );
}
