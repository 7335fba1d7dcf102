//! `QueuedEntries`: the entry ids of one ledger that a delay queue holds, as a roaring bitmap with
//! an append buffer in front of it.
//!
//! A read hands delayed messages over in entry order, so almost every add is past everything held:
//! those go to a short sorted `tail` (a comparison and a push) and reach the bitmap 128 at a time,
//! appended in order, instead of paying roaring's container search, binary search and store checks
//! one by one.

use roaring::RoaringBitmap;

use crate::mem::bitmap_bytes;

/// Entries buffered before they are folded into the bitmap in one union.
const TAIL: usize = 128;

/// A set of entry ids: `bits` plus `tail`, which is sorted, duplicate-free and above every id in
/// `bits`; `top` is at least the largest id ever added (-1 for none), so an id above it is new.
#[derive(Debug, Clone)]
pub(crate) struct QueuedEntries {
    bits: RoaringBitmap,
    tail: Vec<u32>,
    top: i64,
}

impl Default for QueuedEntries {
    fn default() -> Self {
        Self {
            bits: RoaringBitmap::new(),
            tail: Vec::new(),
            top: -1,
        }
    }
}

impl QueuedEntries {
    /// Adds `e`; false when it is already held.
    #[inline]
    pub(crate) fn insert(&mut self, e: u32) -> bool {
        if i64::from(e) > self.top {
            // Past everything ever added: new, and in order for the tail.
            self.top = i64::from(e);
            if self.tail.len() == TAIL {
                self.fold();
            }
            self.tail.push(e);
            return true;
        }
        if self.tail.first().is_some_and(|&first| e >= first) {
            if self.tail.binary_search(&e).is_ok() {
                return false;
            }
            // Out of order inside the tail: the tail goes into the bitmap (and its buffer goes:
            // adds out of order would leave it idle), and `e` after it.
            self.fold();
            self.tail = Vec::new();
        }
        self.bits.insert(e)
    }

    /// Whether `e` is held.
    #[inline]
    pub(crate) fn contains(&self, e: u32) -> bool {
        if self.tail.first().is_some_and(|&first| e >= first) {
            self.tail.binary_search(&e).is_ok()
        } else {
            self.bits.contains(e)
        }
    }

    /// Removes `e`; whether it was held.
    #[inline]
    pub(crate) fn remove(&mut self, e: u32) -> bool {
        if self.tail.first().is_some_and(|&first| e >= first) {
            match self.tail.binary_search(&e) {
                Ok(i) => {
                    self.tail.remove(i);
                    true
                }
                Err(_) => false,
            }
        } else {
            self.bits.remove(e)
        }
    }

    /// Heap bytes held (the bitmap's containers and the tail's capacity).
    pub(crate) fn memory_usage(&self) -> usize {
        bitmap_bytes(&self.bits) + self.tail.capacity() * 4
    }

    /// Moves the tail into the bitmap: appended in order (one search for the bitmap's maximum,
    /// then a push each), which a union would not do (it merges whole containers).
    fn fold(&mut self) {
        let appended = self.bits.append(self.tail.iter().copied());
        if appended.is_err() {
            // Cannot happen (the tail is sorted and above the bitmap); stay correct regardless.
            self.bits.extend(self.tail.iter().copied());
        }
        self.tail.clear();
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    /// Random adds (mostly ascending, some behind, repeats) and removes, against a `BTreeSet`.
    #[test]
    fn randomised_against_a_set() {
        let mut rng = crate::testing::Rng(0x2545_F491_4F6C_DD1D);
        let mut next = move |n: u64| rng.below(n);
        for _ in 0..100 {
            let mut set = QueuedEntries::default();
            let mut model = BTreeSet::new();
            let mut front = 0u32;
            for _ in 0..2_000 {
                let e = match next(10) {
                    0..=5 => {
                        front += next(4) as u32;
                        front
                    }
                    6 | 7 => front.saturating_sub(next(300) as u32),
                    _ => next(u64::from(front) + 1) as u32,
                };
                if next(4) == 0 {
                    assert_eq!(set.remove(e), model.remove(&e), "remove {e}");
                } else {
                    assert_eq!(set.insert(e), model.insert(e), "insert {e}");
                }
                let probe = next(u64::from(front) + 2) as u32;
                assert_eq!(
                    set.contains(probe),
                    model.contains(&probe),
                    "contains {probe}"
                );
            }
            for e in 0..=front + 1 {
                assert_eq!(set.contains(e), model.contains(&e), "final {e}");
            }
        }
    }
}
