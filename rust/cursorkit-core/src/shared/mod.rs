//! `SharedCore`: a Shared subscription's dispatch state — round-robin over permits, the replay
//! queue first, in position order, and what each consumer holds unacknowledged.
//!
//! Entries read from the log go in ([`SharedCore::add_read`]); a dispatch hands each consumer in
//! turn up to [`SharedCore::round_robin_batch`] messages of its permits (Pulsar's
//! `dispatcherMaxRoundRobinBatchSize`, and the room left under the unacked limits), consumers of the best priority level first (a lower
//! `priority_level` is served first, as in Pulsar). Permits count messages, so a batched entry
//! takes as many as it holds; a consumer always gets at least one entry on its turn, so a batch
//! larger than its permits still goes out (Pulsar's permits may go negative the same way).
//!
//! What is not sent waits in one queue ordered by position: unsent reads, nacked and redelivered
//! messages, a leaver's messages and due delayed messages. Replay comes first because everything
//! in it lies before the next read. Every position is checked against the cursor as it enters the
//! queue and again as it is sent, so an acknowledged message is never sent again, whoever acked it.
//!
//! Redelivery counts follow Pulsar's tracker: a nack or a redelivery request raises them, a leaving
//! consumer's messages go back without a raise, an ack drops one, the last consumer leaving clears
//! them all. Limits: `max_unacked_per_consumer` stops sending to a consumer holding that many
//! messages, `max_unacked_per_subscription` stops the whole subscription (0: no limit).
//!
//! The type and its figures are here; membership and permits in `consumers.rs`, the dispatch in
//! `send.rs`, acks, nacks and redelivery in `acks.rs`.
//!
//! ```
//! use cursorkit_core::{Cursor, Position, SharedCore};
//! let mut cursor = Cursor::new(Position::new(1, -1).unwrap(), false);
//! let mut core = SharedCore::new(20);
//! core.add_consumer(1, 0, 3).unwrap();
//! core.add_consumer(2, 0, 3).unwrap();
//! core.add_read(&[1, 1, 1, 1], &[0, 1, 2, 3], &[1, 1, 1, 1], &cursor).unwrap();
//! let out = core.dispatch(&cursor).unwrap();
//! let sent: usize = out.iter().map(|s| s.entries.len()).sum();
//! assert_eq!(sent, 4);
//! for s in &out {
//!     core.ack(&s.ledgers, &s.entries, &mut cursor).unwrap();
//! }
//! assert_eq!(cursor.mark_delete(), Position::new(1, 3).unwrap());
//! ```

mod acks;
mod consumers;
mod send;

use std::collections::{BTreeMap, BTreeSet};

use crate::ackstate::dispatch_counts::DispatchCounts;
use crate::ackstate::position::Position;
use crate::mem::FastMap;

pub use acks::AckCounts;
pub use send::Sent;

/// Pulsar's `dispatcherMaxRoundRobinBatchSize`: messages a consumer gets per turn.
pub const ROUND_ROBIN_BATCH: u32 = 20;

/// One consumer's dispatch state.
#[derive(Debug, Clone)]
struct Member {
    id: u32,
    priority: i32,
    /// Messages it may still receive (negative after a batch larger than its permits).
    permits: i64,
    /// Messages it holds unacknowledged.
    unacked: u64,
    paused: bool,
    /// Entries it holds, in position order.
    held: BTreeSet<Position>,
    /// Messages sent to it, in all.
    msg_out: u64,
}

/// An entry in flight: its holder and how many messages it carries.
#[derive(Debug, Clone, Copy)]
struct Held {
    consumer: u32,
    messages: u32,
}

/// One consumer's figures (Pulsar's consumer stats names where they exist).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SharedConsumerFigures {
    /// The consumer id.
    pub id: u32,
    /// Its priority level (lower is served first).
    pub priority: i32,
    /// `availablePermits`.
    pub permits: i64,
    /// `unackedMessages`.
    pub unacked: u64,
    /// Entries it holds.
    pub held_entries: u64,
    /// `msgOutCounter`.
    pub msg_out: u64,
    /// Whether the broker paused it (a connection that does not keep up).
    pub paused: bool,
}

