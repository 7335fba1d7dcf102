//! `DelayQueue`: delayed message indexes `(deliver_at, ledger, entry)`, unique by position and
//! popped in exact `(deliver_at, ledger, entry)` order, in about 5–15 bytes an index.
//!
//! Pulsar keeps these in a binary heap of three longs (24 B an index, O(log n) per add and pop).
//! Here indexes are grouped into *calendar buckets* of 4.096 s (`deliver_at >> 12`):
//!
//! * a bucket key → slab map (with a one-entry cache) finds the bucket of an add in O(1), and a
//!   min-heap of bucket keys orders the buckets; only the head bucket is ever sorted;
//! * an index is one `u64`: the 12 low bits of `deliver_at`, a 20-bit *ledger slot* and the 32-bit
//!   entry. A ledger table gives each live ledger a slot (freed, and reused, when its last index
//!   leaves) and a roaring bitmap of its queued entries, which is what makes adds idempotent;
//! * a bucket stays unsorted until it becomes the head; then it is sorted once, descending by
//!   `(deliver_at, ledger id, entry)`, and popped from the end. Slot order is not ledger order, so
//!   the sort ranks the bucket's slots by ledger id first;
//! * a bucket whose indexes share few `(deliver_at, ledger)` pairs (on average ≥ 8 an index, as
//!   when producers use a fixed set of delivery times) is stored *grouped*: one word per pair plus
//!   a `u32` per entry, about 4–5 bytes an index. It is expanded when it becomes the head;
//! * an add into a bucket that is already sorted goes in by binary search while the bucket is
//!   small, and into a small side heap otherwise, so a large head bucket never shifts per add.
//!
//! A bucket and its packed index are `bucket.rs`; a ledger's queued entries `queued_entries.rs`.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::mem::size_of;

use super::bucket::{
    delta_of, entry_of, maybe_group, merge_pending, pack, slot_of, with_slot, Bucket, BUCKET_BITS,
    CLUSTER_MIN_LEN, DELTA_MASK, SLOT_BITS,
};
use super::queued_entries::QueuedEntries;
use crate::ackstate::position::{check_entry, MAX_ENTRY_ID};
use crate::error::{CoreError, Result};
use crate::mem::{map_bytes, FastMap};

/// Most ledgers that can hold queued indexes at the same time (2^20); one more is an error.
pub const MAX_LIVE_LEDGERS: usize = 1 << SLOT_BITS;
/// A sorted bucket up to this length takes adds by binary search; beyond it, adds go to the side
/// heap (a shift per add would cost O(bucket) each).
const SORTED_INSERT_MAX: usize = 256;
/// `Slot::mark` when unused.
const UNMARKED: u32 = u32::MAX;

/// Popped indexes as three columns (struct of arrays), in pop order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Popped {
    /// Delivery times.
    pub at: Vec<i64>,
    /// Ledger ids.
    pub ledgers: Vec<i64>,
    /// Entry ids.
    pub entries: Vec<i64>,
}

impl Popped {
    /// Empty columns.
    pub fn new() -> Self {
        Self::default()
    }

    /// Empty columns with room for `n` indexes.
    pub fn with_capacity(n: usize) -> Self {
        Self {
            at: Vec::with_capacity(n),
            ledgers: Vec::with_capacity(n),
            entries: Vec::with_capacity(n),
        }
    }

    /// Number of indexes held.
    pub fn len(&self) -> usize {
        self.at.len()
    }

    /// True when nothing is held.
    pub fn is_empty(&self) -> bool {
        self.at.is_empty()
    }

    /// Forgets the indexes, keeping the capacity.
    pub fn clear(&mut self) {
        self.at.clear();
        self.ledgers.clear();
        self.entries.clear();
    }

    #[inline]
    fn push(&mut self, at: i64, ledger: i64, entry: u32) {
        self.at.push(at);
        self.ledgers.push(ledger);
        self.entries.push(i64::from(entry));
    }
}

/// One live ledger: its id, how many of its indexes are queued, and which entries.
#[derive(Debug, Clone)]
struct Slot {
    ledger: i64,
    count: u64,
    bits: QueuedEntries,
    /// Scratch for sorting (the slot's rank by ledger id inside one bucket).
    mark: u32,
}

