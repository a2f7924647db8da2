//! A process's table entry from macOS's libproc: `proc_pidinfo(PROC_PIDTBSDINFO)` gives its
//! parent, names, state, flags and start time to the microsecond (sysinfo rounds the start to
//! the second, so a pid reused within one second would pass for the process it replaced).
//!
//! The conversions from the kernel's record are plain functions, tested on every platform;
//! the one call into libproc is in [`sys`], built on macOS only.

use super::{Child, Proc};

/// `p_stat` of a process that exited and was not yet reaped (`<sys/proc.h>`).
const SZOMB: u32 = 5;
/// `pbi_flags`: a debugger (ptrace) is attached (`<sys/proc_info.h>`).
const PROC_FLAG_TRACED: u32 = 2;

/// The fields of a `struct proc_bsdinfo` the table reads, as plain values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BsdInfo {
    /// `pbi_comm`: the executable's name, cut to 16 bytes, NUL-padded.
    pub comm: [u8; 16],
    /// `pbi_name`: the process's name, up to 32 bytes, NUL-padded (may be empty).
    pub name: [u8; 32],
    /// `pbi_ppid`.
    pub ppid: u32,
    /// `pbi_status`: the `p_stat` value (`SZOMB` for a zombie).
    pub status: u32,
    /// `pbi_flags` (`PROC_FLAG_*`).
    pub flags: u32,
    /// `pbi_start_tvsec`: the start, whole seconds since the epoch.
    pub start_sec: u64,
    /// `pbi_start_tvusec`: the microseconds past `start_sec`.
    pub start_usec: u64,
}

impl BsdInfo {
    /// The table's entry: the longer name when the kernel has one, the start in microseconds.
    pub fn proc(&self) -> Proc {
        let name = match c_string(&self.name) {
            name if name.is_empty() => c_string(&self.comm),
            name => name,
        };
        Proc {
            name,
            ppid: self.ppid,
            start_time: start_time(self.start_sec, self.start_usec),
        }
    }

    /// Whether the process exited and waits to be reaped.
    pub fn is_zombie(&self) -> bool {
        self.status == SZOMB
    }

    /// Whether a debugger is attached to it.
    pub fn is_traced(&self) -> bool {
        self.flags & PROC_FLAG_TRACED != 0
    }
}

/// A start time in the table's macOS unit, microseconds since the epoch: exact to the
/// kernel's own resolution, so two processes given one pid never share it.
pub(crate) fn start_time(sec: u64, usec: u64) -> u64 {
    sec.saturating_mul(1_000_000)
        .saturating_add(usec.min(999_999))
}

/// The text before the first NUL (all of it when there is none), invalid UTF-8 replaced.
fn c_string(bytes: &[u8]) -> String {
    let end = bytes.iter().position(|b| *b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

/// The live children among `candidates` (pids the caller found with `parent` as their
/// parent), each re-read: a pid that exited, became a zombie or now has another parent
/// (it was reused) since the caller looked is left out.
pub(crate) fn live_children(
    parent: u32,
    candidates: impl IntoIterator<Item = u32>,
    info: impl Fn(u32) -> Option<BsdInfo>,
) -> Vec<Child> {
    candidates
        .into_iter()
        .filter_map(|pid| {
            let bsd = info(pid)?;
            let proc = bsd.proc();
            (proc.ppid == parent && !bsd.is_zombie()).then_some(Child {
                pid,
                start_time: proc.start_time,
                name: proc.name,
            })
        })
        .collect()
}

#[cfg(target_os = "macos")]
pub(crate) use sys::{children, is_traced, read};

/// The calls into libproc. Its only `unsafe` is `proc_pidinfo` writing one `proc_bsdinfo`.
#[cfg(target_os = "macos")]
#[allow(
    unsafe_code,
    reason = "libproc's proc_pidinfo is a C call that fills a caller-owned struct; no safe binding exists without bindgen"
)]
mod sys {
    use std::mem::MaybeUninit;

    use super::{BsdInfo, Child, Proc, live_children};

    const _: () = assert!(super::SZOMB == libc::SZOMB);

    /// The table's entry for `pid`, or `None` when it has none (gone, or not ours to read).
    pub(crate) fn read(pid: u32) -> Option<Proc> {
        info(pid).map(|bsd| bsd.proc())
    }

    /// Every live child of `parent`: the candidates sysinfo lists, each re-read here so its
    /// start time is in this backend's unit.
    pub(crate) fn children(parent: u32) -> Vec<Child> {
        let candidates = super::super::portable::children(parent)
            .into_iter()
            .map(|c| c.pid);
        live_children(parent, candidates, info)
    }

    /// Whether a debugger is attached to `pid` (`None`: the kernel would not say).
    pub(crate) fn is_traced(pid: u32) -> Option<bool> {
        info(pid).map(|bsd| bsd.is_traced())
    }

