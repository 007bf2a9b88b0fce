//! `leaderlock run --group G -- cmd`: one command per partition of group G
//! that this member owns (contract 26). Each runs under a supervisor of its
//! own (supervisor.rs), so it is stopped at the member's local deadline
//! even when this process cannot act; a revoked partition's command is
//! stopped (SIGTERM, SIGKILL after --grace) and the partition given back
//! once it has exited; a lost one's is stopped and nothing given back. A
//! command that exits by itself while its partition is still ours starts
//! again after --restart-delay: the partition's work goes on while it is
//! ours. SIGINT/SIGTERM stop every command, then the member leaves.
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::time::Duration;

use leaderlock_client::{ConnectConfig, Error, Member, MemberConfig, MemberEvent};
use serde_json::json;
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::mpsc;
use tokio::time::{sleep_until, Instant};

use crate::exit;
use crate::log::Log;
use crate::supervisor::{Cause, Handle, Message};
use crate::text::shown;

/// What `run --group` was asked.
pub struct Group {
    pub config: MemberConfig,
    pub grace: Duration,
    pub restart_delay: Duration,
    pub command: Vec<OsString>,
    pub remove_env: Vec<OsString>,
}

/// An order to a partition's supervisor.
enum Order {
    Start(i64, Instant),
    Extend(i64, Instant),
    Stop,
}

/// A partition's supervisor, driven by a task of its own (its messages
/// come back on the runner's channel, with the partition).
struct Slot {
    orders: mpsc::UnboundedSender<Order>,
    closed: tokio::task::JoinHandle<()>,
}

impl Slot {
    fn spawn(
        partition: i32,
        group: &Group,
        messages: mpsc::UnboundedSender<(i32, Message)>,
    ) -> std::io::Result<Slot> {
        let p = partition.to_string();
        let env = [
            ("LEADERLOCK_GROUP", group.config.group.as_str()),
            ("LEADERLOCK_MEMBER", group.config.id.as_str()),
            ("LEADERLOCK_PARTITION", p.as_str()),
        ];
        let mut handle = Handle::spawn(&group.command, group.grace, &env, &group.remove_env)?;
        let (orders, mut rx) = mpsc::unbounded_channel();
        let closed = tokio::spawn(async move {
            loop {
                tokio::select! {
                    order = rx.recv() => match order {
                        Some(Order::Start(term, deadline)) => handle.start(term, deadline).await,
                        Some(Order::Extend(term, deadline)) => handle.extend(term, deadline).await,
                        Some(Order::Stop) => handle.stop().await,
                        // Closed: the supervisor stops the command and exits.
                        None => break,
                    },
                    message = handle.next() => {
                        let gone = matches!(message, Message::Gone);
                        let _ = messages.send((partition, message));
                        if gone {
                            break;
                        }
                    }
                }
            }
            let _ = tokio::task::spawn_blocking(move || handle.close()).await;
        });
        Ok(Slot { orders, closed })
    }

    fn order(&self, order: Order) {
        let _ = self.orders.send(order);
    }
}

/// A partition as the runner sees it.
#[derive(Default)]
struct Part {
    /// Ours, in this term (by the member's word).
    owned: Option<i64>,
    /// The term a command was started for, until it has exited.
    running: Option<i64>,
    /// Revoked in this term: given back once the command has exited.
    ack_on_exit: Option<i64>,
    restart_at: Option<Instant>,
}

