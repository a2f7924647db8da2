//! The broker's cost (issue 15): the same HTTPS GET to a loopback host, made directly and made
//! through the broker (CONNECT, TLS intercepted, the placeholder swapped for the value, a new
//! upstream TLS connection), one connection per request both ways, in one run. Prints the
//! median of each and their ratio.
//!
//! `cargo bench -p postern-egress --bench broker`

use std::sync::Arc;
use std::time::{Duration, Instant};

use postern_egress::{Broker, Brokered, EgressSink, LaunchInfo};
use postern_vault::Secret;
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::rustls::crypto::ring;
use tokio_rustls::rustls::pki_types::{
    CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName,
};
use tokio_rustls::rustls::{ClientConfig, RootCertStore, ServerConfig};
use tokio_rustls::{TlsAcceptor, TlsConnector};

const ROUNDS: usize = 200;
const PLACEHOLDER: &str = "ghp_PLACEHOLDERxxxxxxxxxxxxxxxxxxxxxxxxxx";

struct Quiet;

impl EgressSink for Quiet {
    fn substituted(&self, _: &LaunchInfo, _: &[String], _: &str) {}
    fn leak(&self, _: &LaunchInfo, _: &[String], _: &str) {}
    fn may_substitute(&self, _: &LaunchInfo) -> bool {
        true
    }
}

fn client(roots: Vec<CertificateDer<'static>>) -> Arc<ClientConfig> {
    let mut store = RootCertStore::empty();
    store.add_parsable_certificates(roots);
    Arc::new(
        ClientConfig::builder_with_provider(Arc::new(ring::default_provider()))
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_root_certificates(store)
            .with_no_client_auth(),
    )
}

/// A loopback HTTPS host answering every request with a short body; its CA's certificate.
async fn upstream(dir: &std::path::Path) -> (u16, CertificateDer<'static>) {
    let mut ca = CertificateParams::new(Vec::<String>::new()).expect("params");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_key = KeyPair::generate().expect("key");
    let ca_cert = ca.self_signed(&ca_key).expect("ca");
    std::fs::write(dir.join("upstream-ca.pem"), ca_cert.pem()).expect("write");
    let issuer = Issuer::new(ca, ca_key);
    let leaf = CertificateParams::new(vec!["localhost".into()]).expect("params");
    let key = KeyPair::generate().expect("key");
    let cert = leaf.signed_by(&key, &issuer).expect("leaf");
    let config = ServerConfig::builder_with_provider(Arc::new(ring::default_provider()))
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_no_client_auth()
        .with_single_cert(
            vec![cert.der().clone()],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
        )
        .expect("config");
    let acceptor = TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                continue;
            };
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    if tls.read(&mut byte).await.unwrap_or(0) == 0 {
                        return;
                    }
                    head.push(byte[0]);
                }
                let _ = tls
                    .write_all(
                        b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok",
                    )
                    .await;
                let _ = tls.shutdown().await;
            });
        }
    });
    (port, ca_cert.der().clone())
}

/// One GET over TLS on `tcp` (already at the host, or tunnelled to it).
async fn get(tcp: TcpStream, config: &Arc<ClientConfig>) {
    let name = ServerName::try_from("localhost").expect("name");
    let mut tls = TlsConnector::from(Arc::clone(config))
        .connect(name, tcp)
        .await
        .expect("tls");
    let request = format!(
        "GET / HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {PLACEHOLDER}\r\nConnection: close\r\n\r\n"
    );
    tls.write_all(request.as_bytes()).await.expect("write");
    let mut answer = Vec::new();
    let _ = tls.read_to_end(&mut answer).await;
    assert!(
        answer.starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&answer)
    );
}

async fn connect_through(proxy: u16, port: u16) -> TcpStream {
    let mut tcp = TcpStream::connect(("127.0.0.1", proxy))
        .await
        .expect("proxy");
    tcp.write_all(
        format!("CONNECT localhost:{port} HTTP/1.1\r\nHost: localhost:{port}\r\n\r\n").as_bytes(),
    )
    .await
    .expect("connect");
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        tcp.read_exact(&mut byte).await.expect("read");
        head.push(byte[0]);
    }
    assert!(head.starts_with(b"HTTP/1.1 200"));
    tcp
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (port, upstream_ca) = upstream(dir.path()).await;
    let broker = Broker::start(
        &dir.path().join("egress"),
        Some(&dir.path().join("upstream-ca.pem")),
        Arc::new(Quiet),
    )
    .expect("broker");
    let launch = broker
        .open(
            "bench",
            vec![Brokered {
                credential: "token".into(),
                placeholder: PLACEHOLDER.into(),
                value: Secret::new("ghp_the-real-value".into()),
                hosts: vec!["localhost".into()],
                forms: Vec::new(),
            }],
            None,
        )
        .expect("open");
    let broker_ca: Vec<CertificateDer<'static>> = {
        use tokio_rustls::rustls::pki_types::pem::PemObject;
        CertificateDer::pem_file_iter(&broker.files().ca)
            .expect("ca")
            .map(|c| c.expect("cert"))
            .collect()
    };
    let direct_config = client(vec![upstream_ca]);
    let brokered_config = client(broker_ca);

    let mut direct = Vec::with_capacity(ROUNDS);
    let mut brokered = Vec::with_capacity(ROUNDS);
    for _ in 0..ROUNDS {
        let started = Instant::now();
        get(
            TcpStream::connect(("127.0.0.1", port)).await.expect("tcp"),
            &direct_config,
        )
        .await;
        direct.push(started.elapsed());
        let started = Instant::now();
        get(connect_through(launch.port(), port).await, &brokered_config).await;
        brokered.push(started.elapsed());
    }
    let (direct, brokered) = (median(direct), median(brokered));
    println!(
        "HTTPS GET to a loopback host, one connection per request, {ROUNDS} rounds interleaved:"
    );
    println!("  direct:            median {:>8.2?}", direct);
    println!("  through the broker: median {:>8.2?}", brokered);
    println!(
        "  ratio: {:.2}x (the broker adds a CONNECT, a second TLS handshake and a substitution)",
        brokered.as_secs_f64() / direct.as_secs_f64()
    );
}
