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
//! writable and hold no anonymous (written, copy-on-write) page, in memory or swapped out, per
//! the kernel's own `/proc/self/smaps`, read just before: their contents are the file's, which
//! is what a later access reads back. Nothing unmaps or replaces a file mapping meanwhile: the
//! main thread is here, and the one other thread at this point (JavaScriptCore's heap
//! scavenger, started by its library's initializer) maps and returns only its own anonymous
//! memory.
//!
//! A process that waited long may find on waking that its libraries were replaced on disk
//! meanwhile (an upgrade): it would start a new web process against the old WebKit in memory.
//! [`libraries_replaced`] tells it to leave instead, and the resident gives its window to a new
//! process.

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
/// many bytes of mappings it advised. Call before the process starts threads of its own.
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
        } else if let Some(written) = line
            .strip_prefix("Anonymous:")
            .or_else(|| line.strip_prefix("Swap:"))
            && written.trim() != "0 kB"
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

/// Whether a file this process mapped was replaced or removed since (`(deleted)` in its
/// `/proc/self/maps`; the kernel's own memory files aside). Elsewhere: false.
pub fn libraries_replaced() -> bool {
    #[cfg(target_os = "linux")]
    {
        std::fs::read_to_string("/proc/self/maps").is_ok_and(|maps| replaced(&maps))
    }
    #[cfg(not(target_os = "linux"))]
    {
        false
    }
}

/// Whether `maps` (the text of `/proc/<pid>/maps`) names a file mapping whose file is gone.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
fn replaced(maps: &str) -> bool {
    maps.lines().any(|line| {
        line.split_once(" /").is_some_and(|(_, path)| {
            path.ends_with(" (deleted)")
                && !path.starts_with("memfd:")
                && !path.starts_with("SYSV")
                && !path.starts_with("dev/")
        })
    })
}

#[cfg(target_os = "linux")]
#[allow(
    unsafe_code,
    reason = "madvise(MADV_DONTNEED) has no safe binding; given only clean, read-only, private file mappings (see the module's documentation)"
)]
fn advise_dont_need(start: usize, len: usize) -> bool {
    // SAFETY: [start, start + len) is one whole mapping of this process, just read from its
    // smaps: private, not writable, of a file, with no anonymous page in memory or in swap; no
    // thread of this process unmaps or replaces file mappings meanwhile (module documentation).
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
7f0000020000-7f0000030000 r--p 00000000 08:01 400 /usr/lib/libjavascriptcoregtk-4.1.so.0
Anonymous:             0 kB
Swap:                  8 kB
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
            "the relocated read-only data (written pages, in memory or swapped out), the \
             writable data, a shared mapping, anonymous memory and the vDSO are kept"
        );
    }

    #[test]
    fn a_library_replaced_on_disk_is_told_from_the_kernel_s_own_memory_files() {
        let fresh = "7f00-7f10 r-xp 0 08:01 300 /usr/lib/libwebkit2gtk-4.1.so.0\n\
                     7f10-7f20 rw-s 0 00:01 9 /memfd:wayland-shm (deleted)\n\
                     7f20-7f30 rw-s 0 00:01 9 /SYSV00000000 (deleted)\n\
                     7f30-7f40 rw-s 0 00:05 9 /dev/shm/x (deleted)\n";
        assert!(!replaced(fresh));
        let upgraded = format!(
            "{fresh}7f40-7f50 r-xp 0 08:01 301 /usr/lib/libjavascriptcoregtk-4.1.so.0 (deleted)\n"
        );
        assert!(replaced(&upgraded));
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_process_that_gave_back_its_file_pages_runs_on_from_them() {
        // In a process of its own (this test alone, the harness's other thread waiting for
        // it): its resident set shrinks, every byte of what it gave back reads the same after,
        // and it runs on, from code and data in those pages.
        if std::env::var_os("POSTERN_STANDBY_CHILD").is_some() {
            // Each mapping's bytes, read through /proc/self/mem, hashed (None: unreadable).
            let contents = |ranges: &[(usize, usize)]| -> Vec<Option<u64>> {
                use std::hash::{DefaultHasher, Hash, Hasher};
                use std::io::{Read, Seek, SeekFrom};
                let mut mem = std::fs::File::open("/proc/self/mem").unwrap();
                ranges
                    .iter()
                    .map(|&(start, len)| {
                        let mut bytes = vec![0u8; len];
                        mem.seek(SeekFrom::Start(start as u64)).ok()?;
                        mem.read_exact(&mut bytes).ok()?;
                        let mut hasher = DefaultHasher::new();
                        bytes.hash(&mut hasher);
                        Some(hasher.finish())
                    })
                    .collect()
            };
            let ranges = clean_file_mappings(&std::fs::read_to_string("/proc/self/smaps").unwrap());
            let read_before = contents(&ranges);
            assert!(read_before.iter().flatten().count() > 0, "nothing read");
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
            assert_eq!(contents(&ranges), read_before, "the same bytes read back");
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