pub async fn run(group: Group, db: ConnectConfig, log: Log) -> i32 {
    let mut sigint = signal(SignalKind::interrupt()).expect("signal handler");
    let mut sigterm = signal(SignalKind::terminate()).expect("signal handler");
    let name = shown(&group.config.group);
    log.event(
        "member",
        &format!(
            "joining group \"{name}\" as \"{}\" (ttl {:?}, grace {:?})",
            shown(&group.config.id),
            group.config.ttl,
            group.grace
        ),
        json!({"group": group.config.group, "member": group.config.id,
               "ttl": group.config.ttl.as_secs_f64(), "grace": group.grace.as_secs_f64()}),
    );
    let mut member = Member::start(db, group.config.clone());
    let (messages_tx, mut messages) = mpsc::unbounded_channel();
    let mut slots: BTreeMap<i32, Slot> = BTreeMap::new();
    let mut parts: BTreeMap<i32, Part> = BTreeMap::new();
    let mut deadline = Instant::now();
    let far = Instant::now() + Duration::from_secs(100 * 365 * 86400);
    let mut finish: Option<i32> = None;
    loop {
        if let Some(code) = finish {
            if parts.values().all(|p| p.running.is_none()) {
                break finish_up(code, member, slots, &log).await;
            }
        }
        let next_restart = parts.values().filter_map(|p| p.restart_at).min();
        tokio::select! {
            event = member.next_event() => {
                let Some(event) = event else {
                    finish.get_or_insert(exit::INTERNAL);
                    continue;
                };
                match event {
                    MemberEvent::Renewed { deadline: d } => {
                        deadline = d;
                        for (p, part) in &parts {
                            if let (Some(term), Some(slot)) = (part.running, slots.get(p)) {
                                if part.owned == Some(term) {
                                    slot.order(Order::Extend(term, d));
                                }
                            }
                        }
                    }
                    MemberEvent::Assigned { partition, term, deadline: d } => {
                        deadline = d;
                        log.event("assigned", &format!("partition {partition} is ours, term {term}"),
                                  json!({"partition": partition, "term": term}));
                        parts.entry(partition).or_default().owned = Some(term);
                        if finish.is_none() {
                            if let Err(code) = start(&group, &member, partition, &mut parts, &mut slots, &messages_tx, deadline, &log) {
                                finish = Some(code);
                                stop_all(&parts, &slots);
                            }
                        }
                    }
                    MemberEvent::Revoked { partition, term } => {
                        log.event("revoked", &format!("partition {partition} (term {term}) is revoked: stopping its command, then giving it back"),
                                  json!({"partition": partition, "term": term}));
                        let part = parts.entry(partition).or_default();
                        part.owned = None;
                        part.restart_at = None;
                        if part.running.is_some() {
                            part.ack_on_exit = Some(term);
                            slots[&partition].order(Order::Stop);
                        } else {
                            member.ack(partition, term);
                        }
                    }
                    MemberEvent::Lost { partition, term } => {
                        log.event("lost", &format!("partition {partition} (term {term}) is not ours any more: stopping its command"),
                                  json!({"partition": partition, "term": term}));
                        let part = parts.entry(partition).or_default();
                        part.owned = None;
                        part.restart_at = None;
                        if part.running.is_some() {
                            slots[&partition].order(Order::Stop);
                        }
                    }
                    MemberEvent::Disconnected { error } => {
                        log.event("disconnected", &format!("database: {error}"), json!({"error": error.to_string()}));
                    }
                    MemberEvent::Failed { error } => {
                        log.event("rejected", &error.to_string(), json!({"error": error.to_string(), "sqlstate": error.sqlstate()}));
                        finish = Some(exit::REJECTED);
                        stop_all(&parts, &slots);
                    }
                    _ => {}
                }
            }
            Some((partition, message)) = messages.recv() => {
                let part = parts.entry(partition).or_default();
                match message {
                    Message::Started(pid) => {
                        log.event("child_started", &format!("partition {partition}: started the command, pid {pid}"),
                                  json!({"partition": partition, "child": pid}));
                    }
                    Message::SpawnFailed(e) => {
                        part.running = None;
                        log.event("error", &format!("cannot start the command: {e}"), json!({"partition": partition, "error": e}));
                        finish.get_or_insert(exit::CANNOT_RUN);
                        stop_all(&parts, &slots);
                    }
                    Message::Exited(code, cause, term) => {
                        part.running = None;
                        let revoked = part.ack_on_exit.take();
                        let ours = part.owned.is_some();
                        log.event("child_exited", &format!("partition {partition}: the command exited with {code} ({})", match cause {
                            Cause::Own => "by itself", Cause::Stop => "stopped", Cause::Deadline => "stopped at the local deadline",
                        }), json!({"partition": partition, "term": term, "code": code, "cause": format!("{cause:?}").to_lowercase()}));
                        if let Some(revoked) = revoked {
                            member.ack(partition, revoked);
                            log.event("acked", &format!("partition {partition} given back"), json!({"partition": partition, "term": revoked}));
                        }
                        if finish.is_none() && ours {
                            // Still ours (or ours again): its work goes on.
                            if cause == Cause::Own {
                                parts.entry(partition).or_default().restart_at = Some(Instant::now() + group.restart_delay);
                            } else if let Err(code) = start(&group, &member, partition, &mut parts, &mut slots, &messages_tx, deadline, &log) {
                                finish = Some(code);
                                stop_all(&parts, &slots);
                            }
                        }
                    }
                    Message::Gone => {
                        part.running = None;
                        log.event("error", "a supervisor process is gone", json!({"partition": partition}));
                        finish = Some(exit::INTERNAL);
                        stop_all(&parts, &slots);
                    }
                }
            }
            _ = sleep_until(next_restart.unwrap_or(far)), if next_restart.is_some() => {
                let now = Instant::now();
                let due: Vec<i32> = parts.iter().filter(|(_, p)| p.restart_at.is_some_and(|t| t <= now)).map(|(p, _)| *p).collect();
                for partition in due {
                    parts.get_mut(&partition).expect("listed above").restart_at = None;
                    if finish.is_none() {
                        if let Err(code) = start(&group, &member, partition, &mut parts, &mut slots, &messages_tx, deadline, &log) {
                            finish = Some(code);
                            stop_all(&parts, &slots);
                        }
                    }
                }
            }
            _ = sigint.recv() => interrupted(&mut finish, &parts, &slots, &log, libc::SIGINT),
            _ = sigterm.recv() => interrupted(&mut finish, &parts, &slots, &log, libc::SIGTERM),
        }
    }
}

