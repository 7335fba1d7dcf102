//! Key_Shared hash-range selectors: which consumer receives each sticky-key hash slot.
//!
//! * [`AutoSplitSelector`] (PIP-34): a joiner takes the lower half of the widest range.
//! * [`ConsistentHashingSelector`] (Pulsar 4's default): points on a ring, named by consumer name
//!   and name index.
//! * [`ExclusiveRangeSelector`] (Pulsar's `STICKY` mode): consumers bring their own ranges.
//!
//! Consumers are `u32` ids (at most [`MAX_CONSUMER_ID`]) chosen by the caller. Every membership change
//! updates an [`Assignment`] list (Pulsar's `ConsumerHashAssignmentsSnapshot`) and a [`SlotTable`]
//! holding the owner of every slot, so [`StickyKeySelector::select`] is one array read, and returns
//! the [`Impact`]: the hash ranges each consumer lost and gained. Consistent hashing updates the
//! table arc by arc and builds the list when it is read; the others rebuild the list and write the
//! slots that changed.
//!
//! ```
//! use cursorkit_core::{AutoSplitSelector, StickyKeySelector};
//! let mut sel = AutoSplitSelector::new(65536).unwrap();
//! sel.add_consumer(1, "c1", &[]).unwrap();
//! let impact = sel.add_consumer(2, "c2", &[]).unwrap();
//! assert_eq!(impact.removed, vec![(1, vec![(0, 32768)])]);
//! assert_eq!(sel.select(100), Some(2));
//! assert_eq!(sel.consumer_key_hash_ranges(), vec![(2, vec![(0, 32768)]), (1, vec![(32769, 65536)])]);
//! ```

mod auto_split;
mod consistent;
mod exclusive;

use std::collections::BTreeMap;

use crate::error::{CoreError, Result};

pub use auto_split::AutoSplitSelector;
pub use consistent::{
    ConsistentHashingSelector, CONSISTENT_HASHING_KEY_RANGE, DEFAULT_POINTS_PER_CONSUMER,
    MAX_POINTS_PER_CONSUMER,
};
pub use exclusive::ExclusiveRangeSelector;

/// An inclusive hash range `(start, end)`.
pub type HashRange = (u32, u32);

/// The largest consumer id: ids travel to Python as non-negative int64 indices and `-1` means none.
pub const MAX_CONSUMER_ID: u32 = i32::MAX as u32;

/// The largest `range_size` a selector takes: Pulsar 4's slot space (`DEFAULT_RANGE_SIZE`, 2^16).
pub const MAX_SELECTOR_RANGE_SIZE: u32 = 1 << 16;

/// Table value of a slot nobody owns; `as i32` it reads `-1`.
const NO_OWNER: u32 = u32::MAX;

/// One entry of a selector's snapshot: the inclusive range `start..=end` belongs to `consumer`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Assignment {
    /// First hash of the range.
    pub start: u32,
    /// Last hash of the range (inclusive).
    pub end: u32,
    /// The owning consumer id.
    pub consumer: u32,
}

/// What a membership change moved, per consumer, as merged inclusive ranges sorted by start.
///
/// `removed` is Pulsar's `ImpactedConsumersResult` (the ranges taken away from each previous
/// owner, the leaver included); `added` lists the ranges each consumer gained. Both are computed
/// exactly, slot by slot: Pulsar's diff skips the part of a partially overlapping old range that no
/// new range covers (a hole left behind), which only an exclusive selector can produce; it is
/// reported here.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Impact {
    /// `(previous owner, ranges it lost)`, by consumer id.
    pub removed: Vec<(u32, Vec<HashRange>)>,
    /// `(new owner, ranges it gained)`, by consumer id.
    pub added: Vec<(u32, Vec<HashRange>)>,
}

impl Impact {
    /// Every consumer whose assignment changed (lost or gained a range), ascending.
    pub fn impacted(&self) -> Vec<u32> {
        let mut ids: Vec<u32> = self
            .removed
            .iter()
            .chain(&self.added)
            .map(|(c, _)| *c)
            .collect();
        ids.sort_unstable();
        ids.dedup();
        ids
    }

    /// Whether nothing moved.
    pub fn is_empty(&self) -> bool {
        self.removed.is_empty() && self.added.is_empty()
    }
}