/// An index that arrived in an already sorted bucket too large to shift.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Late {
    at: i64,
    ledger: i64,
    entry: u32,
    slot: u32,
}

/// A set of delayed message indexes `(deliver_at, ledger, entry)`, unique by `(ledger, entry)`,
/// popped in exact `(deliver_at, ledger, entry)` order.
///
/// Limits: `deliver_at` in `0..=i64::MAX`, ledger ids in `0..2^63`, entry ids in `0..2^32`, and at
/// most [`MAX_LIVE_LEDGERS`] ledgers with queued indexes at once (an add beyond that is an
/// `InvalidArgument` error; a ledger stops counting when its last index is popped or removed).
///
/// ```
/// use cursorkit_core::{DelayQueue, Popped};
/// let mut q = DelayQueue::new();
/// assert!(q.add(5_000, 3, 7).unwrap());
/// assert!(q.add(1_000, 4, 0).unwrap());
/// assert!(!q.add(9_000, 3, 7).unwrap()); // already queued: the first time wins
/// assert_eq!(q.peek(), Some((1_000, 4, 0)));
/// let mut out = Popped::new();
/// assert_eq!(q.pop_due(4_999, 100, &mut out), 1);
/// assert_eq!((out.at, out.ledgers, out.entries), (vec![1_000], vec![4], vec![0]));
/// assert_eq!(q.len(), 1);
/// ```
#[derive(Debug, Clone)]
pub struct DelayQueue {
    slots: Vec<Slot>,
    free_slots: Vec<u32>,
    slot_of_ledger: FastMap<i64, u32>,
    /// `(ledger, slot)` of the last add; ledger -1 when unset.
    last_ledger: (i64, u32),
    buckets: Vec<Bucket>,
    free_buckets: Vec<u32>,
    bucket_of_key: FastMap<u64, u32>,
    /// Exactly the keys of `bucket_of_key`, smallest first.
    order: BinaryHeap<Reverse<u64>>,
    /// `(key, bucket)` of the last bucket used; key `u64::MAX` when unset.
    last_bucket: (u64, u32),
    late: BinaryHeap<Reverse<Late>>,
    len: u64,
}

impl Default for DelayQueue {
    fn default() -> Self {
        Self::new()
    }
}

impl DelayQueue {
    /// An empty queue.
    pub fn new() -> Self {
        Self {
            slots: Vec::new(),
            free_slots: Vec::new(),
            slot_of_ledger: FastMap::default(),
            last_ledger: (-1, 0),
            buckets: Vec::new(),
            free_buckets: Vec::new(),
            bucket_of_key: FastMap::default(),
            order: BinaryHeap::new(),
            last_bucket: (u64::MAX, 0),
            late: BinaryHeap::new(),
            len: 0,
        }
    }

    /// Number of queued indexes (distinct positions).
    pub fn len(&self) -> u64 {
        self.len
    }

    /// True when nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Number of ledgers with queued indexes.
    pub fn ledger_count(&self) -> usize {
        self.slot_of_ledger.len()
    }

    /// Whether the position is queued (invalid ids are simply not queued).
    pub fn contains(&self, ledger: i64, entry: i64) -> bool {
        if !(0..=MAX_ENTRY_ID).contains(&entry) {
            return false;
        }
        self.slot_of_ledger
            .get(&ledger)
            .is_some_and(|&s| self.slots[s as usize].bits.contains(entry as u32))
    }

    /// Queues one index; false when the position is already queued (the first time wins).
    #[inline]
    pub fn add(&mut self, at: i64, ledger: i64, entry: i64) -> Result<bool> {
        check_at(at, None)?;
        let entry = check_entry(ledger, entry)?;
        self.check_room(1, std::iter::once(ledger))?;
        Ok(self.insert(at, ledger, entry))
    }

    /// Queues many indexes given as equal-length columns; returns how many were new.
    ///
    /// Every value is checked before anything changes, so a rejected batch leaves the queue as it
    /// was. Within a batch, as across calls, the first occurrence of a position wins.
    pub fn add_many(&mut self, at: &[i64], ledgers: &[i64], entries: &[i64]) -> Result<u64> {
        check_columns(at, ledgers, entries)?;
        self.check_room(ledgers.len(), ledgers.iter().copied())?;
        let mut added = 0;
        for ((&t, &l), &e) in at.iter().zip(ledgers).zip(entries) {
            added += u64::from(self.insert(t, l, e as u32));
        }
        Ok(added)
    }

