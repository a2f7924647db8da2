//! What a launch needs to go out through the broker, in its runtimes' own terms: the proxy
//! variables (and, for Node's `fetch`, which reads none of them before Node 22.21, a preload
//! that routes it), and a trust store holding the platform's roots and the broker's authority
//! (each runtime reads its own variable). Written once per engine start into the home.

use std::path::{Path, PathBuf};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use tokio_rustls::rustls::pki_types::CertificateDer;

use crate::EgressError;

/// The files a launch's environment points at.
#[derive(Debug, Clone)]
pub struct Files {
    /// The broker's authority alone (PEM): `NODE_EXTRA_CA_CERTS` adds it to Node's roots.
    pub ca: PathBuf,
    /// The platform's roots and the broker's authority (PEM), for runtimes that take one
    /// file in place of the platform's (OpenSSL's `SSL_CERT_FILE`, requests, curl).
    pub bundle: PathBuf,
    /// The preload that routes Node's `fetch` through the broker.
    pub node: PathBuf,
}

/// Writes the files into `dir` (made private to the user).
pub fn write_files(
    dir: &Path,
    ca_pem: &str,
    roots: &[CertificateDer<'static>],
) -> Result<Files, EgressError> {
    std::fs::create_dir_all(dir)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    }
    let files = Files {
        ca: dir.join("ca.pem"),
        bundle: dir.join("bundle.pem"),
        node: dir.join("node-egress.cjs"),
    };
    std::fs::write(&files.ca, ca_pem)?;
    let mut bundle = String::new();
    for root in roots {
        bundle.push_str(&pem(root));
    }
    bundle.push_str(ca_pem);
    std::fs::write(&files.bundle, bundle)?;
    std::fs::write(&files.node, NODE_PRELOAD)?;
    Ok(files)
}

/// The environment of a launch whose broker listens on `port`.
pub fn launch_env(files: &Files, port: u16, node_options: Option<&str>) -> Vec<(String, String)> {
    let proxy = format!("http://127.0.0.1:{port}");
    let path = |p: &Path| p.display().to_string();
    let mut env: Vec<(String, String)> = Vec::new();
    for name in [
        "HTTPS_PROXY",
        "https_proxy",
        "HTTP_PROXY",
        "http_proxy",
        "ALL_PROXY",
        "all_proxy",
    ] {
        env.push((name.into(), proxy.clone()));
    }
    // Postern's own built-in server reads these (it ignores the variables above).
    env.push(("POSTERN_EGRESS_PROXY".into(), proxy.clone()));
    env.push(("POSTERN_EGRESS_CA".into(), path(&files.ca)));
    // Nothing bypasses the broker, loopback included.
    env.push(("NO_PROXY".into(), String::new()));
    env.push(("no_proxy".into(), String::new()));
    for name in ["SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"] {
        env.push((name.into(), path(&files.bundle)));
    }
    env.push(("NODE_EXTRA_CA_CERTS".into(), path(&files.ca)));
    // Node 22.21 and 24 route fetch and http(s) by the proxy variables when told to.
    env.push(("NODE_USE_ENV_PROXY".into(), "1".into()));
    let preload = format!("--require={}", path(&files.node));
    let options = match node_options {
        Some(own) if !own.trim().is_empty() => format!("{own} {preload}"),
        _ => preload,
    };
    env.push(("NODE_OPTIONS".into(), options));
    env
}

fn pem(der: &CertificateDer<'_>) -> String {
    let text = BASE64.encode(der.as_ref());
    let mut out = String::from("-----BEGIN CERTIFICATE-----\n");
    for line in text.as_bytes().chunks(64) {
        out.push_str(std::str::from_utf8(line).unwrap_or_default());
        out.push('\n');
    }
    out.push_str("-----END CERTIFICATE-----\n");
    out
}

/// Routes Node's `fetch` (undici) through the broker on Node versions that ignore the proxy
/// variables: the global dispatcher becomes an agent of undici's own class whose connections
/// are CONNECT tunnels through the proxy (TLS inside them, checked against Node's roots plus
/// NODE_EXTRA_CA_CERTS). Node's http and https modules are left to the libraries that read the
/// proxy variables.
const NODE_PRELOAD: &str = r#"// Written by Postern (crates/egress/src/env.rs): routes fetch() through the egress broker.
'use strict';
(function postern_egress() {
  const proxy = process.env.HTTPS_PROXY || process.env.https_proxy;
  if (!proxy || typeof globalThis.fetch !== 'function') return;
  const symbol = Symbol.for('undici.globalDispatcher.1');
  // The first fetch makes undici's global agent; its class is the one to build ours with.
  try { globalThis.fetch('http://127.0.0.1:0/').catch(() => {}); } catch (_) { return; }
  const Agent = globalThis[symbol] && globalThis[symbol].constructor;
  // A Node that routes by the proxy variables itself has another agent there: leave it.
  if (typeof Agent !== 'function' || Agent.name !== 'Agent') return;
  const net = require('net');
  const tls = require('tls');
  const via = new URL(proxy);
  function connect(opts, callback) {
    const https = opts.protocol === 'https:';
    const port = Number(opts.port) || (https ? 443 : 80);
    const host = opts.hostname;
    const socket = net.connect(Number(via.port) || 80, via.hostname);
    let settled = false;
    const fail = (err) => {
      if (settled) return;
      settled = true;
      socket.destroy();
      callback(err, null);
    };
    socket.once('error', fail);
    socket.once('connect', () => {
      socket.write('CONNECT ' + host + ':' + port + ' HTTP/1.1\r\nHost: ' + host + ':' + port + '\r\n\r\n');
    });
    let head = Buffer.alloc(0);
    const onData = (chunk) => {
      head = Buffer.concat([head, chunk]);
      const end = head.indexOf('\r\n\r\n');
      if (end < 0) return;
      socket.removeListener('data', onData);
      const status = head.subarray(0, head.indexOf('\r\n')).toString('latin1');
      if (!/^HTTP\/1\.[01] 200/.test(status)) return fail(new Error('the egress broker refused the tunnel: ' + status));
      if (!https) {
        settled = true;
        return callback(null, socket);
      }
      const secure = tls.connect({ socket, servername: opts.servername || host, ALPNProtocols: ['http/1.1'] });
      secure.once('error', fail);
      secure.once('secureConnect', () => {
        if (settled) return;
        settled = true;
        callback(null, secure);
      });
    };
    socket.on('data', onData);
  }
  globalThis[symbol] = new Agent({ connect });
})();
"#;