/// How a [`SlotTable`] treats a slot at or beyond its length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BeyondTable {
    /// Not a slot of this selector (auto-split: its key hash range is `0..range_size`).
    Reject,
    /// The ring wraps: such a slot, like one below the first range, belongs to the first point's
    /// owner (consistent hashing's `select` of a raw hash).
    Wrap,
    /// The slot is taken modulo the table length (the exclusive selector's `hash % rangeSize`).
    Modulo,
}

/// The owner of every slot `0..len`, so that a selection is one array read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlotTable {
    owners: Box<[u32]>,
    beyond: BeyondTable,
}

impl SlotTable {
    /// A table of `len` unowned slots.
    pub fn new(len: u32, beyond: BeyondTable) -> Self {
        Self {
            owners: vec![NO_OWNER; len as usize].into_boxed_slice(),
            beyond,
        }
    }

    /// Number of slots held.
    pub fn len(&self) -> usize {
        self.owners.len()
    }

    /// Whether the table has no slots (never, for a selector's table).
    pub fn is_empty(&self) -> bool {
        self.owners.is_empty()
    }

    /// Refills every slot from a sorted, disjoint assignment list (ranges beyond the table are cut).
    pub fn rebuild(&mut self, assignments: &[Assignment]) {
        self.owners.fill(NO_OWNER);
        let len = self.owners.len();
        for a in assignments {
            let start = a.start as usize;
            if start >= len {
                break;
            }
            let end = (a.end as usize).min(len - 1);
            self.owners[start..=end].fill(a.consumer);
        }
        if self.beyond == BeyondTable::Wrap {
            if let Some(first) = assignments.first() {
                let below = (first.start as usize).min(len);
                self.owners[..below].fill(first.consumer);
            }
        }
    }

    /// Updates the table from `before` to `after` given their exact [`diff`]: only the slots that
    /// changed owner are written (plus, for a wrapping table, the slots below the first range),
    /// instead of every slot as [`rebuild`](Self::rebuild) does.
    pub fn apply(&mut self, impact: &Impact, after: &[Assignment]) {
        let len = self.owners.len();
        let mut fill = |ranges: &[HashRange], owner: u32| {
            for &(start, end) in ranges {
                let start = start as usize;
                if start < len {
                    let end = (end as usize).min(len - 1);
                    self.owners[start..=end].fill(owner);
                }
            }
        };
        for (_, ranges) in &impact.removed {
            fill(ranges, NO_OWNER);
        }
        for (c, ranges) in &impact.added {
            fill(ranges, *c);
        }
        if self.beyond == BeyondTable::Wrap {
            let (below, owner) = after.first().map_or((len, NO_OWNER), |a| {
                ((a.start as usize).min(len), a.consumer)
            });
            self.owners[..below].fill(owner);
        }
    }

    /// The table index of `slot`, or None when the table rejects it.
    #[inline(always)]
    fn index(&self, slot: u64) -> Option<usize> {
        let len = self.owners.len() as u64;
        if slot < len {
            return Some(slot as usize);
        }
        match self.beyond {
            BeyondTable::Reject => None,
            BeyondTable::Wrap => Some(0),
            BeyondTable::Modulo => Some((slot % len) as usize),
        }
    }

    /// The owner of `slot`, or None (unowned, or rejected).
    #[inline]
    pub fn select(&self, slot: u64) -> Option<u32> {
        let owner = self.owners[self.index(slot)?];
        (owner != NO_OWNER).then_some(owner)
    }

    /// The owner of `slot`, with an `InvalidArgument` error for a slot this table rejects.
    pub fn checked_select(&self, slot: i64) -> Result<Option<u32>> {
        match u64::try_from(slot).ok().and_then(|s| self.index(s)) {
            Some(i) => Ok(Some(self.owners[i]).filter(|&o| o != NO_OWNER)),
            None => Err(self.bad_slot(slot, None)),
        }
    }

