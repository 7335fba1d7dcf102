//! The replay queue: positions waiting for redelivery, in position order, with a per-slot count so
//! that a new entry can see at once whether an earlier message of its hash is waiting.
//!
//! Positions mostly arrive in order (a consumer's nacks, a leaver's messages, one call at a time),
//! so the queue is two sorted parts: a tree for what arrives out of order and a `tail` vector
//! that an in-order arrival is appended to (no tree search from the root per nack). A removal
//! from the tail marks the item, and the tail is compacted once half of it is marked. A dispatch
//! walks both parts merged, in position order (one pass over both).

use std::collections::BTreeMap;

use crate::ackstate::position::Position;

use super::SLOTS;

/// Positions to redeliver (position → slot) and how many wait per slot.
#[derive(Debug, Clone)]
pub(super) struct ReplayQueue {
    tree: BTreeMap<Position, u16>,
    /// Ascending; `None` marks a removed item (kept until the next compaction).
    tail: Vec<(Position, Option<u16>)>,
    /// Marked items in `tail`.
    dead: usize,
    per_slot: Box<[u32]>,
}

impl Default for ReplayQueue {
    fn default() -> Self {
        Self {
            tree: BTreeMap::new(),
            tail: Vec::new(),
            dead: 0,
            per_slot: vec![0; SLOTS].into_boxed_slice(),
        }
    }
}

impl ReplayQueue {
    pub(super) fn len(&self) -> usize {
        self.tree.len() + self.tail.len() - self.dead
    }

    pub(super) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether a message of `slot` waits (later entries of that slot must wait behind it).
    #[inline]
    pub(super) fn has_slot(&self, slot: u16) -> bool {
        self.per_slot[usize::from(slot)] > 0
    }

    /// Index of `pos` in the tail, if it is there (marked or not).
    #[inline]
    fn in_tail(&self, pos: Position) -> Option<usize> {
        match self.tail.last() {
            Some((last, _)) if pos <= *last => {
                self.tail.binary_search_by(|(p, _)| p.cmp(&pos)).ok()
            }
            _ => None,
        }
    }

    pub(super) fn contains(&self, pos: Position) -> bool {
        match self.in_tail(pos) {
            Some(i) => self.tail[i].1.is_some(),
            None => self.tree.contains_key(&pos),
        }
    }

    /// Queues `pos`; false if it was queued already.
    #[inline]
    pub(super) fn insert(&mut self, pos: Position, slot: u16) -> bool {
        let after_tail = self.tail.last().is_none_or(|(last, _)| pos > *last);
        if after_tail {
            // In order: appended, once the tree is known not to hold it.
            if self.tree.contains_key(&pos) {
                return false;
            }
            self.tail.push((pos, Some(slot)));
        } else if let Some(i) = self.in_tail(pos) {
            if self.tail[i].1.is_some() {
                return false;
            }
            self.tail[i].1 = Some(slot); // a marked item comes back
            self.dead -= 1;
        } else {
            match self.tree.entry(pos) {
                std::collections::btree_map::Entry::Occupied(_) => return false,
                std::collections::btree_map::Entry::Vacant(v) => {
                    v.insert(slot);
                }
            }
        }
        self.per_slot[usize::from(slot)] += 1;
        true
    }

    /// Removes `pos`; returns its slot.
    pub(super) fn remove(&mut self, pos: Position) -> Option<u16> {
        let slot = match self.in_tail(pos) {
            Some(i) => {
                let slot = self.tail[i].1.take()?;
                self.dead += 1;
                if self.dead == self.tail.len() {
                    self.tail.clear();
                    self.dead = 0;
                } else if self.dead * 2 > self.tail.len() {
                    self.tail.retain(|(_, s)| s.is_some());
                    self.dead = 0;
                }
                slot
            }
            None => self.tree.remove(&pos)?,
        };
        self.per_slot[usize::from(slot)] -= 1;
        Some(slot)
    }

    /// Every queued position with its slot, in position order, collected (what a dispatch walks:
    /// one part alone is copied as it is, two are merged by one pass over both).
    pub(super) fn to_vec(&self) -> Vec<(Position, u16)> {
        let live = self.tail.iter().filter_map(|(p, s)| s.map(|s| (*p, s)));
        let mut out = Vec::with_capacity(self.len());
        if self.tree.is_empty() {
            out.extend(live);
            return out;
        }
        let mut tree = self.tree.iter().map(|(p, s)| (*p, *s));
        let mut next_tree = tree.next();
        for (p, s) in live {
            while let Some(t) = next_tree.filter(|t| t.0 < p) {
                out.push(t);
                next_tree = tree.next();
            }
            out.push((p, s));
        }
        out.extend(next_tree);
        out.extend(tree);
        out
    }

    /// Every queued position with its slot, in position order.
    pub(super) fn positions(&self) -> impl Iterator<Item = (Position, u16)> {
        self.to_vec().into_iter()
    }

    pub(super) fn clear(&mut self) {
        self.tree.clear();
        self.tail.clear();
        self.dead = 0;
        self.per_slot.fill(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Random inserts (mostly in order, as nacks come) and removes against a sorted map: the same
    /// membership, slots, order and per-slot counts after every step.
    #[test]
    fn matches_a_sorted_map() {
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for round in 0..60 {
            let mut q = ReplayQueue::default();
            let mut model: BTreeMap<Position, u16> = BTreeMap::new();
            let mut cursor = 0i64;
            for _ in 0..500 {
                let pos = if next() % 3 == 0 || round % 4 == 0 {
                    Position {
                        ledger_id: (next() % 3) as i64,
                        entry_id: (next() % 64) as i64,
                    }
                } else {
                    cursor += (next() % 3) as i64; // in order, with repeats
                    Position {
                        ledger_id: 1 + cursor / 50,
                        entry_id: cursor % 50,
                    }
                };
                let slot = (next() % 8) as u16;
                if next() % 5 < 3 {
                    let fresh = !model.contains_key(&pos);
                    if fresh {
                        model.insert(pos, slot);
                    }
                    assert_eq!(q.insert(pos, slot), fresh);
                } else {
                    let victim = if next() % 2 == 0 {
                        model.keys().next().copied().unwrap_or(pos)
                    } else {
                        pos
                    };
                    assert_eq!(q.remove(victim), model.remove(&victim));
                }
                assert_eq!(q.len(), model.len());
                assert_eq!(q.contains(pos), model.contains_key(&pos));
            }
            let got: Vec<(Position, u16)> = q.positions().collect();
            let want: Vec<(Position, u16)> = model.iter().map(|(p, s)| (*p, *s)).collect();
            assert_eq!(got, want);
            assert_eq!(q.to_vec(), want);
            for s in 0..8u16 {
                let n = model.values().filter(|&&v| v == s).count() as u32;
                assert_eq!(q.per_slot[usize::from(s)], n);
            }
            q.clear();
            assert!(q.is_empty() && q.positions().next().is_none() && !q.has_slot(0));
        }
    }
}
