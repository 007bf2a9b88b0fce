//! The supervisor: a small process of its own (this binary, re-executed as
//! `leaderlock __supervise`) that starts the command and stops it at the
//! local deadline. It is separate from the elector so that the command is
//! stopped in time even when the elector cannot act: killed with -9 (the
//! supervisor sees its control socket close), or stopped with SIGSTOP (the
//! supervisor's own timer still fires). If the supervisor itself is killed,
//! the command gets SIGKILL from the kernel (PR_SET_PDEATHSIG).
//!
//! Protocol, one line per message on a Unix socket at fd 3 of the supervisor:
//! elector -> supervisor: `start TERM DEADLINE_NS [DUE]`, `extend TERM DEADLINE_NS`,
//! `stop`, `signal SIGNO`; supervisor -> elector: `started PID`,
//! `spawn-failed MESSAGE`, `exited CODE CAUSE TERM` (CAUSE: own, stop,
//! deadline). Every `start` is answered by `spawn-failed` or, after
//! `started`, by `exited`. Deadlines are CLOCK_BOOTTIME nanoseconds: the same
//! clock in every process, so a message delayed in the socket cannot stretch
//! them, and one that keeps counting while the machine is suspended (the
//! server's clock does too).
use std::ffi::OsString;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

/// The fd the supervisor finds its control socket on.
const CONTROL_FD: RawFd = 3;

/// Signals the supervisor ignores (the elector decides what happens on
/// them) and that the command gets back at their defaults.
const SHIELDED: [libc::c_int; 6] = [
    libc::SIGINT,
    libc::SIGTERM,
    libc::SIGHUP,
    libc::SIGQUIT,
    libc::SIGUSR1,
    libc::SIGUSR2,
];

/// CLOCK_BOOTTIME now, in nanoseconds.
pub fn boottime_ns() -> i64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid timespec to write to.
    unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut ts) };
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}

/// A tokio instant as CLOCK_BOOTTIME nanoseconds (rounded down by a
/// millisecond). The boot clock is read first: any delay before the second
/// read makes the deadline earlier, never later.
pub fn instant_ns(at: tokio::time::Instant) -> i64 {
    let now_ns = boottime_ns();
    let now = tokio::time::Instant::now();
    let offset = if at >= now {
        (at - now).as_nanos() as i64
    } else {
        -((now - at).as_nanos() as i64)
    };
    now_ns + offset - 1_000_000
}

/// How the command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    /// By itself (or by a signal nobody here sent).
    Own,
    /// After `stop`.
    Stop,
    /// Stopped by the supervisor at the local deadline.
    Deadline,
}

#[derive(Debug)]
pub enum Message {
    Started(u32),
    SpawnFailed(String),
    /// Exit code, cause, and the term the command was started for.
    Exited(i32, Cause, i64),
    /// The supervisor is gone.
    Gone,
}

/// The elector's end of the control socket.
pub struct Handle {
    reader: tokio::io::Lines<BufReader<tokio::net::unix::OwnedReadHalf>>,
    writer: tokio::net::unix::OwnedWriteHalf,
    process: Child,
}