    /// The owner of every slot as `i64` (`-1`: nobody) into `out`, replacing its contents.
    ///
    /// A negative slot, or one this table rejects, fails the whole call with `InvalidArgument`
    /// naming the first such slot; `out` then holds no meaningful values.
    pub fn select_many<T: Copy + Into<i64>>(&self, slots: &[T], out: &mut Vec<i64>) -> Result<()> {
        out.clear();
        out.reserve(slots.len());
        let ok = match self.beyond {
            BeyondTable::Reject => self.fill(slots, out, |s, len| (s < len).then_some(s)),
            BeyondTable::Wrap => self.fill(slots, out, |s, len| Some(if s < len { s } else { 0 })),
            BeyondTable::Modulo => {
                self.fill(slots, out, |s, len| Some(if s < len { s } else { s % len }))
            }
        };
        if ok {
            return Ok(());
        }
        let (at, slot) = slots
            .iter()
            .map(|&s| s.into())
            .enumerate()
            .find(|&(_, s)| u64::try_from(s).ok().and_then(|u| self.index(u)).is_none())
            .unwrap_or((0, -1));
        Err(self.bad_slot(slot, Some(at)))
    }

    /// The hot loop of `select_many`: one table read per slot; false when some slot was rejected.
    #[inline(always)]
    fn fill<T: Copy + Into<i64>>(
        &self,
        slots: &[T],
        out: &mut Vec<i64>,
        index: impl Fn(u64, u64) -> Option<u64>,
    ) -> bool {
        let owners = &self.owners[..];
        let len = owners.len() as u64;
        let mut ok = true;
        out.extend(slots.iter().map(|&s| {
            let s: i64 = s.into();
            let found = if s >= 0 { index(s as u64, len) } else { None };
            match found.and_then(|i| owners.get(i as usize)) {
                // NO_OWNER (u32::MAX) reads -1 through i32; ids are at most i32::MAX.
                Some(&o) => i64::from(o as i32),
                None => {
                    ok = false;
                    -1
                }
            }
        }));
        ok
    }

    #[cold]
    fn bad_slot(&self, slot: i64, at: Option<usize>) -> CoreError {
        let at = at.map_or_else(String::new, |i| format!(" at index {i}"));
        let accepted = match self.beyond {
            BeyondTable::Reject => format!("0..={}", self.owners.len() - 1),
            BeyondTable::Wrap | BeyondTable::Modulo => "0..".to_owned(),
        };
        CoreError::InvalidArgument(format!(
            "slot {slot}{at} is outside this selector's slots ({accepted})"
        ))
    }
}

/// Behaviour common to the three selectors.
pub trait StickyKeySelector {
    /// Registers consumer `id`; `name` names consistent-hashing points (the others keep it for
    /// messages); `ranges` are the exclusive selector's (the others take none). Returns what moved.
    ///
    /// Errors (state unchanged): `InvalidArgument` for an id already held or beyond
    /// [`MAX_CONSUMER_ID`], or ranges given to a selector that assigns them itself;
    /// `ConsumerAssign` when the ranges cannot be assigned.
    fn add_consumer(&mut self, id: u32, name: &str, ranges: &[HashRange]) -> Result<Impact>;

    /// Unregisters consumer `id` (`UnknownConsumer` if absent) and returns what moved.
    fn remove_consumer(&mut self, id: u32) -> Result<Impact>;

    /// The current assignment list, sorted by start and disjoint.
    fn assignments(&self) -> &[Assignment];

    /// The owner-per-slot table behind `select`.
    fn table(&self) -> &SlotTable;

    /// The inclusive range of slots the selector's hashing produces (Pulsar's `getKeyHashRange`).
    fn key_hash_range(&self) -> HashRange;

    /// The registered consumer ids, ascending.
    fn consumer_ids(&self) -> Vec<u32>;

    /// Whether consumer `id` is registered.
    fn contains(&self, id: u32) -> bool;

    /// Number of registered consumers.
    fn len(&self) -> usize;

    /// Whether no consumer is registered.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The consumer that owns `slot`, or None (nobody owns it, or the selector rejects the slot).
    #[inline]
    fn select(&self, slot: u32) -> Option<u32> {
        self.table().select(u64::from(slot))
    }

    /// The owner of every slot into `out` (`-1`: nobody); see [`SlotTable::select_many`].
    fn select_many<T: Copy + Into<i64>>(&self, slots: &[T], out: &mut Vec<i64>) -> Result<()> {
        self.table().select_many(slots, out)
    }

    /// Each consumer's merged inclusive ranges, ordered by their first range; consumers owning no
    /// slot (a consistent-hashing consumer whose points all collided) are absent.
    fn consumer_key_hash_ranges(&self) -> Vec<(u32, Vec<HashRange>)> {
        ranges_by_consumer(self.assignments())
    }
}

