//! Reads in, deliveries out: the round-robin dispatch over permits.

use super::{Held, SharedCore};
use crate::ackstate::batch::check_batch_sizes;
use crate::ackstate::cursor::Cursor;
use crate::ackstate::position::{check_entries, Position};
use crate::error::Result;

/// What one dispatch sends to one consumer: positions in order, with their redelivery counts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sent {
    /// The consumer id.
    pub consumer: u32,
    /// Ledger ids of the entries sent.
    pub ledgers: Vec<i64>,
    /// Entry ids of the entries sent.
    pub entries: Vec<i64>,
    /// Each entry's redelivery count.
    pub counts: Vec<u32>,
}

impl SharedCore {
    /// Adds entries read from the log (or due delayed messages) with their message counts
    /// (a batch's `num_messages_in_batch`, else 1). Entries the cursor acked, or already in
    /// flight or queued, are skipped. Checked whole before anything changes.
    pub fn add_read(
        &mut self,
        ledgers: &[i64],
        entries: &[i64],
        messages: &[i64],
        cursor: &Cursor,
    ) -> Result<()> {
        check_entries(ledgers, entries)?;
        check_batch_sizes(messages, ledgers.len())?;
        for ((&l, &e), &m) in ledgers.iter().zip(entries).zip(messages) {
            let p = Position::new(l, e)?;
            if self.held.contains_key(&p) || self.queue.contains_key(&p) {
                continue;
            }
            self.enqueue(p, m as u32, cursor)?;
        }
        Ok(())
    }

    /// The next consumer to serve: the best priority level with a consumer that can take
    /// messages, round-robin within it from where the last turn ended.
    fn next_consumer(&self) -> Option<usize> {
        let n = self.members.len();
        let best = self
            .members
            .iter()
            .filter(|m| self.can_take(m))
            .map(|m| m.priority)
            .min()?;
        (0..n)
            .map(|k| (self.next + k) % n)
            .find(|&i| self.members[i].priority == best && self.can_take(&self.members[i]))
    }

    /// Messages consumer `i` may get this turn: its permits, the round-robin batch and the room
    /// left under both unacked limits (a turn still sends at least one entry).
    fn quota(&self, i: usize) -> i64 {
        let m = &self.members[i];
        let room = |limit: u64, used: u64| {
            if limit == 0 {
                i64::MAX
            } else {
                i64::try_from(limit.saturating_sub(used)).unwrap_or(i64::MAX)
            }
        };
        m.permits
            .min(i64::from(self.round_robin_batch))
            .min(room(self.max_unacked_per_consumer, m.unacked))
            .min(room(self.max_unacked_per_subscription, self.unacked_total))
    }

    /// Sends what can be sent now, the queue's first position first. Returns the deliveries per
    /// consumer, in the order of their first turn.
    pub fn dispatch(&mut self, cursor: &Cursor) -> Result<Vec<Sent>> {
        let mut out: Vec<Sent> = Vec::new();
        while !self.queue.is_empty() && !self.subscription_blocked() {
            let Some(i) = self.next_consumer() else {
                break;
            };
            self.next = (i + 1) % self.members.len();
            let id = self.members[i].id;
            let quota = self.quota(i);
            let slot = match out.iter().position(|s| s.consumer == id) {
                Some(k) => k,
                None => {
                    out.push(Sent {
                        consumer: id,
                        ..Sent::default()
                    });
                    out.len() - 1
                }
            };
            let mut given = 0i64;
            while given < quota {
                let Some((p, messages)) = self.queue.pop_first() else {
                    break;
                };
                if cursor.is_acked(p.ledger_id, p.entry_id)? {
                    self.dropped_acked += 1;
                    self.counts.remove(&p);
                    continue;
                }
                let m = &mut self.members[i];
                m.held.insert(p);
                m.permits -= i64::from(messages);
                m.unacked += u64::from(messages);
                m.msg_out += u64::from(messages);
                self.unacked_total += u64::from(messages);
                self.held.insert(
                    p,
                    Held {
                        consumer: id,
                        messages,
                    },
                );
                let s = &mut out[slot];
                s.ledgers.push(p.ledger_id);
                s.entries.push(p.entry_id);
                s.counts.push(self.counts.get(&p).copied().unwrap_or(0));
                given += i64::from(messages);
            }
        }
        out.retain(|s| !s.entries.is_empty());
        Ok(out)
    }
}
