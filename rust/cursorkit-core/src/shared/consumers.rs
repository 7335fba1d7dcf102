//! Membership, permits and what to read next.

use std::collections::BTreeSet;

use super::{Member, SharedCore};
use crate::ackstate::cursor::Cursor;
use crate::ackstate::position::Position;
use crate::error::{CoreError, Result};

impl SharedCore {
    pub(super) fn member_index(&self, id: u32) -> Result<usize> {
        self.members
            .iter()
            .position(|m| m.id == id)
            .ok_or_else(|| CoreError::UnknownConsumer(format!("consumer {id} is not registered")))
    }

    /// Registers consumer `id` at `priority` (lower is served first) with `permits`.
    pub fn add_consumer(&mut self, id: u32, priority: i32, permits: u64) -> Result<()> {
        if self.members.iter().any(|m| m.id == id) {
            return Err(CoreError::InvalidArgument(format!(
                "consumer {id} is already registered"
            )));
        }
        self.members.push(Member {
            id,
            priority,
            permits: clamp(permits),
            unacked: 0,
            paused: false,
            held: BTreeSet::new(),
            msg_out: 0,
        });
        Ok(())
    }

    /// Unregisters a consumer; what it held goes back to the queue without a redelivery raise
    /// (positions the cursor acked meanwhile are dropped). Returns the positions it held, in
    /// order. The last consumer leaving clears the redelivery counts, as Pulsar does (unless journaled).
    pub fn remove_consumer(&mut self, id: u32, cursor: &Cursor) -> Result<Vec<Position>> {
        let i = self.member_index(id)?;
        let member = self.members.remove(i);
        if self.next > i {
            self.next -= 1;
        }
        let held: Vec<Position> = member.held.into_iter().collect();
        for &p in &held {
            if let Some(h) = self.held.remove(&p) {
                self.unacked_total -= u64::from(h.messages);
                self.enqueue(p, h.messages, cursor)?;
            }
        }
        if self.members.is_empty() {
            self.counts.nobody_left();
            self.next = 0;
        }
        Ok(held)
    }

    /// Whether a consumer is registered.
    pub fn has_consumer(&self, id: u32) -> bool {
        self.members.iter().any(|m| m.id == id)
    }

    /// Adds permits (messages) to a consumer.
    pub fn add_permits(&mut self, id: u32, permits: u64) -> Result<()> {
        let i = self.member_index(id)?;
        let m = &mut self.members[i];
        m.permits = m.permits.saturating_add(clamp(permits));
        Ok(())
    }

    /// Pauses a consumer (nothing is sent to it) or resumes it: a connection that does not keep
    /// up is paused by the broker and resumed when it drains.
    pub fn set_paused(&mut self, id: u32, paused: bool) -> Result<()> {
        let i = self.member_index(id)?;
        self.members[i].paused = paused;
        Ok(())
    }

    /// Permits of the consumers that can take messages now.
    pub fn permits_total(&self) -> u64 {
        if self.subscription_blocked() {
            return 0;
        }
        self.members
            .iter()
            .filter(|m| self.can_take(m))
            .map(|m| m.permits as u64)
            .sum()
    }

    /// How many new entries to read: none while the queue has entries (replay first) or no
    /// consumer can take any, else the permits of those that can, up to `read_batch`.
    pub fn entries_to_read(&self, read_batch: u64) -> u64 {
        if !self.queue.is_empty() {
            return 0;
        }
        self.permits_total().min(read_batch)
    }

    pub(super) fn can_take(&self, m: &Member) -> bool {
        m.permits > 0
            && !m.paused
            && (self.max_unacked_per_consumer == 0 || m.unacked < self.max_unacked_per_consumer)
    }

    pub(super) fn subscription_blocked(&self) -> bool {
        self.max_unacked_per_subscription != 0
            && self.unacked_total >= self.max_unacked_per_subscription
    }

    /// Queues a position unless the cursor acked it (then it is dropped and counted).
    pub(super) fn enqueue(&mut self, p: Position, messages: u32, cursor: &Cursor) -> Result<()> {
        if cursor.is_acked(p.ledger_id, p.entry_id)? {
            self.dropped_acked += 1;
            self.counts.remove(&p);
        } else {
            self.queue.insert(p, messages);
        }
        Ok(())
    }
}

fn clamp(permits: u64) -> i64 {
    i64::try_from(permits).unwrap_or(i64::MAX)
}