/// Groups a sorted, disjoint assignment list by consumer, merging touching ranges; consumers come
/// in the order of their first range.
pub fn ranges_by_consumer(assignments: &[Assignment]) -> Vec<(u32, Vec<HashRange>)> {
    let mut order: Vec<(u32, Vec<HashRange>)> = Vec::new();
    let mut at: BTreeMap<u32, usize> = BTreeMap::new();
    for a in assignments {
        let slot = *at.entry(a.consumer).or_insert_with(|| {
            order.push((a.consumer, Vec::new()));
            order.len() - 1
        });
        push_merged(&mut order[slot].1, a.start, a.end);
    }
    order
}

/// Appends `start..=end` to ascending ranges, merging it into the last one when they touch.
fn push_merged(ranges: &mut Vec<HashRange>, start: u32, end: u32) {
    if let Some(last) = ranges.last_mut() {
        if u64::from(last.1) + 1 >= u64::from(start) {
            last.1 = last.1.max(end);
            return;
        }
    }
    ranges.push((start, end));
}

/// The exact difference between two sorted, disjoint assignment lists: for every hash whose owner
/// changed, the previous owner (if any) lost it and the new owner (if any) gained it.
///
/// One merge-walk over both lists, O(n + m): the hash space is cut wherever either list's owner
/// changes, and each piece is compared.
pub fn diff(before: &[Assignment], after: &[Assignment]) -> Impact {
    let mut removed: BTreeMap<u32, Vec<HashRange>> = BTreeMap::new();
    let mut added: BTreeMap<u32, Vec<HashRange>> = BTreeMap::new();
    let (mut i, mut j) = (0, 0);
    let first = |l: &[Assignment]| l.first().map_or(u64::MAX, |a| u64::from(a.start));
    let mut at = first(before).min(first(after));
    while i < before.len() || j < after.len() {
        let (was, was_until) = piece(before, &mut i, at);
        let (now, now_until) = piece(after, &mut j, at);
        // Both owners hold from `at` up to the nearer change; ends fit in u32.
        let next = was_until.min(now_until);
        if was != now {
            let (lo, hi) = (at as u32, (next - 1) as u32);
            if let Some(c) = was {
                push_merged(removed.entry(c).or_default(), lo, hi);
            }
            if let Some(c) = now {
                push_merged(added.entry(c).or_default(), lo, hi);
            }
        }
        at = next;
    }
    Impact {
        removed: removed.into_iter().collect(),
        added: added.into_iter().collect(),
    }
}

/// The owner of hash `at` in a sorted list (advancing the cursor `i` past ranges ending before it)
/// and the first hash after `at` where that may change (`u64::MAX` past the end of the list).
fn piece(list: &[Assignment], i: &mut usize, at: u64) -> (Option<u32>, u64) {
    while *i < list.len() && u64::from(list[*i].end) < at {
        *i += 1;
    }
    match list.get(*i) {
        Some(a) if u64::from(a.start) <= at => (Some(a.consumer), u64::from(a.end) + 1),
        Some(a) => (None, u64::from(a.start)),
        None => (None, u64::MAX),
    }
}

/// Rejects an id beyond [`MAX_CONSUMER_ID`] or one already registered.
fn check_new_id(id: u32, registered: bool) -> Result<()> {
    if id > MAX_CONSUMER_ID {
        return Err(CoreError::InvalidArgument(format!(
            "consumer id {id} is beyond the largest id {MAX_CONSUMER_ID}"
        )));
    }
    if registered {
        return Err(CoreError::InvalidArgument(format!(
            "consumer id {id} is already registered"
        )));
    }
    Ok(())
}

/// `UnknownConsumer` for an id the selector does not hold.
#[cold]
fn unknown(id: u32) -> CoreError {
    CoreError::UnknownConsumer(format!("consumer id {id} is not registered"))
}

/// Rejects ranges given to a selector that assigns ranges itself.
fn no_ranges(kind: &str, ranges: &[HashRange]) -> Result<()> {
    if ranges.is_empty() {
        return Ok(());
    }
    Err(CoreError::InvalidArgument(format!(
        "the {kind} selector assigns hash ranges itself; got {} range(s)",
        ranges.len()
    )))
}

