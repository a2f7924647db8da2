//! A launch writes no Python bytecode cache beside the code it imports: the caches are part of
//! the identity (Python loads a planted one), so a launch that wrote them would change the
//! identity a person approved, and the next launch would ask again.

use postern_domain::ServerConfig;
use postern_supervisor::{DigestCache, Given, launch_with};

#[tokio::test]
async fn a_python_server_imports_its_modules_without_writing_their_caches() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("server.py"), "import helper\n").expect("write");
    std::fs::write(dir.path().join("helper.py"), "MARK = 1\n").expect("write");
    let config = ServerConfig::new(
        "bytecode".parse().expect("label"),
        vec!["python3".into(), "server.py".into()],
        Some(dir.path().to_owned()),
        vec![],
    )
    .expect("config");
    let launched = launch_with(&config, &DigestCache::new(), |_| Given::default()).expect("launch");
    let report = launched.spawned.handle.exited().await;
    assert_eq!(
        report.to_string(),
        "exit status 0",
        "the server ran and imported"
    );
    assert!(
        !dir.path().join("__pycache__").exists(),
        "the import wrote a cache"
    );
}
