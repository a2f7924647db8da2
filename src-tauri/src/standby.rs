//! A window process on standby: started by the resident while no window is open, it has loaded
//! and linked its libraries (WebKit's ~170: most of a window process's time before `main`) and
//! waits for its first show order before it starts anything of GTK or WebKit
//! ([`postern_desk::bridge::wait_for_show`]).
//!
//! While it waits, it gives back the pages of its program's and libraries' files that loading
//! touched and never wrote ([`give_back_file_pages`], Linux): they stay in the page cache, shared
//! with whatever else maps them, and come back on a minor fault when the window opens. What it
//! keeps is its own memory: the relocated data of its libraries and their constructors'
//! allocations.
//!
//! The one `unsafe` call is `madvise(MADV_DONTNEED)` (no safe binding exists: it drops pages of
//! whatever mapping it is given). It is given only private mappings of files that are not
//! writable and hold no anonymous (written, copy-on-write) page, per the kernel's own
//! `/proc/self/smaps`, read just before with no other thread running: their contents are the
//! file's, which is what a later access reads back.

/// Whether an order already waits on `bridge` (the process was started for a window, not on
/// standby): its pages are about to be used, and nothing is given back.
#[cfg(target_os = "linux")]
pub fn order_waiting(bridge: &std::os::unix::net::UnixStream) -> bool {
    use rustix::net::{RecvFlags, recv};
    let mut byte = [0u8];
    recv(bridge, &mut byte, RecvFlags::PEEK | RecvFlags::DONTWAIT).is_ok()
}

/// Elsewhere nothing is given back, so nothing is asked.
#[cfg(not(target_os = "linux"))]
pub fn order_waiting(_bridge: &std::os::unix::net::UnixStream) -> bool {
    true
}

/// Gives back the clean pages of this process's private, read-only file mappings; returns how
/// many bytes of mappings it advised. Call only while this process runs one thread.
#[cfg(target_os = "linux")]
pub fn give_back_file_pages() -> usize {
    let Ok(smaps) = std::fs::read_to_string("/proc/self/smaps") else {
        return 0;
    };
    clean_file_mappings(&smaps)
        .into_iter()
        .filter(|&(start, len)| advise_dont_need(start, len))
        .map(|(_, len)| len)
        .sum()
}

/// Elsewhere the program's pages are left as they are.
#[cfg(not(target_os = "linux"))]
pub fn give_back_file_pages() -> usize {
    0
}

/// The mappings of `smaps` (the text of `/proc/<pid>/smaps`) that are private, not writable,
/// of a file, and hold no anonymous page: (start, length) each.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
fn clean_file_mappings(smaps: &str) -> Vec<(usize, usize)> {
    let mut found = Vec::new();
    // The mapping being read, while it is still a candidate.
    let mut current: Option<(usize, usize)> = None;
    for line in smaps.lines() {
        if let Some(mapping) = header(line) {
            found.extend(current.take());
            current = mapping;
        } else if let Some(anonymous) = line.strip_prefix("Anonymous:")
            && anonymous.trim() != "0 kB"
        {
            current = None;
        }
    }
    found.extend(current);
    found
}

/// A mapping's header line (`start-end perms offset dev inode path`): `Some(Some(range))` when
/// it is a candidate, `Some(None)` when it is a mapping that is not, `None` when the line is not
/// a header.
fn header(line: &str) -> Option<Option<(usize, usize)>> {
    let mut fields = line.split_whitespace();
    let (start, end) = fields.next()?.split_once('-')?;
    let start = usize::from_str_radix(start, 16).ok()?;
    let end = usize::from_str_radix(end, 16).ok()?;
    let perms = fields.next()?.as_bytes();
    if perms.len() != 4 {
        return None;
    }
    let path = fields.nth(3);
    let candidate = perms[1] != b'w'
        && perms[3] == b'p'
        && path.is_some_and(|p| p.starts_with('/'))
        && end > start;
    Some(candidate.then(|| (start, end - start)))
}

#[cfg(target_os = "linux")]
#[allow(
    unsafe_code,
    reason = "madvise(MADV_DONTNEED) has no safe binding; given only clean, read-only, private file mappings (see the module's documentation)"
)]
fn advise_dont_need(start: usize, len: usize) -> bool {
    // SAFETY: [start, start + len) is one whole mapping of this process, read from its smaps
    // with no other thread running: private, not writable, of a file, with no anonymous page.
    // Dropping its pages loses nothing: the next access reads the same bytes from the file.
    unsafe {
        rustix::mm::madvise(
            start as *mut std::ffi::c_void,
            len,
            rustix::mm::Advice::LinuxDontNeed,
        )
    }
    .is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMAPS: &str = "\
55d0c0000000-55d0c0100000 r--p 00000000 08:01 100 /usr/bin/postern-app
Size:               1024 kB
Anonymous:             0 kB
55d0c0100000-55d0c0200000 r-xp 00100000 08:01 100 /usr/bin/postern-app
Anonymous:             0 kB
55d0c0200000-55d0c0210000 r--p 00200000 08:01 100 /usr/bin/postern-app
Anonymous:            64 kB
55d0c0210000-55d0c0220000 rw-p 00210000 08:01 100 /usr/bin/postern-app
Anonymous:            64 kB
7f0000000000-7f0000001000 r--s 00000000 08:01 200 /var/cache/fontconfig/x.cache
Anonymous:             0 kB
7f0000001000-7f0000002000 r--p 00000000 00:00 0
Anonymous:             0 kB
7ffd00000000-7ffd00001000 r-xp 00000000 00:00 0                          [vdso]
Anonymous:             0 kB
7f0000010000-7f0000020000 r-xp 00000000 08:01 300 /usr/lib/libwebkit2gtk-4.1.so.0 (deleted)
Anonymous:             0 kB
";

    #[test]
    fn only_clean_private_read_only_file_mappings_are_given_back() {
        assert_eq!(
            clean_file_mappings(SMAPS),
            [
                (0x55d0c0000000, 0x100000),
                (0x55d0c0100000, 0x100000),
                (0x7f0000010000, 0x10000),
            ],
            "the relocated read-only data (anonymous pages), the writable data, a shared \
             mapping, anonymous memory and the vDSO are kept"
        );
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_process_that_gave_back_its_file_pages_runs_on_from_them() {
        // In a process of its own (this test alone, the harness's other thread waiting for
        // it): its resident set shrinks, and it runs on, from code and data in those pages.
        if std::env::var_os("POSTERN_STANDBY_CHILD").is_some() {
            let rss = || {
                let status = std::fs::read_to_string("/proc/self/status").unwrap();
                let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
                line.split_whitespace()
                    .nth(1)
                    .unwrap()
                    .parse::<u64>()
                    .unwrap()
            };
            let before = rss();
            let given = give_back_file_pages();
            let after = rss();
            assert!(given > 0, "nothing given back");
            assert!(
                after < before,
                "resident {before} kB before, {after} kB after"
            );
            println!("{given} bytes given back: resident {before} kB, then {after} kB");
            return;
        }
        let exe = std::env::current_exe().unwrap();
        let out = std::process::Command::new(exe)
            .args([
                "--exact",
                "standby::tests::a_process_that_gave_back_its_file_pages_runs_on_from_them",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("POSTERN_STANDBY_CHILD", "1")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(stdout.contains("bytes given back"), "{stdout}");
    }
}
