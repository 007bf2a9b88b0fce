//! The one clock every liveness test and every expiry reads: the lease
//! clock, in microseconds since 2000-01-01 (PostgreSQL's own
//! representation), so that it is stored and printed as a timestamp.
//!
//! Preloaded, it moves only with real time while the server runs (contract
//! 2.2): `CLOCK_MONOTONIC` plus an offset in shared memory, set at server
//! start so that it reads the wall clock there (or goes on from where the
//! last run left it: `init`). A step of the wall clock (NTP, a VM
//! migrated) then changes no lease's remaining time, and a suspended host
//! (which `CLOCK_MONOTONIC` does not count) charges no lease for the time
//! it slept. A stall of the whole server while the host runs (every
//! process stopped: SIGSTOP, a VM paused, storage hung) is credited too:
//! the launcher beats every `BEAT_US`, and so does every reader, so a gap
//! over `STALL_US` in which nobody read the clock is one in which none of
//! the server's processes ran; the first reader after it takes the gap out
//! of the clock before anyone decides anything. The lease clock never runs
//! faster than real time, so a lease never ends, in real time, sooner than
//! its ttl from the call that set it; a credited stall makes it end later.
//!
//! Across a restart on the same boot of the host the clock goes on from a
//! file the launcher writes every second (`init`), counting the time the
//! server was down (crash recovery included: nobody reads the clock before
//! it ends, and the first reading after a start credits nothing); after a
//! reboot it starts afresh, and held leases are honoured for their ttl from
//! the start (`fresh_since`, used by `failover.rs`). A credit is written to
//! the file before the offset takes it, while every reader waits: a crash
//! right after a stall restarts the clock from the credited reading, never
//! from the one before the stall, which would put it ahead by the stall and
//! end every lease renewed since that much early.
//!
//! Not preloaded there is no shared memory: the clock is the server's wall
//! clock (`clock_timestamp()`), as in the portable edition.
use crate::base::preload;
use pgrx::prelude::*;
use pgrx::shmem::AssertPGRXSharedMemory;
use pgrx::{pg_shmem_init, PgAtomic};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};

/// How often the launcher beats.
pub const BEAT_US: i64 = 100_000;

/// A gap in the beats longer than this is a stall of the whole server.
const STALL_US: i64 = 1_000_000;

/// A reader beats when the last beat is older than this (a write to shared
/// memory at most this often per reader, not on every read).
const READER_BEAT_US: i64 = 20_000;

struct Anchor {
    /// Lease clock minus `CLOCK_MONOTONIC`.
    offset: AtomicI64,
    /// The lease clock at this server's start when it started afresh (the
    /// file is from another boot of the host: see `init`), else `i64::MIN`.
    fresh_since: AtomicI64,
    /// `CLOCK_MONOTONIC` at the last beat; `CREDITING` while a stall is
    /// being taken out of `offset` (readers wait for it: no reader may see
    /// the beat moved and the offset not yet); `STARTED` until the first
    /// reading after the server's start (nothing to credit before it).
    beat: AtomicI64,
    /// Held by whoever writes the file: the launcher's round, or a reader
    /// crediting a stall (`file_lock`).
    writing: AtomicBool,
}

const CREDITING: i64 = i64::MIN;
const STARTED: i64 = i64::MIN + 1;

static ANCHOR: PgAtomic<AssertPGRXSharedMemory<Anchor>> =
    unsafe { PgAtomic::new(c"leaderlock lease clock") };

/// How often the launcher writes the file below.
pub const PERSIST_US: i64 = 1_000_000;

/// The file in the data directory that carries the lease clock across a
/// restart: `boot_id lease_us monotonic_us`, written by the launcher about
/// once a second (`persist`).
const FILE: &str = "leaderlock.clock";

