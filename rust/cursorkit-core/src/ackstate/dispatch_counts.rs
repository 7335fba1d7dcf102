//! A dispatcher's redelivery counts: the one place a count is raised, read and dropped.
//!
//! Pulsar's redelivery tracker: a nack or a redelivery request raises a position's count, an ack
//! drops it, and the last consumer leaving clears them all. With the journal on (durable counts,
//! beyond Pulsar) every raise is also written down for the caller to persist
//! ([`take_raised`](DispatchCounts::take_raised)), and the last consumer leaving clears nothing:
//! the persisted counts would say otherwise after a restart.

use crate::ackstate::position::Position;
use crate::mem::{map_bytes, FastMap};

/// Redelivery counts above zero, with an optional journal of raises (see the module docs).
#[derive(Debug, Clone, Default)]
pub struct DispatchCounts {
    counts: FastMap<Position, u32>,
    journal: Option<Vec<(Position, u32)>>,
}

impl DispatchCounts {
    /// A position's count, if above zero.
    pub fn get(&self, p: &Position) -> Option<&u32> {
        self.counts.get(p)
    }

    /// Forgets a position's count (acknowledged).
    pub fn remove(&mut self, p: &Position) -> Option<u32> {
        self.counts.remove(p)
    }

    /// Whether no position has a count.
    pub fn is_empty(&self) -> bool {
        self.counts.is_empty()
    }

    /// Positions with a count.
    pub fn len(&self) -> usize {
        self.counts.len()
    }

    /// One more redelivery of `p`; its new count (journaled when the journal is on).
    pub fn raise(&mut self, p: Position) -> u32 {
        let c = self.counts.entry(p).or_insert(0);
        *c = c.saturating_add(1);
        let now = *c;
        if let Some(j) = self.journal.as_mut() {
            j.push((p, now));
        }
        now
    }

    /// Forgets every count and the journal's unread raises (a seek).
    pub fn clear(&mut self) {
        self.counts.clear();
        if let Some(j) = self.journal.as_mut() {
            j.clear();
        }
    }

    /// The last consumer left: Pulsar forgets the counts; a journaled (durable) tally keeps them.
    pub fn nobody_left(&mut self) {
        if self.journal.is_none() {
            self.counts.clear();
        }
    }

    /// Turns the journal on or off (off drops its unread raises).
    pub fn set_journal(&mut self, on: bool) {
        match (on, self.journal.is_some()) {
            (true, false) => self.journal = Some(Vec::new()),
            (false, true) => self.journal = None,
            _ => {}
        }
    }

    /// Whether raises are journaled.
    pub fn journaled(&self) -> bool {
        self.journal.is_some()
    }

    /// Counts known from elsewhere (a durable journal read back): each position keeps the higher
    /// of its count and the given one; a zero changes nothing. Not journaled.
    pub fn seed(&mut self, seeds: impl IntoIterator<Item = (Position, u32)>) {
        for (p, n) in seeds {
            if n > 0 {
                let c = self.counts.entry(p).or_insert(0);
                *c = (*c).max(n);
            }
        }
    }

    /// The raises since the last call, in the order made (a position raised twice appears twice,
    /// its later count last); empty when the journal is off.
    pub fn take_raised(&mut self) -> Vec<(Position, u32)> {
        self.journal
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    }

    /// Heap bytes, roughly.
    pub fn memory_usage(&self) -> usize {
        map_bytes(&self.counts) + self.journal.as_ref().map_or(0, |j| j.capacity() * 16)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(e: i64) -> Position {
        Position::new(1, e).unwrap()
    }

    #[test]
    fn raises_are_journaled_only_when_on() {
        let mut c = DispatchCounts::default();
        assert_eq!(c.raise(p(1)), 1);
        assert!(c.take_raised().is_empty());
        c.set_journal(true);
        assert_eq!(c.raise(p(1)), 2);
        assert_eq!(c.raise(p(2)), 1);
        assert_eq!(c.take_raised(), vec![(p(1), 2), (p(2), 1)]);
        assert!(c.take_raised().is_empty());
    }

    #[test]
    fn nobody_left_clears_only_without_a_journal() {
        let mut c = DispatchCounts::default();
        c.raise(p(1));
        c.nobody_left();
        assert!(c.is_empty());
        c.set_journal(true);
        c.raise(p(1));
        c.nobody_left();
        assert_eq!(c.get(&p(1)), Some(&1));
    }

    #[test]
    fn seeds_keep_the_higher_count() {
        let mut c = DispatchCounts::default();
        c.raise(p(1));
        c.raise(p(1));
        c.seed([(p(1), 1), (p(2), 3), (p(3), 0)]);
        assert_eq!(c.get(&p(1)), Some(&2));
        assert_eq!(c.get(&p(2)), Some(&3));
        assert_eq!(c.get(&p(3)), None);
        c.set_journal(true);
        c.raise(p(2));
        c.clear();
        assert!(c.is_empty() && c.take_raised().is_empty());
    }
}