    /// `proc_pidinfo(pid, PROC_PIDTBSDINFO)`, or `None` when it fails.
    fn info(pid: u32) -> Option<BsdInfo> {
        let pid = libc::c_int::try_from(pid).ok()?;
        let size = libc::c_int::try_from(size_of::<libc::proc_bsdinfo>()).ok()?;
        let mut raw = MaybeUninit::<libc::proc_bsdinfo>::zeroed();
        // SAFETY: the buffer is a `proc_bsdinfo` we own, `size` bytes long, and the flavour
        // asks for exactly that struct; the kernel writes at most `size` bytes into it.
        let written = unsafe {
            libc::proc_pidinfo(
                pid,
                libc::PROC_PIDTBSDINFO,
                0,
                raw.as_mut_ptr().cast(),
                size,
            )
        };
        if written != size {
            return None;
        }
        // SAFETY: zeroed, then filled by the kernel; every field is an integer or an array
        // of `c_char`, for which any bytes are a valid value.
        let raw = unsafe { raw.assume_init() };
        Some(BsdInfo {
            comm: raw.pbi_comm.map(|c| c as u8),
            name: raw.pbi_name.map(|c| c as u8),
            ppid: raw.pbi_ppid,
            status: raw.pbi_status,
            flags: raw.pbi_flags,
            start_sec: raw.pbi_start_tvsec,
            start_usec: raw.pbi_start_tvusec,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn padded<const N: usize>(s: &str) -> [u8; N] {
        let mut out = [0; N];
        out[..s.len()].copy_from_slice(s.as_bytes());
        out
    }

    fn sample() -> BsdInfo {
        BsdInfo {
            comm: padded("node"),
            name: padded("claude"),
            ppid: 812,
            status: 2,   // SRUN
            flags: 0x10, // PROC_FLAG_LP64
            start_sec: 1_764_700_000,
            start_usec: 123_456,
        }
    }

    #[test]
    fn the_start_time_keeps_the_microseconds() {
        assert_eq!(start_time(1_764_700_000, 123_456), 1_764_700_000_123_456);
        // Two processes started within one second (a reused pid) are told apart, which
        // whole seconds (sysinfo's unit) could not do.
        assert_ne!(start_time(1_764_700_000, 1), start_time(1_764_700_000, 2));
        // Out-of-range input never wraps into another second or overflows.
        assert_eq!(start_time(5, 2_000_000), 5_999_999);
        assert_eq!(start_time(u64::MAX, 7), u64::MAX);
        // As a JavaScript number (the app's bindings), today's value is still exact.
        assert!(start_time(4_102_444_800, 999_999) < 1 << 53, "year 2100");
    }

    #[test]
    fn the_entry_takes_the_longer_name_and_the_parent() {
        let bsd = sample();
        assert_eq!(
            bsd.proc(),
            Proc {
                name: "claude".into(),
                ppid: 812,
                start_time: 1_764_700_000_123_456,
            }
        );
        let unnamed = BsdInfo {
            name: [0; 32],
            ..sample()
        };
        assert_eq!(unnamed.proc().name, "node");
        // A name filling its whole field has no NUL: all of it is the name.
        let full = BsdInfo {
            comm: *b"abcdefghijklmnop",
            name: [0; 32],
            ..sample()
        };
        assert_eq!(full.proc().name, "abcdefghijklmnop");
        let odd = BsdInfo {
            name: padded("caf\u{e9}"),
            ..sample()
        };
        assert_eq!(odd.proc().name, "café");
        let mut broken = sample();
        broken.name[..2].copy_from_slice(&[0xff, b'x']);
        broken.name[2] = 0;
        assert_eq!(broken.proc().name, "\u{fffd}x");
    }

    #[test]
    fn zombies_and_traced_processes_are_recognised() {
        assert!(!sample().is_zombie());
        assert!(
            BsdInfo {
                status: 5,
                ..sample()
            }
            .is_zombie()
        );
        assert!(!sample().is_traced());
        assert!(
            BsdInfo {
                flags: 0x12,
                ..sample()
            }
            .is_traced()
        );
    }

    #[test]
    fn children_are_re_read_and_the_gone_the_dead_and_the_reused_left_out() {
        let info = |pid: u32| match pid {
            10 => Some(BsdInfo {
                ppid: 1,
                ..sample()
            }),
            11 => Some(BsdInfo {
                status: SZOMB,
                ppid: 1,
                ..sample()
            }),
            12 => None,
            13 => Some(BsdInfo {
                ppid: 99,
                ..sample()
            }),
            _ => Some(BsdInfo {
                ppid: 1,
                name: padded("sh"),
                start_usec: 7,
                ..sample()
            }),
        };
        assert_eq!(
            live_children(1, [10, 11, 12, 13, 14], info),
            [
                Child {
                    pid: 10,
                    start_time: 1_764_700_000_123_456,
                    name: "claude".into(),
                },
                Child {
                    pid: 14,
                    start_time: 1_764_700_000_000_007,
                    name: "sh".into(),
                },
            ]
        );
    }
}