impl Handle {
    /// Starts `leaderlock __supervise` for `command`, with `env` added to
    /// the command's environment and the variables in `remove` taken out.
    /// Must run inside the tokio runtime.
    pub fn spawn(
        command: &[OsString],
        grace: Duration,
        env: &[(&str, &str)],
        remove: &[OsString],
    ) -> io::Result<Handle> {
        let (ours, theirs) = UnixStream::pair()?;
        let theirs_fd = theirs.as_raw_fd();
        let mut cmd = Command::new(std::env::current_exe()?);
        cmd.arg("__supervise")
            .arg("--grace-ms")
            .arg(grace.as_millis().to_string())
            .arg("--")
            .args(command)
            .envs(env.iter().copied());
        for name in remove {
            cmd.env_remove(name);
        }
        // SAFETY: dup2 is async-signal-safe; it clears close-on-exec on fd 3.
        unsafe {
            cmd.pre_exec(move || {
                let ok = if theirs_fd == CONTROL_FD {
                    libc::fcntl(CONTROL_FD, libc::F_SETFD, 0) >= 0
                } else {
                    libc::dup2(theirs_fd, CONTROL_FD) >= 0
                };
                if !ok {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let process = cmd.spawn()?;
        drop(theirs);
        ours.set_nonblocking(true)?;
        let (read, writer) = tokio::net::UnixStream::from_std(ours)?.into_split();
        Ok(Handle {
            reader: BufReader::new(read).lines(),
            writer,
            process,
        })
    }

    async fn send(&mut self, line: String) {
        // A dead supervisor shows up as Message::Gone on the read side.
        let _ = self.writer.write_all(format!("{line}\n").as_bytes()).await;
    }

    pub async fn start(&mut self, term: i64, deadline: tokio::time::Instant) {
        self.send(format!("start {term} {}", instant_ns(deadline)))
            .await
    }

    /// `start` for a scheduled run: `due` (RFC 3339, no spaces) goes into
    /// the command's environment as LEADERLOCK_DUE.
    pub async fn start_run(&mut self, term: i64, deadline: tokio::time::Instant, due: &str) {
        self.send(format!("start {term} {} {due}", instant_ns(deadline)))
            .await
    }

    pub async fn extend(&mut self, term: i64, deadline: tokio::time::Instant) {
        self.send(format!("extend {term} {}", instant_ns(deadline)))
            .await
    }

    pub async fn stop(&mut self) {
        self.send("stop".into()).await
    }

    pub async fn signal(&mut self, signo: i32) {
        self.send(format!("signal {signo}")).await
    }

    /// The next message (cancel-safe: a partial line stays buffered).
    pub async fn next(&mut self) -> Message {
        match self.reader.next_line().await {
            Ok(Some(line)) => parse_message(&line).unwrap_or(Message::Gone),
            _ => Message::Gone,
        }
    }

    /// Closes the control socket: the supervisor stops the command (if it
    /// runs) and exits.
    pub fn close(mut self) {
        drop(self.writer);
        drop(self.reader);
        let _ = self.process.wait();
    }
}

fn parse_message(line: &str) -> Option<Message> {
    let mut words = line.splitn(4, ' ');
    match words.next()? {
        "started" => Some(Message::Started(words.next()?.parse().ok()?)),
        "spawn-failed" => Some(Message::SpawnFailed(
            line.trim_start_matches("spawn-failed ").to_owned(),
        )),
        "exited" => {
            let code = words.next()?.parse().ok()?;
            let cause = match words.next()? {
                "own" => Cause::Own,
                "stop" => Cause::Stop,
                "deadline" => Cause::Deadline,
                _ => return None,
            };
            Some(Message::Exited(code, cause, words.next()?.parse().ok()?))
        }
        _ => None,
    }
}

/// The running command inside the supervisor.
struct Running {
    child: Child,
    term: i64,
    pidfd: Option<OwnedFd>,
    /// When SIGKILL goes to the group (set once SIGTERM went).
    kill_at: Option<i64>,
    cause: Cause,
}

/// `leaderlock __supervise --grace-ms N -- command...`: never returns.
pub fn supervise(grace_ms: u64, command: Vec<OsString>) -> ! {
    for sig in SHIELDED {
        // SAFETY: setting a disposition to SIG_IGN.
        unsafe { libc::signal(sig, libc::SIG_IGN) };
    }
    // SAFETY: fd 3 was set up by Handle::spawn; nothing else owns it. It
    // must not leak into the command.
    let mut control = unsafe {
        libc::fcntl(CONTROL_FD, libc::F_SETFD, libc::FD_CLOEXEC);
        UnixStream::from_raw_fd(CONTROL_FD)
    };
    let grace = grace_ms as i64 * 1_000_000;
    let mut deadline = i64::MIN;
    let mut running: Option<Running> = None;
    let mut parent_gone = false;
    let mut buf = Vec::new();
    loop {
        let now = boottime_ns();
        // Enforce the deadline first: the command must be gone by then.
        if let Some(r) = running.as_mut() {
            if r.kill_at.is_none() && now >= deadline - grace {
                r.cause = Cause::Deadline;
                r.kill_at = Some(deadline);
                signal_group(&r.child, libc::SIGTERM);
            }
            if r.kill_at.is_some_and(|k| now >= k) {
                signal_group(&r.child, libc::SIGKILL);
            }
        }
        if parent_gone && running.is_none() {
            std::process::exit(0);
        }
        let timeout_ms = match running.as_ref() {
            Some(r) => {
                let next = r.kill_at.unwrap_or(deadline - grace);
                ((next - now).max(0) + 999_999) / 1_000_000
            }
            None => -1,
        };
        let mut fds = [
            libc::pollfd {
                fd: if parent_gone { -1 } else { CONTROL_FD },
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: running
                    .as_ref()
                    .and_then(|r| r.pidfd.as_ref())
                    .map_or(-1, |f| f.as_raw_fd()),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        // Without a pidfd (old kernel), look at the child every 20 ms.
        let timeout_ms = match running.as_ref() {
            Some(r) if r.pidfd.is_none() => timeout_ms.min(20),
            _ => timeout_ms,
        };
        // SAFETY: fds is a valid array of two pollfd.
        unsafe { libc::poll(fds.as_mut_ptr(), 2, timeout_ms.min(i32::MAX as i64) as i32) };

        if fds[0].revents != 0 {
            let mut chunk = [0u8; 4096];
            match control.read(&mut chunk) {
                Ok(0) | Err(_) => {
                    // The elector is gone (killed?): stop the command now.
                    parent_gone = true;
                    if let Some(r) = running.as_mut() {
                        begin_stop(r, deadline, grace);
                    }
                }
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
            while let Some(end) = buf.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = buf.drain(..=end).collect();
                let line = String::from_utf8_lossy(&line[..end]).into_owned();
                let words: Vec<&str> = line.split(' ').collect();
                match words.as_slice() {
                    ["start", term, at, due @ ..] if running.is_none() && due.len() <= 1 => {
                        deadline = at.parse().unwrap_or(i64::MIN);
                        if boottime_ns() >= deadline - grace {
                            // Too late to start safely.
                            let _ = writeln!(control, "exited 0 deadline {term}");
                            continue;
                        }
                        match spawn_command(&command, term, due.first().copied()) {
                            Ok(child) => {
                                let _ = writeln!(control, "started {}", child.id());
                                running = Some(Running {
                                    pidfd: pidfd_open(child.id()),
                                    child,
                                    term: term.parse().unwrap_or(0),
                                    kill_at: None,
                                    cause: Cause::Own,
                                });
                            }
                            Err(e) => {
                                let _ = writeln!(control, "spawn-failed {e}");
                            }
                        }
                    }
                    ["extend", term, at] => {
                        if let (Ok(term), Ok(at)) = (term.parse::<i64>(), at.parse::<i64>()) {
                            // Only the running command's own tenure extends it,
                            // and extending after SIGTERM went cannot undo it.
                            if running
                                .as_ref()
                                .is_some_and(|r| r.term == term && r.kill_at.is_none())
                            {
                                deadline = deadline.max(at);
                            }
                        }
                    }
                    ["stop"] => {
                        if let Some(r) = running.as_mut() {
                            begin_stop(r, deadline, grace);
                        }
                    }
                    ["signal", signo] => {
                        if let (Some(r), Ok(signo)) = (running.as_ref(), signo.parse()) {
                            signal_group(&r.child, signo);
                        }
                    }
                    _ => {}
                }
            }
        }

        if let Some(r) = running.as_mut() {
            if let Ok(Some(status)) = r.child.try_wait() {
                let code = status
                    .code()
                    .unwrap_or_else(|| 128 + status.signal().unwrap_or(0));
                // Nothing the command left in its group may outlive it.
                signal_group(&r.child, libc::SIGKILL);
                let cause = match r.cause {
                    Cause::Deadline => "deadline",
                    Cause::Stop => "stop",
                    Cause::Own => "own",
                };
                let _ = writeln!(control, "exited {code} {cause} {}", r.term);
                running = None;
            }
        }
    }
}

fn begin_stop(r: &mut Running, deadline: i64, grace: i64) {
    if r.kill_at.is_none() {
        r.cause = Cause::Stop;
        r.kill_at = Some((boottime_ns() + grace).min(deadline));
        signal_group(&r.child, libc::SIGTERM);
    }
}

fn signal_group(child: &Child, signo: libc::c_int) {
    // SAFETY: kill has no memory effects; the child leads its own group.
    unsafe { libc::kill(-(child.id() as libc::pid_t), signo) };
}

fn pidfd_open(pid: u32) -> Option<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags, returns an fd or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
    // SAFETY: a non-negative return is a new fd that we own.
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// Starts the command in its own process group (so signals reach all of
/// it), with the term (and a scheduled run's due instant) in its environment, default signal dispositions, and
/// SIGKILL from the kernel should the supervisor die.
fn spawn_command(command: &[OsString], term: &str, due: Option<&str>) -> io::Result<Child> {
    let supervisor = std::process::id() as libc::pid_t;
    let mut cmd = Command::new(&command[0]);
    cmd.args(&command[1..])
        .env("LEADERLOCK_TERM", term)
        .process_group(0);
    if let Some(due) = due {
        cmd.env("LEADERLOCK_DUE", due);
    }
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            for sig in SHIELDED {
                libc::signal(sig, libc::SIG_DFL);
            }
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(io::Error::last_os_error());
            }
            // The supervisor died before prctl took effect.
            if libc::getppid() != supervisor {
                libc::_exit(137);
            }
            Ok(())
        });
    }
    cmd.spawn()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_parse() {
        assert!(matches!(
            parse_message("started 42"),
            Some(Message::Started(42))
        ));
        assert!(matches!(
            parse_message("exited 143 deadline 4294967297"),
            Some(Message::Exited(143, Cause::Deadline, 4294967297))
        ));
        assert!(matches!(
            parse_message("spawn-failed No such file or directory (os error 2)"),
            Some(Message::SpawnFailed(m)) if m.starts_with("No such file")
        ));
        assert!(parse_message("exited x own 1").is_none());
        assert!(parse_message("exited 0 own").is_none());
        assert!(parse_message("hello").is_none());
    }

    #[tokio::test]
    async fn instants_convert_to_the_boot_clock() {
        let now_ns = boottime_ns();
        let in_a_second = instant_ns(tokio::time::Instant::now() + Duration::from_secs(1));
        let diff = in_a_second - now_ns;
        assert!(diff > 990_000_000 && diff < 1_000_000_000, "{diff}");
    }
}