    /// Errors when queuing these `n` ledgers could make more than [`MAX_LIVE_LEDGERS`] live.
    pub(crate) fn check_room(&self, n: usize, ledgers: impl Iterator<Item = i64>) -> Result<()> {
        let live = self.slot_of_ledger.len();
        if live.saturating_add(n) <= MAX_LIVE_LEDGERS {
            return Ok(());
        }
        let mut new = FastMap::<i64, ()>::default();
        for l in ledgers {
            if !self.slot_of_ledger.contains_key(&l) {
                new.insert(l, ());
                if live + new.len() > MAX_LIVE_LEDGERS {
                    return Err(CoreError::InvalidArgument(format!(
                        "adding ledger {l} would give more than {MAX_LIVE_LEDGERS} ledgers with \
                         queued indexes ({live} now)"
                    )));
                }
            }
        }
        Ok(())
    }

    /// Queues a checked index (room for its ledger already ensured); false if already queued.
    #[inline]
    pub(crate) fn insert(&mut self, at: i64, ledger: i64, entry: u32) -> bool {
        let slot = self.slot_for(ledger);
        let s = &mut self.slots[slot as usize];
        if !s.bits.insert(entry) {
            return false;
        }
        s.count += 1;
        self.len += 1;
        let b = self.bucket_for((at >> BUCKET_BITS) as u64);
        let item = pack((at & DELTA_MASK) as u64, slot, entry);
        self.push_item(b, item, at, ledger);
        true
    }

    #[inline]
    fn slot_for(&mut self, ledger: i64) -> u32 {
        if self.last_ledger.0 == ledger {
            return self.last_ledger.1;
        }
        let slot = match self.slot_of_ledger.get(&ledger) {
            Some(&s) => s,
            None => self.new_slot(ledger),
        };
        self.last_ledger = (ledger, slot);
        slot
    }

    fn new_slot(&mut self, ledger: i64) -> u32 {
        let slot = match self.free_slots.pop() {
            Some(s) => {
                self.slots[s as usize].ledger = ledger;
                s
            }
            None => {
                debug_assert!(self.slots.len() < MAX_LIVE_LEDGERS);
                self.slots.push(Slot {
                    ledger,
                    count: 0,
                    bits: QueuedEntries::default(),
                    mark: UNMARKED,
                });
                (self.slots.len() - 1) as u32
            }
        };
        self.slot_of_ledger.insert(ledger, slot);
        slot
    }

    fn free_slot(&mut self, slot: usize) {
        let s = &mut self.slots[slot];
        self.slot_of_ledger.remove(&s.ledger);
        if self.last_ledger.0 == s.ledger {
            self.last_ledger = (-1, 0);
        }
        s.ledger = -1;
        s.count = 0;
        s.bits = QueuedEntries::default();
        self.free_slots.push(slot as u32);
    }

    #[inline]
    fn bucket_for(&mut self, key: u64) -> usize {
        if self.last_bucket.0 == key {
            return self.last_bucket.1 as usize;
        }
        let b = match self.bucket_of_key.get(&key) {
            Some(&b) => b,
            None => {
                let b = match self.free_buckets.pop() {
                    Some(b) => b,
                    None => {
                        self.buckets.push(Bucket::default());
                        (self.buckets.len() - 1) as u32
                    }
                };
                self.bucket_of_key.insert(key, b);
                self.order.push(Reverse(key));
                b
            }
        };
        self.last_bucket = (key, b);
        b as usize
    }