/// The assignments and the slot table of a selector, replaced together after every change.
#[derive(Clone, Debug)]
struct Snapshot {
    assignments: Vec<Assignment>,
    table: SlotTable,
}

impl Snapshot {
    fn new(table_len: u32, beyond: BeyondTable) -> Self {
        Self {
            assignments: Vec::new(),
            table: SlotTable::new(table_len, beyond),
        }
    }

    /// Installs new assignments, rebuilds the table and returns what moved.
    fn replace(&mut self, assignments: Vec<Assignment>) -> Impact {
        let impact = diff(&self.assignments, &assignments);
        self.table.apply(&impact, &assignments);
        #[cfg(test)]
        {
            let mut full = self.table.clone();
            full.rebuild(&assignments);
            if full != self.table {
                let bad: Vec<(usize, u32, u32)> = (0..full.owners.len())
                    .filter(|&i| full.owners[i] != self.table.owners[i])
                    .take(5)
                    .map(|i| (i, full.owners[i], self.table.owners[i]))
                    .collect();
                panic!(
                    "incremental table differs at {bad:?}; first {:?}; impact {impact:?}",
                    assignments.first()
                );
            }
        }
        self.assignments = assignments;
        impact
    }
}

/// Shared helpers for the selectors' tests: a seeded generator and checks every selector must pass.
#[cfg(test)]
pub(crate) mod testing {
    use super::*;

    pub use crate::testing::Rng;

    /// The owner of `hash` by a linear scan of the assignments.
    pub fn owner_of(assignments: &[Assignment], hash: u32) -> Option<u32> {
        assignments
            .iter()
            .find(|a| a.start <= hash && hash <= a.end)
            .map(|a| a.consumer)
    }

    /// Checks that the assignments are sorted and disjoint, that `select`/`select_many` agree with
    /// them on every slot of the key hash range, and that the ranges by consumer cover the same hashes.
    pub fn check_consistent<S: StickyKeySelector>(sel: &S) {
        let list = sel.assignments();
        for w in list.windows(2) {
            assert!(w[0].start <= w[0].end && w[0].end < w[1].start, "{w:?}");
        }
        let (lo, hi) = sel.key_hash_range();
        let slots: Vec<u32> = (lo..=hi).collect();
        let mut out = Vec::new();
        sel.select_many(&slots, &mut out).unwrap();
        for (&s, &got) in slots.iter().zip(&out) {
            let want = owner_of(list, s);
            assert_eq!(sel.select(s), want, "slot {s}");
            assert_eq!(got, want.map_or(-1, i64::from), "slot {s}");
        }
        let mut covered: Vec<Assignment> = sel
            .consumer_key_hash_ranges()
            .into_iter()
            .flat_map(|(c, rs)| {
                rs.into_iter().map(move |(start, end)| Assignment {
                    start,
                    end,
                    consumer: c,
                })
            })
            .collect();
        covered.sort_by_key(|a| a.start);
        for (a, b) in covered.iter().zip(covered.iter().skip(1)) {
            assert!(a.end < b.start);
        }
        let mut merged = ranges_by_consumer(list);
        merged.sort();
        let mut again = ranges_by_consumer(&covered);
        again.sort();
        assert_eq!(merged, again);
    }

    /// Checks an impact against a slot-by-slot comparison of the two assignment lists over `lo..=hi`.
    pub fn check_impact(before: &[Assignment], after: &[Assignment], impact: &Impact, hi: u32) {
        let mut removed: BTreeMap<u32, Vec<HashRange>> = BTreeMap::new();
        let mut added: BTreeMap<u32, Vec<HashRange>> = BTreeMap::new();
        for h in 0..=hi {
            let (was, now) = (owner_of(before, h), owner_of(after, h));
            if was != now {
                if let Some(c) = was {
                    push_merged(removed.entry(c).or_default(), h, h);
                }
                if let Some(c) = now {
                    push_merged(added.entry(c).or_default(), h, h);
                }
            }
        }
        assert_eq!(impact.removed, removed.into_iter().collect::<Vec<_>>());
        assert_eq!(impact.added, added.into_iter().collect::<Vec<_>>());
    }
}

#[cfg(test)]
mod tests {
    use super::testing::*;
    use super::*;

    fn a(start: u32, end: u32, consumer: u32) -> Assignment {
        Assignment {
            start,
            end,
            consumer,
        }
    }