/// Starts `partition`'s command if it is ours now (checked at this
/// instant, against the local deadline) and none runs for it. Err: the
/// exit code, when its supervisor cannot be started.
#[allow(clippy::too_many_arguments)]
fn start(
    group: &Group,
    member: &Member,
    partition: i32,
    parts: &mut BTreeMap<i32, Part>,
    slots: &mut BTreeMap<i32, Slot>,
    messages: &mpsc::UnboundedSender<(i32, Message)>,
    deadline: Instant,
    log: &Log,
) -> Result<(), i32> {
    let part = parts.entry(partition).or_default();
    let Some(term) = member.owns(partition) else {
        return Ok(());
    };
    if part.running.is_some() || part.owned != Some(term) {
        return Ok(()); // (started again once the one running has exited)
    }
    if let std::collections::btree_map::Entry::Vacant(e) = slots.entry(partition) {
        match Slot::spawn(partition, group, messages.clone()) {
            Ok(slot) => {
                e.insert(slot);
            }
            Err(e) => {
                log.event(
                    "error",
                    &format!("cannot start a supervisor: {e}"),
                    json!({"partition": partition, "error": e.to_string()}),
                );
                return Err(exit::INTERNAL);
            }
        }
    }
    part.running = Some(term);
    slots[&partition].order(Order::Start(term, deadline));
    Ok(())
}

fn stop_all(parts: &BTreeMap<i32, Part>, slots: &BTreeMap<i32, Slot>) {
    for (p, part) in parts {
        if part.running.is_some() {
            slots[p].order(Order::Stop);
        }
    }
}

fn interrupted(
    finish: &mut Option<i32>,
    parts: &BTreeMap<i32, Part>,
    slots: &BTreeMap<i32, Slot>,
    log: &Log,
    signo: i32,
) {
    log.event(
        "signal",
        &format!("got signal {signo}: stopping every command, then leaving the group"),
        json!({ "signal": signo }),
    );
    stop_all(parts, slots);
    *finish = Some(128 + signo);
}

/// Every command has exited: leave (the partitions go to the others at
/// once), close the supervisors.
async fn finish_up(code: i32, member: Member, slots: BTreeMap<i32, Slot>, log: &Log) -> i32 {
    if code != exit::REJECTED {
        match member.leave().await {
            Ok(_) => log.event("left", "left the group", json!({})),
            Err(Error::Unreachable(e)) | Err(Error::Config(e)) => log.event(
                "error",
                &format!("could not leave ({e}): the membership lapses at its ttl"),
                json!({"error": e}),
            ),
            Err(e) => log.event(
                "error",
                &format!("could not leave: {e}"),
                json!({"error": e.to_string()}),
            ),
        }
    }
    for slot in slots.into_values() {
        drop(slot.orders);
        let _ = slot.closed.await;
    }
    code
}