    #[inline]
    fn push_item(&mut self, b: usize, item: u64, at: i64, ledger: i64) {
        let bucket = &mut self.buckets[b];
        if bucket.sorted {
            if bucket.items.len() < SORTED_INSERT_MAX {
                let slots = &self.slots;
                let key = full_key(item, slots);
                let i = bucket.items.partition_point(|&y| full_key(y, slots) > key);
                bucket.items.insert(i, item);
            } else {
                self.late.push(Reverse(Late {
                    at,
                    ledger,
                    entry: entry_of(item),
                    slot: slot_of(item) as u32,
                }));
            }
            return;
        }
        bucket.items.push(item);
        let n = bucket.items.len();
        match &bucket.grouped {
            Some(g) => {
                if n >= CLUSTER_MIN_LEN.max(g.entries.len() / 4) {
                    merge_pending(bucket);
                }
            }
            None => {
                if n >= CLUSTER_MIN_LEN && n.is_power_of_two() {
                    maybe_group(bucket);
                }
            }
        }
    }

    /// The head bucket (smallest key), made ready to pop: expanded and sorted.
    fn head_bucket(&mut self) -> Option<(u64, usize)> {
        let &Reverse(key) = self.order.peek()?;
        let b = if self.last_bucket.0 == key {
            self.last_bucket.1 as usize
        } else {
            self.bucket_of_key[&key] as usize
        };
        let bucket = &mut self.buckets[b];
        if !bucket.sorted {
            let mut all = bucket.take_all();
            sort_descending(&mut all, &mut self.slots);
            bucket.items = all;
            bucket.sorted = true;
        }
        Some((key, b))
    }

    /// The smallest queued index `(deliver_at, ledger, entry)`, without removing it.
    pub fn peek(&mut self) -> Option<(i64, i64, i64)> {
        let from_bucket = self.head_bucket().map(|(key, b)| {
            let item = *self.buckets[b]
                .items
                .last()
                .expect("live buckets are non-empty");
            self.decode(key, item)
        });
        let from_late = self.late.peek().map(|Reverse(l)| (l.at, l.ledger, l.entry));
        let min = match (from_bucket, from_late) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        min.map(|(t, l, e)| (t, l, i64::from(e)))
    }

    #[inline]
    fn decode(&self, key: u64, item: u64) -> (i64, i64, u32) {
        (
            ((key << BUCKET_BITS) as i64) | delta_of(item),
            self.slots[slot_of(item)].ledger,
            entry_of(item),
        )
    }

    /// Pops, in order, up to `max` indexes whose `(deliver_at, ledger, entry)` is at most `limit`
    /// (lexicographically), appending them to `out`; returns how many were popped.
    pub fn pop_until(&mut self, limit: (i64, i64, i64), max: usize, out: &mut Popped) -> usize {
        let mut n = 0;
        while n < max {
            let head = self.head_bucket();
            let late = self
                .late
                .peek()
                .map(|Reverse(l)| (l.at, l.ledger, i64::from(l.entry)));
            let Some((key, b)) = head else {
                // Only late indexes remain.
                match late {
                    Some(l) if l <= limit => {
                        self.pop_late(out);
                        n += 1;
                        continue;
                    }
                    _ => break,
                }
            };
            let popped = self.pop_bucket(key, b, limit, late, max - n, out);
            if popped > 0 {
                n += popped;
                continue;
            }
            // The bucket's head is beyond `limit` or after the late head.
            match late {
                Some(l) if l <= limit => {
                    self.pop_late(out);
                    n += 1;
                }
                _ => break,
            }
        }
        self.maybe_shrink_late();
        n
    }

    /// Pops head indexes for as long as `stale(ledger, entry)` holds and returns how many went.
    ///
    /// Owners that untrack positions without popping them (an expired re-add, a trim inside the
    /// mark-delete ledger) call this so the head is always an index they still track.
    pub fn drop_stale_heads(&mut self, mut stale: impl FnMut(i64, i64) -> bool) -> u64 {
        let mut dropped = 0;
        let mut sink = Popped::new();
        while let Some(head) = self.peek() {
            if !stale(head.1, head.2) {
                break;
            }
            sink.clear();
            self.pop_until(head, 1, &mut sink);
            dropped += 1;
        }
        dropped
    }

    /// Pops everything due at `cutoff`: [`DelayQueue::pop_until`] with `(cutoff, i64::MAX, i64::MAX)`.
    pub fn pop_due(&mut self, cutoff: i64, max: usize, out: &mut Popped) -> usize {
        self.pop_until((cutoff, i64::MAX, i64::MAX), max, out)
    }

