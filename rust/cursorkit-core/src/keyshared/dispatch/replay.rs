//! The replay queue: positions waiting for redelivery, in position order, with a per-slot count so
//! that a new entry can see at once whether an earlier message of its hash is waiting.

use std::collections::BTreeMap;

use crate::Position;

use super::SLOTS;

/// Positions to redeliver (position → slot) and how many wait per slot.
#[derive(Debug, Clone)]
pub(super) struct ReplayQueue {
    queue: BTreeMap<Position, u16>,
    per_slot: Box<[u32]>,
}

impl Default for ReplayQueue {
    fn default() -> Self {
        Self {
            queue: BTreeMap::new(),
            per_slot: vec![0; SLOTS].into_boxed_slice(),
        }
    }
}

impl ReplayQueue {
    pub(super) fn len(&self) -> usize {
        self.queue.len()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// Whether a message of `slot` waits (later entries of that slot must wait behind it).
    #[inline]
    pub(super) fn has_slot(&self, slot: u16) -> bool {
        self.per_slot[usize::from(slot)] > 0
    }

    pub(super) fn contains(&self, pos: Position) -> bool {
        self.queue.contains_key(&pos)
    }

    /// Queues `pos`; false if it was queued already.
    #[inline]
    pub(super) fn insert(&mut self, pos: Position, slot: u16) -> bool {
        match self.queue.entry(pos) {
            std::collections::btree_map::Entry::Occupied(_) => false,
            std::collections::btree_map::Entry::Vacant(v) => {
                v.insert(slot);
                self.per_slot[usize::from(slot)] += 1;
                true
            }
        }
    }

    /// Removes `pos`; returns its slot.
    pub(super) fn remove(&mut self, pos: Position) -> Option<u16> {
        let slot = self.queue.remove(&pos)?;
        self.per_slot[usize::from(slot)] -= 1;
        Some(slot)
    }

    /// Takes everything out, in order (the caller puts back what it does not send).
    pub(super) fn take_all(&mut self) -> Vec<(Position, u16)> {
        let out: Vec<(Position, u16)> = std::mem::take(&mut self.queue).into_iter().collect();
        self.per_slot.fill(0);
        out
    }

    /// Puts back entries taken by [`take_all`](Self::take_all), already in order.
    pub(super) fn restore(&mut self, kept: impl IntoIterator<Item = (Position, u16)>) {
        for (pos, slot) in kept {
            self.insert(pos, slot);
        }
    }

    pub(super) fn positions(&self) -> impl Iterator<Item = (Position, u16)> + '_ {
        self.queue.iter().map(|(p, s)| (*p, *s))
    }

    pub(super) fn clear(&mut self) {
        self.queue.clear();
        self.per_slot.fill(0);
    }
}