/// A Shared subscription's dispatch state (see the module docs).
#[derive(Debug, Clone)]
pub struct SharedCore {
    /// Consumers in the order they joined.
    members: Vec<Member>,
    /// Waiting to be sent: position → messages, in position order.
    queue: BTreeMap<Position, u32>,
    /// In flight: position → holder and messages.
    held: FastMap<Position, Held>,
    /// Redelivery counts above zero.
    counts: DispatchCounts,
    /// Where the round-robin turn resumes (an index into `members`).
    next: usize,
    round_robin_batch: u32,
    max_unacked_per_consumer: u64,
    max_unacked_per_subscription: u64,
    unacked_total: u64,
    dropped_acked: u64,
}

impl SharedCore {
    /// An empty subscription giving each consumer up to `round_robin_batch` messages a turn
    /// (at least 1), with Pulsar's default limits: 50,000 unacked per consumer, 200,000 per
    /// subscription.
    pub fn new(round_robin_batch: u32) -> Self {
        Self {
            members: Vec::new(),
            queue: BTreeMap::new(),
            held: FastMap::default(),
            counts: DispatchCounts::default(),
            next: 0,
            round_robin_batch: round_robin_batch.max(1),
            max_unacked_per_consumer: 50_000,
            max_unacked_per_subscription: 200_000,
            unacked_total: 0,
            dropped_acked: 0,
        }
    }

    /// Sets the unacked-message limits (0: no limit).
    pub fn set_limits(&mut self, per_consumer: u64, per_subscription: u64) {
        self.max_unacked_per_consumer = per_consumer;
        self.max_unacked_per_subscription = per_subscription;
    }

    /// Messages per consumer turn.
    pub fn round_robin_batch(&self) -> u32 {
        self.round_robin_batch
    }

    /// Entries waiting to be sent (replay and unsent reads).
    pub fn queue_len(&self) -> usize {
        self.queue.len()
    }

    /// Entries in flight.
    pub fn held_len(&self) -> usize {
        self.held.len()
    }

    /// Messages held unacknowledged by all consumers.
    pub fn unacked_total(&self) -> u64 {
        self.unacked_total
    }

    /// Positions dropped on their way to or from the queue because the cursor had acked them.
    pub fn dropped_acked(&self) -> u64 {
        self.dropped_acked
    }

    /// The redelivery count of a position (0 when never redelivered).
    pub fn redelivery_count(&self, position: Position) -> u32 {
        self.counts.get(&position).copied().unwrap_or(0)
    }

    /// The redelivery counts, the one place they are kept (journal on for durable counts).
    pub fn counts(&self) -> &DispatchCounts {
        &self.counts
    }

    /// The redelivery counts, to journal, seed or raise (a consumer's connection lost).
    pub fn counts_mut(&mut self) -> &mut DispatchCounts {
        &mut self.counts
    }

    /// The holder of a position in flight.
    pub fn holder(&self, position: Position) -> Option<u32> {
        self.held.get(&position).map(|h| h.consumer)
    }

    /// The queue's positions, in order.
    pub fn queued(&self) -> impl Iterator<Item = Position> + '_ {
        self.queue.keys().copied()
    }

    /// The positions a consumer holds, in order (empty for an unknown consumer).
    pub fn held_by(&self, consumer: u32) -> Vec<Position> {
        self.members
            .iter()
            .find(|m| m.id == consumer)
            .map(|m| m.held.iter().copied().collect())
            .unwrap_or_default()
    }

    /// Every consumer's figures, in join order.
    pub fn figures(&self) -> Vec<SharedConsumerFigures> {
        self.members
            .iter()
            .map(|m| SharedConsumerFigures {
                id: m.id,
                priority: m.priority,
                permits: m.permits,
                unacked: m.unacked,
                held_entries: m.held.len() as u64,
                msg_out: m.msg_out,
                paused: m.paused,
            })
            .collect()
    }

    /// Forgets everything sent or waiting (a seek): the caller reads again from the new position.
    /// Consumers keep their permits.
    pub fn reset(&mut self) {
        self.queue.clear();
        self.held.clear();
        self.counts.clear();
        self.unacked_total = 0;
        for m in &mut self.members {
            m.held.clear();
            m.unacked = 0;
        }
    }

    /// Heap bytes of the state (maps and sets, roughly).
    pub fn memory_usage(&self) -> usize {
        let held_sets: usize = self.members.iter().map(|m| m.held.len() * 24).sum();
        crate::mem::map_bytes(&self.held)
            + self.counts.memory_usage()
            + self.queue.len() * 32
            + held_sets
    }
}

#[cfg(test)]
mod tests;