    /// Removes and returns every index, in order; the queue is empty afterwards.
    pub fn drain(&mut self) -> Popped {
        let mut out = Popped::with_capacity(self.len as usize);
        self.pop_until((i64::MAX, i64::MAX, i64::MAX), usize::MAX, &mut out);
        out
    }

    /// Pops from the head bucket while its indexes are `<= limit`, below `late` and fewer than `max`.
    fn pop_bucket(
        &mut self,
        key: u64,
        b: usize,
        limit: (i64, i64, i64),
        late: Option<(i64, i64, i64)>,
        max: usize,
        out: &mut Popped,
    ) -> usize {
        let base = (key << BUCKET_BITS) as i64;
        let mut n = 0;
        while n < max {
            let Some(&item) = self.buckets[b].items.last() else {
                break;
            };
            let slot = slot_of(item);
            let at = base | delta_of(item);
            let ledger = self.slots[slot].ledger;
            let entry = entry_of(item);
            let full = (at, ledger, i64::from(entry));
            if full > limit || late.is_some_and(|l| full > l) {
                break;
            }
            self.buckets[b].items.pop();
            out.push(at, ledger, entry);
            self.release(slot, entry);
            n += 1;
        }
        if self.buckets[b].items.is_empty() {
            self.remove_head_bucket(key, b);
        }
        n
    }

    fn pop_late(&mut self, out: &mut Popped) {
        if let Some(Reverse(l)) = self.late.pop() {
            out.push(l.at, l.ledger, l.entry);
            self.release(l.slot as usize, l.entry);
        }
    }

    /// Forgets one queued entry of a slot, freeing the slot with its last entry.
    #[inline]
    fn release(&mut self, slot: usize, entry: u32) {
        let s = &mut self.slots[slot];
        s.bits.remove(entry);
        s.count -= 1;
        self.len -= 1;
        if s.count == 0 {
            self.free_slot(slot);
        }
    }

    fn remove_head_bucket(&mut self, key: u64, b: usize) {
        self.order.pop();
        self.bucket_of_key.remove(&key);
        self.buckets[b] = Bucket::default();
        self.free_buckets.push(b as u32);
        if self.last_bucket.0 == key {
            self.last_bucket = (u64::MAX, 0);
        }
    }

    fn maybe_shrink_late(&mut self) {
        if self.late.is_empty() && self.late.capacity() > 0 {
            self.late = BinaryHeap::new();
        }
    }

    /// Drops every index of the ledgers below `ledger` (what is at or below mark-delete); returns
    /// how many were dropped.
    pub fn remove_ledgers_below(&mut self, ledger: i64) -> u64 {
        let doomed: Vec<usize> = self
            .slot_of_ledger
            .iter()
            .filter(|(&l, _)| l < ledger)
            .map(|(_, &s)| s as usize)
            .collect();
        if doomed.is_empty() {
            return 0;
        }
        let mut gone = vec![false; self.slots.len()];
        for &s in &doomed {
            gone[s] = true;
        }
        let keep = |item: &u64| !gone[slot_of(*item)];
        let mut emptied = Vec::new();
        for (&key, &b) in &self.bucket_of_key {
            let bucket = &mut self.buckets[b as usize];
            bucket.items.retain(keep);
            if let Some(mut g) = bucket.grouped.take() {
                if g.retain_slots(|slot| !gone[slot]) {
                    bucket.grouped = Some(g);
                }
            }
            if bucket.len() == 0 {
                emptied.push((key, b));
            } else {
                bucket.items.shrink_to(bucket.items.len());
            }
        }
        for (key, b) in emptied {
            self.bucket_of_key.remove(&key);
            self.buckets[b as usize] = Bucket::default();
            self.free_buckets.push(b);
        }
        self.order = self.bucket_of_key.keys().map(|&k| Reverse(k)).collect();
        self.last_bucket = (u64::MAX, 0);
        self.late.retain(|Reverse(l)| !gone[l.slot as usize]);
        self.maybe_shrink_late();
        let mut removed = 0;
        for s in doomed {
            removed += self.slots[s].count;
            self.len -= self.slots[s].count;
            self.free_slot(s);
        }
        removed
    }

    /// Drops everything and releases the memory.
    pub fn clear(&mut self) {
        *self = Self::new();
    }