/// Called from `_PG_init` while preloading: the anchor, set at server
/// start (in the postmaster, once). After a restart on the same boot of
/// the host, the lease clock goes on from where the file left it, by the
/// monotonic clock (time while the server was down counts, a wall-clock
/// step meanwhile does not); after a reboot, or without the file, it
/// starts at the wall clock, never below the file's.
pub fn init() {
    pg_shmem_init!(
        ANCHOR = unsafe {
            let mono = monotonic();
            let wall = pg_sys::GetCurrentTimestamp();
            let (start, fresh) = match read_file() {
                Some((boot, lease, then)) if Some(&boot) == boot_id().as_ref() && then <= mono => {
                    (lease + (mono - then), false)
                }
                // Another boot: the wall clock may have moved forward while
                // the host was down. The file is at most a write behind the
                // last run's clock.
                Some((_, lease, _)) => (wall.max(lease + PERSIST_US), true),
                // A new cluster (no lease yet), or one whose file is gone.
                None => (wall, false),
            };
            AssertPGRXSharedMemory::new(Anchor {
                offset: AtomicI64::new(start - mono),
                fresh_since: AtomicI64::new(if fresh { start } else { i64::MIN }),
                beat: AtomicI64::new(STARTED),
                writing: AtomicBool::new(false),
            })
        }
    );
}

/// This boot of the host (`CLOCK_MONOTONIC` starts again at each).
fn boot_id() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .ok()
        .map(|s| s.trim().to_owned())
}

fn data_file() -> Option<std::path::PathBuf> {
    let dir = unsafe { pg_sys::DataDir };
    (!dir.is_null()).then(|| {
        let dir = unsafe { std::ffi::CStr::from_ptr(dir) }.to_string_lossy();
        std::path::Path::new(dir.as_ref()).join(FILE)
    })
}

fn read_file() -> Option<(String, i64, i64)> {
    let text = std::fs::read_to_string(data_file()?).ok()?;
    let mut parts = text.split_whitespace();
    let boot = parts.next()?.to_owned();
    Some((
        boot,
        parts.next()?.parse().ok()?,
        parts.next()?.parse().ok()?,
    ))
}

/// Launcher: writes the lease clock to the data directory, so that a
/// restart goes on from it.
pub fn persist() {
    let anchor = ANCHOR.get();
    beat_at(anchor, monotonic()); // a stall is credited (and written) first
    let _lock = file_lock(anchor);
    // Read under the lock: a credit's write, made under it too, is never
    // followed by a reading from before the credit.
    let _ = write_file(anchor.offset.load(Ordering::SeqCst), monotonic());
}

/// The file's lock (a spinning flag: held for one small write, never
/// across an error, never by a process that then waits for a credit).
fn file_lock(anchor: &Anchor) -> impl Drop + '_ {
    while anchor
        .writing
        .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
        .is_err()
    {
        std::thread::yield_now();
    }
    struct Held<'a>(&'a AtomicBool);
    impl Drop for Held<'_> {
        fn drop(&mut self) {
            self.0.store(false, Ordering::SeqCst);
        }
    }
    Held(&anchor.writing)
}

/// Writes `offset + mono` at `mono` to the file (a new file, flushed,
/// renamed over the old), under `file_lock`.
fn write_file(offset: i64, mono: i64) -> std::io::Result<()> {
    let (Some(path), Some(boot)) = (data_file(), boot_id()) else {
        return Err(std::io::Error::other("no data directory or boot id"));
    };
    let line = format!("{boot} {} {mono}\n", offset + mono);
    let new = path.with_extension("clock.new");
    std::fs::File::create(&new).and_then(|mut f| {
        use std::io::Write;
        f.write_all(line.as_bytes())?;
        f.sync_all()
    })?;
    std::fs::rename(&new, &path)
}

/// `CLOCK_MONOTONIC`, in microseconds.
fn monotonic() -> i64 {
    let mut t = Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid pointer to a timespec; CLOCK_MONOTONIC always exists.
    unsafe { clock_gettime(CLOCK_MONOTONIC, &mut t) };
    t.tv_sec * 1_000_000 + t.tv_nsec / 1_000
}