    #[test]
    fn diff_equal_lists_is_empty() {
        let l = [a(0, 10, 1), a(11, 20, 2)];
        assert!(diff(&l, &l).is_empty());
    }

    #[test]
    fn diff_reports_holes_pulsar_skips() {
        // Pulsar's walk records only [5, 10] here: the before-only part [0, 4] is lost (S15).
        let before = [a(0, 10, 1)];
        let after = [a(5, 10, 2)];
        let impact = diff(&before, &after);
        assert_eq!(impact.removed, vec![(1, vec![(0, 10)])]);
        assert_eq!(impact.added, vec![(2, vec![(5, 10)])]);
        assert_eq!(impact.impacted(), vec![1, 2]);
    }

    #[test]
    fn diff_merges_touching_pieces() {
        let before = [a(0, 3, 1), a(4, 7, 1), a(8, 9, 3)];
        let after = [a(0, 1, 2), a(2, 9, 3)];
        let impact = diff(&before, &after);
        assert_eq!(impact.removed, vec![(1, vec![(0, 7)])]);
        assert_eq!(impact.added, vec![(2, vec![(0, 1)]), (3, vec![(2, 7)])]);
        check_impact(&before, &after, &impact, 12);
    }

    #[test]
    fn diff_against_empty_and_u32_max() {
        let full = [a(0, u32::MAX, 7)];
        let impact = diff(&full, &[]);
        assert_eq!(impact.removed, vec![(7, vec![(0, u32::MAX)])]);
        assert!(impact.added.is_empty());
        assert_eq!(diff(&[], &full).added, vec![(7, vec![(0, u32::MAX)])]);
    }

    #[test]
    fn diff_random_against_slot_scan() {
        let mut rng = Rng(7);
        for _ in 0..500 {
            let gen = |rng: &mut Rng| {
                let mut out = Vec::new();
                let mut h = rng.below(4) as u32;
                while h < 60 {
                    let end = h + rng.below(8) as u32;
                    out.push(a(h, end, rng.below(4) as u32));
                    h = end + 1 + rng.below(3) as u32;
                }
                out
            };
            let (before, after) = (gen(&mut rng), gen(&mut rng));
            check_impact(&before, &after, &diff(&before, &after), 80);
        }
    }

    #[test]
    fn ranges_by_consumer_orders_by_first_range() {
        let l = [a(0, 3, 5), a(4, 6, 2), a(7, 9, 5), a(12, 13, 5)];
        assert_eq!(
            ranges_by_consumer(&l),
            vec![(5, vec![(0, 3), (7, 9), (12, 13)]), (2, vec![(4, 6)])]
        );
    }

    #[test]
    fn table_policies() {
        let l = [a(2, 4, 1), a(6, 9, 2)];
        let mut t = SlotTable::new(8, BeyondTable::Reject);
        t.rebuild(&l);
        assert_eq!(
            (0..9).map(|s| t.select(s)).collect::<Vec<_>>(),
            [
                None,
                None,
                Some(1),
                Some(1),
                Some(1),
                None,
                Some(2),
                Some(2),
                None
            ]
        );
        let mut out = Vec::new();
        assert!(t.select_many(&[1u32, 8], &mut out).is_err());
        assert!(t.select_many(&[1i64, -1], &mut out).is_err());
        t.select_many(&[0u32, 3, 7], &mut out).unwrap();
        assert_eq!(out, [-1, 1, 2]);
        assert!(t.checked_select(8).is_err());
        assert!(t.checked_select(-3).is_err());

        let mut t = SlotTable::new(8, BeyondTable::Wrap);
        t.rebuild(&l);
        assert_eq!(t.select(0), Some(1));
        assert_eq!(t.select(1), Some(1));
        assert_eq!(t.select(5), None);
        assert_eq!(t.select(1000), Some(1));
        t.select_many(&[9i64, 7], &mut out).unwrap();
        assert_eq!(out, [1, 2]);
        let err = t.select_many(&[0i64, -5], &mut out).unwrap_err();
        assert!(err.to_string().contains("slot -5 at index 1"), "{err}");

        let mut t = SlotTable::new(8, BeyondTable::Modulo);
        t.rebuild(&l);
        assert_eq!(t.select(8 + 3), Some(1));
        assert_eq!(t.select(0), None);
        assert_eq!(t.checked_select(14).unwrap(), Some(2));
    }
}