    /// Heap bytes held: index vectors and groups, bucket slab and heap, hash maps, ledger table and
    /// its bitmaps, free lists and the side heap (capacities, not lengths).
    pub fn memory_usage(&self) -> usize {
        let buckets: usize = self.buckets.iter().map(Bucket::memory_usage).sum();
        let bitmaps: usize = self.slots.iter().map(|s| s.bits.memory_usage()).sum();
        buckets
            + self.buckets.capacity() * size_of::<Bucket>()
            + bitmaps
            + self.slots.capacity() * size_of::<Slot>()
            + (self.free_slots.capacity() + self.free_buckets.capacity()) * 4
            + map_bytes(&self.slot_of_ledger)
            + map_bytes(&self.bucket_of_key)
            + self.order.capacity() * size_of::<Reverse<u64>>()
            + self.late.capacity() * size_of::<Reverse<Late>>()
    }
}

/// `(delta, ledger id, entry)`: the order of two indexes of one bucket.
#[inline]
fn full_key(item: u64, slots: &[Slot]) -> (i64, i64, u32) {
    (delta_of(item), slots[slot_of(item)].ledger, entry_of(item))
}

/// Sorts one bucket's indexes descending by `(delta, ledger id, entry)`.
///
/// The bucket's slots are ranked by ledger id and the slot field is replaced by the rank, so the
/// sort itself compares plain integers; the slots are put back afterwards.
fn sort_descending(items: &mut [u64], slots: &mut [Slot]) {
    let mut distinct: Vec<u32> = Vec::new();
    for &item in items.iter() {
        let s = &mut slots[slot_of(item)];
        if s.mark == UNMARKED {
            s.mark = 0;
            distinct.push(slot_of(item) as u32);
        }
    }
    distinct.sort_unstable_by_key(|&s| slots[s as usize].ledger);
    let in_slot_order = distinct.windows(2).all(|w| w[0] < w[1]);
    if in_slot_order {
        items.sort_unstable_by(|a, b| b.cmp(a));
    } else {
        for (rank, &s) in distinct.iter().enumerate() {
            slots[s as usize].mark = rank as u32;
        }
        for item in items.iter_mut() {
            *item = with_slot(*item, slots[slot_of(*item)].mark);
        }
        items.sort_unstable_by(|a, b| b.cmp(a));
        for item in items.iter_mut() {
            *item = with_slot(*item, distinct[slot_of(*item)]);
        }
    }
    for &s in &distinct {
        slots[s as usize].mark = UNMARKED;
    }
}

/// Checks a delivery time (`0..=i64::MAX`); `index` names its place in a column.
#[inline]
fn check_at(at: i64, index: Option<usize>) -> Result<()> {
    if at < 0 {
        let place = index.map_or_else(String::new, |i| format!(" (at index {i})"));
        return Err(CoreError::InvalidArgument(format!(
            "deliver_at {at} is negative{place}; delivery times are 0..=9223372036854775807 ms"
        )));
    }
    Ok(())
}

