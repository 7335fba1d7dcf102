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

    pub(super) fn positions(&self) -> impl Iterator<Item = (Position, u16)> + '_ {
        self.queue.iter().map(|(p, s)| (*p, *s))
    }

    pub(super) fn clear(&mut self) {
        self.queue.clear();
        self.per_slot.fill(0);
    }
}
