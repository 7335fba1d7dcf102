//! Acks (from any consumer), cumulative acks, nacks and redelivery.

use super::{Held, SharedCore};
use crate::ackstate::cursor::Cursor;
use crate::ackstate::position::{check_entries, check_entry, Position};
use crate::error::Result;

/// What an ack did. Every well-formed ack reaches the cursor, as in Pulsar.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AckCounts {
    /// Entries that were in flight (on whichever consumer): released.
    pub released: u64,
    /// Entries in flight on no consumer (never sent, or waiting in the queue): acked on the cursor.
    pub not_held: u64,
    /// Entries the cursor had acknowledged already.
    pub duplicates: u64,
}

impl SharedCore {
    /// Takes a position off its holder; returns what it held.
    fn release(&mut self, p: Position) -> Option<Held> {
        let h = self.held.remove(&p)?;
        if let Some(m) = self.members.iter_mut().find(|m| m.id == h.consumer) {
            m.held.remove(&p);
            m.unacked = m.unacked.saturating_sub(u64::from(h.messages));
        }
        self.unacked_total = self.unacked_total.saturating_sub(u64::from(h.messages));
        Some(h)
    }

    /// Acknowledges entries, whoever holds them (Pulsar accepts an ack from any consumer of the
    /// subscription); each reaches the cursor. Checked whole before anything changes.
    pub fn ack(
        &mut self,
        ledgers: &[i64],
        entries: &[i64],
        cursor: &mut Cursor,
    ) -> Result<AckCounts> {
        check_entries(ledgers, entries)?;
        cursor.check_ackable(ledgers, entries)?;
        let mut out = AckCounts::default();
        for (&l, &e) in ledgers.iter().zip(entries) {
            let p = Position::new(l, e)?;
            if self.release(p).is_some() {
                out.released += 1;
            } else {
                out.not_held += 1;
                self.queue.remove(&p);
            }
            self.counts.remove(&p);
            if !cursor.ack(l, e)? {
                out.duplicates += 1;
            }
        }
        Ok(out)
    }

    /// Acknowledges everything up to and including a position (Exclusive and Failover; Pulsar
    /// refuses cumulative acks on Shared subscriptions at the protocol level, the broker's call).
    pub fn ack_cumulative(
        &mut self,
        ledger: i64,
        entry: i64,
        cursor: &mut Cursor,
    ) -> Result<AckCounts> {
        check_entry(ledger, entry)?;
        let upto = Position::new(ledger, entry)?;
        let mut out = AckCounts::default();
        if !cursor.ack_cumulative(ledger, entry)? {
            out.duplicates += 1;
        }
        let done: Vec<Position> = self.held.keys().copied().filter(|&p| p <= upto).collect();
        for p in done {
            self.release(p);
            self.counts.remove(&p);
            out.released += 1;
        }
        let rest = self.queue.split_off(&Position {
            ledger_id: upto.ledger_id,
            entry_id: upto.entry_id + 1,
        });
        out.not_held += self.queue.len() as u64;
        for p in self.queue.keys() {
            self.counts.remove(p);
        }
        self.queue = rest;
        Ok(out)
    }

    /// A consumer's negative acks: the positions it holds go back to the queue with their
    /// redelivery count raised; positions it does not hold are ignored. Returns how many went
    /// back.
    pub fn nack(
        &mut self,
        id: u32,
        ledgers: &[i64],
        entries: &[i64],
        cursor: &Cursor,
    ) -> Result<u64> {
        check_entries(ledgers, entries)?;
        self.member_index(id)?;
        let mut back = 0;
        for (&l, &e) in ledgers.iter().zip(entries) {
            let p = Position::new(l, e)?;
            if self.holder(p) != Some(id) {
                continue;
            }
            back += u64::from(self.back(p, cursor)?);
        }
        Ok(back)
    }

    /// Everything a consumer holds goes back to the queue, each redelivery count raised
    /// (REDELIVER_UNACKNOWLEDGED_MESSAGES without ids). Returns how many went back.
    pub fn redeliver_all(&mut self, id: u32, cursor: &Cursor) -> Result<u64> {
        let i = self.member_index(id)?;
        let held: Vec<Position> = self.members[i].held.iter().copied().collect();
        let mut back = 0;
        for p in held {
            back += u64::from(self.back(p, cursor)?);
        }
        Ok(back)
    }

    /// Releases a held position into the queue with its count raised; false when the cursor had
    /// acked it (then it is dropped).
    fn back(&mut self, p: Position, cursor: &Cursor) -> Result<bool> {
        let Some(h) = self.release(p) else {
            return Ok(false);
        };
        self.counts.raise(p);
        self.enqueue(p, h.messages, cursor)?;
        Ok(self.queue.contains_key(&p))
    }
}