/// Checks three columns: equal lengths, times `>= 0`, entries in `0..2^32`, ledgers `>= 0`.
fn check_columns(at: &[i64], ledgers: &[i64], entries: &[i64]) -> Result<()> {
    if at.len() != ledgers.len() || ledgers.len() != entries.len() {
        return Err(CoreError::InvalidArgument(format!(
            "deliver_at, ledger_ids and entry_ids differ in length: {}, {} and {} values",
            at.len(),
            ledgers.len(),
            entries.len()
        )));
    }
    let is_bad = |t: i64, l: i64, e: i64| (t < 0) | (l < 0) | !(0..=MAX_ENTRY_ID).contains(&e);
    // A branch-free scan finds whether anything is wrong; only then is the culprit located.
    let bad = at
        .iter()
        .zip(ledgers)
        .zip(entries)
        .fold(false, |acc, ((&t, &l), &e)| acc | is_bad(t, l, e));
    if !bad {
        return Ok(());
    }
    for (i, ((&t, &l), &e)) in at.iter().zip(ledgers).zip(entries).enumerate() {
        check_at(t, Some(i))?;
        check_entry(l, e).map_err(|err| match err {
            CoreError::InvalidPosition(m) => {
                CoreError::InvalidPosition(format!("{m} (at index {i})"))
            }
            other => other,
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::bucket::{group_of, Grouped};
    use super::*;

    fn drain_all(q: &mut DelayQueue) -> Vec<(i64, i64, i64)> {
        let out = q.drain();
        (0..out.len())
            .map(|i| (out.at[i], out.ledgers[i], out.entries[i]))
            .collect()
    }

    #[test]
    fn packs_and_unpacks() {
        let item = pack(0xFFF, (1 << 20) - 1, u32::MAX);
        assert_eq!(delta_of(item), 0xFFF);
        assert_eq!(slot_of(item), (1 << 20) - 1);
        assert_eq!(entry_of(item), u32::MAX);
        assert_eq!(group_of(item), u32::MAX);
        let moved = with_slot(item, 5);
        assert_eq!(
            (delta_of(moved), slot_of(moved), entry_of(moved)),
            (0xFFF, 5, u32::MAX)
        );
    }

    #[test]
    fn orders_by_ledger_id_not_slot() {
        let mut q = DelayQueue::new();
        // Slots are handed out in arrival order: ledger 9 gets slot 0, ledger 2 slot 1.
        q.add(100, 9, 1).unwrap();
        q.add(100, 2, 5).unwrap();
        q.add(100, 2, 3).unwrap();
        q.add(99, 9, 0).unwrap();
        assert_eq!(
            drain_all(&mut q),
            vec![(99, 9, 0), (100, 2, 3), (100, 2, 5), (100, 9, 1)]
        );
        assert!(q.is_empty());
        assert_eq!(q.ledger_count(), 0);
    }

    #[test]
    fn rejects_bad_values_without_change() {
        let mut q = DelayQueue::new();
        q.add(1, 1, 1).unwrap();
        assert!(matches!(q.add(-1, 1, 2), Err(CoreError::InvalidArgument(m)) if m.contains("-1")));
        assert!(matches!(q.add(1, -3, 2), Err(CoreError::InvalidPosition(m)) if m.contains("-3")));
        assert!(matches!(
            q.add(1, 1, -1),
            Err(CoreError::InvalidPosition(_))
        ));
        assert!(q.add(1, 1, MAX_ENTRY_ID + 1).is_err());
        let err = q.add_many(&[5, 6], &[1, 2], &[3, -4]).unwrap_err();
        assert!(matches!(&err, CoreError::InvalidPosition(m) if m.contains("index 1")));
        let err = q.add_many(&[5, -6], &[1, 2], &[3, 4]).unwrap_err();
        assert!(matches!(&err, CoreError::InvalidArgument(m) if m.contains("index 1")));
        assert!(matches!(
            q.add_many(&[5], &[1, 2], &[3, 4]),
            Err(CoreError::InvalidArgument(_))
        ));
        assert_eq!(q.len(), 1);
        assert_eq!(drain_all(&mut q), vec![(1, 1, 1)]);
    }

    #[test]
    fn extremes_round_trip() {
        let mut q = DelayQueue::new();
        q.add(i64::MAX, i64::MAX - 1, MAX_ENTRY_ID).unwrap();
        q.add(0, 0, 0).unwrap();
        q.add(i64::MAX, 0, MAX_ENTRY_ID).unwrap();
        assert_eq!(q.peek(), Some((0, 0, 0)));
        assert_eq!(
            drain_all(&mut q),
            vec![
                (0, 0, 0),
                (i64::MAX, 0, MAX_ENTRY_ID),
                (i64::MAX, i64::MAX - 1, MAX_ENTRY_ID)
            ]
        );
    }

    #[test]
    fn clustered_buckets_are_grouped_and_small() {
        let mut q = DelayQueue::new();
        let n = 4096i64;
        // Four delivery times and two ledgers in one bucket: 512 indexes per group.
        let at: Vec<i64> = (0..n).map(|i| 8192 + (i % 4) * 1000).collect();
        let ledgers: Vec<i64> = (0..n).map(|i| 7 - (i / 4) % 2).collect();
        let entries: Vec<i64> = (0..n).collect();
        assert_eq!(q.add_many(&at, &ledgers, &entries).unwrap(), n as u64);
        let b = q.bucket_of_key[&2] as usize;
        assert!(q.buckets[b].grouped.is_some());
        assert!(q.buckets[b].memory_usage() < 5 * n as usize);
        // Adds after grouping go pending, then fold in.
        for i in n..2 * n {
            q.add(8192 + (i % 4) * 1000, 7 - (i / 4) % 2, i).unwrap();
        }
        assert!(q.buckets[b].grouped.is_some());
        assert!(q.buckets[b].items.len() < 1024);
        let got = drain_all(&mut q);
        let mut want: Vec<(i64, i64, i64)> = (0..2 * n)
            .map(|i| (8192 + (i % 4) * 1000, 7 - (i / 4) % 2, i))
            .collect();
        want.sort_unstable();
        assert_eq!(got, want);
    }

    #[test]
    fn spread_buckets_stay_flat() {
        let mut q = DelayQueue::new();
        for i in 0..2048i64 {
            q.add(i * 2 % 4096, i % 3, i).unwrap();
        }
        let b = q.bucket_of_key[&0] as usize;
        assert!(q.buckets[b].grouped.is_none());
        assert!(Grouped::regroup(None, &q.buckets[b].items, 10).is_none());
    }

    #[test]
    fn adds_into_a_sorted_head_use_search_then_side_heap() {
        let mut q = DelayQueue::new();
        for e in 0..10 {
            q.add(100 + e, 1, e).unwrap();
        }
        q.peek();
        q.add(50, 1, 100).unwrap(); // binary search into the small sorted head
        assert!(q.late.is_empty());
        for e in 200..(200 + SORTED_INSERT_MAX as i64) {
            q.add(3000 - e, 2, e).unwrap();
        }
        assert!(!q.late.is_empty());
        let got = drain_all(&mut q);
        let mut sorted = got.clone();
        sorted.sort_unstable();
        assert_eq!(got, sorted);
        assert_eq!(got.len(), 11 + SORTED_INSERT_MAX);
        assert_eq!(q.late.capacity(), 0);
    }

    #[test]
    fn slots_are_freed_and_reused() {
        let mut q = DelayQueue::new();
        q.add(10, 5, 1).unwrap();
        q.add(20, 6, 1).unwrap();
        let mut out = Popped::new();
        assert_eq!(q.pop_due(10, 10, &mut out), 1);
        assert_eq!(q.ledger_count(), 1);
        assert!(!q.contains(5, 1));
        q.add(30, 8, 2).unwrap(); // takes ledger 5's freed slot
        assert_eq!(q.slots.len(), 2);
        assert!(q.add(40, 5, 1).unwrap()); // popped, so new again
        assert_eq!(q.remove_ledgers_below(7), 2);
        assert_eq!(drain_all(&mut q), vec![(30, 8, 2)]);
    }

    #[test]
    fn stale_heads_are_dropped_up_to_the_first_kept_index() {
        let mut q = DelayQueue::new();
        q.add_many(&[10, 20, 30, 40], &[1, 1, 2, 2], &[0, 1, 0, 1])
            .unwrap();
        let gone = [(1, 0), (1, 1), (2, 1)];
        assert_eq!(q.drop_stale_heads(|l, e| gone.contains(&(l, e))), 2);
        assert_eq!(q.peek(), Some((30, 2, 0)));
        assert_eq!(q.len(), 2); // (2, 1) is stale but not at the head: it stays
        assert_eq!(q.drop_stale_heads(|_, _| false), 0);
        assert_eq!(q.drop_stale_heads(|_, _| true), 2);
        assert!(q.is_empty() && q.peek().is_none());
    }

    #[test]
    fn memory_grows_and_is_released() {
        let mut q = DelayQueue::new();
        let empty = q.memory_usage();
        let at: Vec<i64> = (0..10_000).map(|i| (i * 7919) % 3_600_000).collect();
        let ledgers: Vec<i64> = (0..10_000).map(|i| i % 10).collect();
        let entries: Vec<i64> = (0..10_000).collect();
        q.add_many(&at, &ledgers, &entries).unwrap();
        let full = q.memory_usage();
        assert!(full > empty + 10_000 * 8);
        assert!(full < 10_000 * 32, "{full}");
        q.clear();
        assert_eq!(q.memory_usage(), empty);
    }
}