#[repr(C)]
struct Timespec {
    tv_sec: i64,
    tv_nsec: i64,
}

const CLOCK_MONOTONIC: i32 = 1;

unsafe extern "C" {
    fn clock_gettime(clock: i32, t: *mut Timespec) -> i32;
}

/// Now, by the lease clock.
pub fn now() -> i64 {
    if !preload::preloaded() {
        return unsafe { pg_sys::GetCurrentTimestamp() };
    }
    now_at(ANCHOR.get(), monotonic())
}

fn now_at(anchor: &Anchor, mono: i64) -> i64 {
    beat_at(anchor, mono);
    anchor.offset.load(Ordering::SeqCst) + mono
}

fn beat_at(anchor: &Anchor, mono: i64) {
    loop {
        let last = anchor.beat.load(Ordering::SeqCst);
        if last == CREDITING {
            std::hint::spin_loop();
            continue;
        }
        if last == STARTED {
            // The first reading since the server started: the time before
            // it (down, in crash recovery) counts, as the file says.
            let _ = anchor
                .beat
                .compare_exchange(last, mono, Ordering::SeqCst, Ordering::SeqCst);
            continue;
        }
        let gap = mono - last;
        if gap <= READER_BEAT_US {
            return;
        }
        if gap <= STALL_US {
            // A plain beat. Lost to another beat: look again (it may be
            // one crediting a stall, which this reading must wait for).
            if anchor
                .beat
                .compare_exchange(last, mono, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
            {
                return;
            }
            continue;
        }
        // A stall: one process takes it out, the others wait for that.
        if anchor
            .beat
            .compare_exchange(last, CREDITING, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
        {
            // Only the time beyond a launcher's beat is the stall's. Written
            // to the file before the offset takes it (every reader waits
            // meanwhile): if it cannot be, the stall is not credited, and
            // counts as time passed (a lease then ends at its ttl in real
            // time, never sooner).
            let stall = gap - BEAT_US;
            let credited = {
                let _lock = file_lock(anchor);
                let offset = anchor.offset.load(Ordering::SeqCst) - stall;
                let written = write_file(offset, monotonic());
                if written.is_ok() {
                    anchor.offset.store(offset, Ordering::SeqCst);
                }
                written
            };
            anchor.beat.store(mono, Ordering::SeqCst);
            if let Err(e) = credited {
                log!(
                    "leaderlock: a stall of the server of {} ms is not credited to the lease \
                     clock: its file could not be written ({e})",
                    stall / 1000
                );
            }
            return;
        }
    }
}

/// When the lease clock started afresh at this server's start (the file is
/// from another boot of the host): held leases found then are
/// honoured for their ttl from then (`failover.rs`), since the wall clock
/// may have moved forward while the server was down. None when it went on
/// from the last run's (or is not preloaded).
pub fn fresh_since() -> Option<i64> {
    if !preload::preloaded() {
        return None;
    }
    let since = ANCHOR.get().fresh_since.load(Ordering::SeqCst);
    (since != i64::MIN).then_some(since)
}

/// Whether the lease clock is monotonic here (preloaded) or the wall clock.
pub fn monotonic_here() -> bool {
    preload::preloaded()
}

/// PostgreSQL's epoch (2000-01-01), the lease clock's, in microseconds
/// since the Unix epoch.
pub const PG_EPOCH_IN_UNIX_MICROS: i64 = 946_684_800_000_000;

/// `micros` as a timestamptz (an error when out of range).
pub fn ts(micros: i64) -> TimestampWithTimeZone {
    TimestampWithTimeZone::try_from(micros)
        .unwrap_or_else(|_| error!("leaderlock: timestamp out of range"))
}

/// A timestamptz read from a row, as microseconds.
pub fn micros(t: Option<TimestampWithTimeZone>) -> Option<i64> {
    t.map(i64::from)
}
