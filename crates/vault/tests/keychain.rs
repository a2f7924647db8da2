//! The real OS keychain: a round trip through the platform store (on Linux, the Secret
//! Service; run inside `dbus-run-session` with an unlocked gnome-keyring, as scripts/test.sh
//! does). Fails, with a message saying so, when there is no keychain: a skipped test would
//! pass without testing anything.

use postern_vault::{Keychain, SecretStore};

#[test]
fn the_os_keychain_stores_reads_back_and_deletes_binary_secrets() {
    let home = tempfile::tempdir().expect("tempdir");
    let keychain = Keychain::for_home(home.path());
    let other = Keychain::for_home(&home.path().join("other"));
    let value: Vec<u8> = (0..=255u8).rev().collect();

    if let Err(e) = keychain.set("vault-test", &value) {
        panic!(
            "no usable OS keychain ({}: {e}); on Linux run inside `dbus-run-session` with \
             `printf pass | gnome-keyring-daemon --unlock --components=secrets`",
            e.code()
        );
    }
    // A second handle (a new keyring Entry) sees it: the value lives in the platform store.
    let again = Keychain::for_home(home.path());
    assert_eq!(
        again
            .get("vault-test")
            .expect("get")
            .expect("present")
            .expose(),
        &value
    );
    // Another home's namespace does not.
    assert!(other.get("vault-test").expect("get other").is_none());

    keychain.set("vault-test", b"replaced").expect("replace");
    assert_eq!(
        keychain
            .get("vault-test")
            .expect("get")
            .expect("present")
            .expose(),
        b"replaced"
    );
    assert!(keychain.delete("vault-test").expect("delete"));
    assert!(!keychain.delete("vault-test").expect("delete again"));
    assert!(
        keychain
            .get("vault-test")
            .expect("get after delete")
            .is_none()
    );
}
