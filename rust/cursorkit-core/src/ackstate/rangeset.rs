//! `RangeSet`: the individually acknowledged positions of a cursor, with Pulsar's range semantics.
//!
//! Positions are stored as one roaring bitmap per ledger. A *range* is a maximal run of entries
//! inside one ledger and is reported open-closed, `(L:a-1..L:b]`, so a run that starts at entry 0
//! has the lower bound `L:-1`. The number of ranges is maintained by every mutation, so `len()`
//! is O(1) where Pulsar recounts.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use crate::ackstate::ledger_bits::LedgerBits;
use crate::ackstate::position::{check_bound, check_entry, check_ledger, Position, MAX_ENTRY_ID};
use crate::error::{CoreError, Result};
use crate::mem::FastMap;

/// Pulsar's `Integer.MAX_VALUE` sentinel ("latest"), honoured only with `pulsar_quirks`.
const PULSAR_INT_SENTINEL: i64 = i32::MAX as i64;
/// Above this many ledger changes in one batch, group by hashing instead of by stretches.
const STRETCHES_PER_GROUPING: usize = 64;
/// `union_ledger_bytes` adds a run spanning more entries than this as one range, not entry by entry.
const UNION_RANGE_MIN_RUN: u32 = 15;

/// An open-closed range `(lower..upper]` of positions inside one ledger.
pub type Range = (Position, Position);

/// A set of acknowledged `(ledger, entry)` positions (Pulsar's `LongPairRangeSet`).
///
/// ```
/// use cursorkit_core::RangeSet;
/// let mut rs = RangeSet::new(false);
/// for e in 0..=5 {
///     rs.add(5, e).unwrap();
/// }
/// rs.add(5, 7).unwrap();
/// assert_eq!(rs.to_string(), "[(5:-1..5:5],(5:6..5:7]]");
/// assert_eq!(rs.len(), 2);
/// assert!(rs.contains(5, 3).unwrap());
/// ```
#[derive(Debug, Clone, Default)]
pub struct RangeSet {
    /// Boxed so a B-tree node stays small (a one-ledger set costs one short leaf, not ~800 B).
    pub(crate) ledgers: BTreeMap<i64, Box<LedgerBits>>,
    runs: u64,
    quirks: bool,
    /// Ledgers dropped since the last `clear_dirty` (their persisted record must go too).
    removed: BTreeSet<i64>,
    /// With quirks: ledgers that an empty `(L:x..L:x]` add created, as Pulsar's computeIfAbsent does.
    pub(crate) empty_quirk_ledgers: BTreeSet<i64>,
}

impl PartialEq for RangeSet {
    fn eq(&self, other: &Self) -> bool {
        self.ledgers == other.ledgers
    }
}

impl RangeSet {
    /// An empty set; `pulsar_quirks` reproduces Pulsar's test-asserted quirks (see the crate docs).
    pub fn new(pulsar_quirks: bool) -> Self {
        Self {
            quirks: pulsar_quirks,
            ..Self::default()
        }
    }

    /// Whether Pulsar's quirks are reproduced.
    pub fn pulsar_quirks(&self) -> bool {
        self.quirks
    }

    /// Turns Pulsar's quirks on or off for later operations.
    pub fn set_pulsar_quirks(&mut self, pulsar_quirks: bool) {
        self.quirks = pulsar_quirks;
        if !pulsar_quirks {
            self.empty_quirk_ledgers.clear();
        }
    }

    /// Number of ranges (maximal runs per ledger), in O(1).
    pub fn len(&self) -> u64 {
        self.runs
    }

    /// True when no position is held.
    pub fn is_empty(&self) -> bool {
        self.ledgers.is_empty()
    }

    /// Drops every position; every ledger that held one becomes dirty.
    pub fn clear(&mut self) {
        self.removed.extend(self.ledgers.keys().copied());
        self.ledgers.clear();
        self.empty_quirk_ledgers.clear();
        self.runs = 0;
    }

    fn ledger_mut(&mut self, ledger_id: i64) -> &mut LedgerBits {
        if self.quirks && !self.empty_quirk_ledgers.is_empty() {
            self.empty_quirk_ledgers.remove(&ledger_id);
        }
        self.ledgers.entry(ledger_id).or_default()
    }

    /// Applies `f` to one ledger (created on demand), keeping the run total and dropping it if emptied.
    fn with_ledger<T>(&mut self, ledger_id: i64, f: impl FnOnce(&mut LedgerBits) -> T) -> T {
        let ledger = self.ledger_mut(ledger_id);
        let before = ledger.runs();
        let out = f(ledger);
        let (after, empty) = (ledger.runs(), ledger.is_empty());
        self.runs = self.runs + after - before;
        if empty {
            self.ledgers.remove(&ledger_id);
            self.removed.insert(ledger_id);
        }
        out
    }

    /// Acknowledges one entry; returns whether it was new.
    #[inline]
    pub fn add(&mut self, ledger_id: i64, entry_id: i64) -> Result<bool> {
        let entry = check_entry(ledger_id, entry_id)?;
        let ledger = self.ledger_mut(ledger_id);
        let before = ledger.runs();
        let added = ledger.insert(entry);
        let after = ledger.runs();
        self.runs = self.runs + after - before;
        Ok(added)
    }

    /// Removes one entry; returns whether it was held.
    pub fn remove(&mut self, ledger_id: i64, entry_id: i64) -> Result<bool> {
        let entry = check_entry(ledger_id, entry_id)?;
        if !self.ledgers.contains_key(&ledger_id) {
            return Ok(false);
        }
        Ok(self.with_ledger(ledger_id, |l| l.remove(entry)))
    }

    /// Removes many entries (columns of equal length); per position, whether it was held
    /// (Pulsar's `untrack`). A position given twice is held only the first time.
    ///
    /// Every id is validated before anything changes, so a rejected batch leaves the set as it was.
    pub fn remove_many(&mut self, ledger_ids: &[i64], entry_ids: &[i64]) -> Result<Vec<bool>> {
        validate_columns(ledger_ids, entry_ids, 0)?;
        Ok(ledger_ids
            .iter()
            .zip(entry_ids)
            .map(|(&ledger_id, &entry_id)| {
                self.ledgers.contains_key(&ledger_id)
                    && self.with_ledger(ledger_id, |l| l.remove(entry_id as u32))
            })
            .collect())
    }

    /// ORs a standard 32-bit roaring portable bitmap (as Java's RoaringBitmap or
    /// [`RangeSet::ledger_to_bytes`] write it) into one ledger; returns how many entries were new.
    ///
    /// The bytes are parsed as [`RangeSet::set_ledger_bytes`] parses them, before anything
    /// changes: damage is `Corrupt` and leaves the set as it was. The ledger becomes dirty when
    /// it gained an entry, and the range count stays exact.
    pub fn union_ledger_bytes(&mut self, ledger_id: i64, data: &[u8]) -> Result<u64> {
        let mut incoming = RangeSet::new(false);
        incoming.set_ledger_bytes(ledger_id, data)?;
        let Some(bits) = incoming.ledgers.remove(&ledger_id) else {
            return Ok(0); // an empty bitmap adds nothing
        };
        // Long runs go in as ranges (a bitmap of a few bytes may hold 2^32 entries); the entries
        // of short runs go in as one sorted batch.
        let mut entries = Vec::new();
        let mut runs = Vec::new();
        bits.for_each_run(|a, b| {
            if b - a >= UNION_RANGE_MIN_RUN {
                runs.push(a..=b);
            } else {
                entries.extend(a..=b);
            }
        });
        Ok(self.with_ledger(ledger_id, |l| {
            runs.into_iter().map(|r| l.insert_range(r)).sum::<u64>() + l.insert_batch(entries)
        }))
    }

    /// Acknowledges many entries at once (columns of equal length); returns how many were new.
    ///
    /// Every id is validated before anything changes, so a rejected batch leaves the set as it was.
    pub fn add_many(&mut self, ledger_ids: &[i64], entry_ids: &[i64]) -> Result<u64> {
        validate_columns(ledger_ids, entry_ids, 0)?;
        let mut added = 0;
        let stretches = count_stretches(ledger_ids);
        if stretches <= 1 + ledger_ids.len() / STRETCHES_PER_GROUPING {
            let mut start = 0;
            while start < ledger_ids.len() {
                let ledger_id = ledger_ids[start];
                let end = start
                    + ledger_ids[start..]
                        .iter()
                        .take_while(|&&l| l == ledger_id)
                        .count();
                let entries: Vec<u32> = entry_ids[start..end].iter().map(|&e| e as u32).collect();
                added += self.with_ledger(ledger_id, |l| l.insert_batch(entries));
                start = end;
            }
        } else {
            for (ledger_id, entries) in group_by_ledger(ledger_ids, entry_ids) {
                added += self.with_ledger(ledger_id, |l| l.insert_batch(entries));
            }
        }
        Ok(added)
    }

    /// Adds the open-closed range `(lower..upper]` with Pulsar's semantics.
    ///
    /// Within one ledger it adds entries `lower_entry+1..=upper_entry`. Across ledgers, without
    /// `ledger_sizes` (Pulsar's rule, ledger sizes being unknown): the lower ledger is extended only
    /// up to its highest held entry, and only if that entry is above `lower_entry`; ledgers in
    /// between are left alone; the upper ledger gets `0..=upper_entry`. With `ledger_sizes`
    /// (ledger id → entry count) the lower ledger is filled to its end and every listed ledger in
    /// between is filled whole. A reversed range is a no-op.
    pub fn add_open_closed(
        &mut self,
        lower_ledger: i64,
        lower_entry: i64,
        upper_ledger: i64,
        upper_entry: i64,
        ledger_sizes: Option<&BTreeMap<i64, u64>>,
    ) -> Result<()> {
        check_bound(lower_ledger, lower_entry)?;
        check_bound(upper_ledger, upper_entry)?;
        if let Some(sizes) = ledger_sizes {
            validate_sizes(sizes)?;
        }
        self.add_open_closed_checked(
            lower_ledger,
            lower_entry,
            upper_ledger,
            upper_entry,
            ledger_sizes,
        );
        Ok(())
    }

    fn add_open_closed_checked(
        &mut self,
        lk: i64,
        lv: i64,
        uk: i64,
        uv: i64,
        sizes: Option<&BTreeMap<i64, u64>>,
    ) {
        if lk == uk {
            if uv > lv {
                self.with_ledger(lk, |l| l.insert_range((lv + 1) as u32..=uv as u32));
            } else if self.quirks && !self.ledgers.contains_key(&lk) {
                self.empty_quirk_ledgers.insert(lk);
            }
            return;
        }
        if lk > uk {
            return;
        }
        let quirks = self.quirks;
        let sentinel = move |v: i64| quirks && v == PULSAR_INT_SENTINEL;
        match sizes {
            None => {
                let top = self.ledgers.get(&lk).map_or(-1, |l| l.max());
                if top > lv && !sentinel(lv + 1) {
                    self.with_ledger(lk, |l| l.insert_range((lv + 1) as u32..=top as u32));
                }
            }
            Some(sizes) => {
                let lower_size = sizes.get(&lk).copied().unwrap_or(0) as i64;
                if lower_size - 1 > lv && !sentinel(lv + 1) {
                    self.with_ledger(lk, |l| {
                        l.insert_range((lv + 1) as u32..=(lower_size - 1) as u32)
                    });
                }
                for (&ledger_id, &size) in sizes.range(lk + 1..uk) {
                    if size > 0 {
                        self.with_ledger(ledger_id, |l| l.insert_range(0..=(size - 1) as u32));
                    }
                }
            }
        }
        if uv >= 0 && !sentinel(uv) {
            self.with_ledger(uk, |l| l.insert_range(0..=uv as u32));
        }
    }

    /// Adds many open-closed ranges given as `(lk, lv, uk, uv)` rows; validated before any change.
    pub fn add_ranges(
        &mut self,
        rows: &[[i64; 4]],
        ledger_sizes: Option<&BTreeMap<i64, u64>>,
    ) -> Result<()> {
        self.add_ranges_within(rows, ledger_sizes, u64::MAX)
    }

    /// [`RangeSet::add_ranges`] refusing (with `CoreError::Budget`, before any change) rows that
    /// would expand into more than `max_chunks` 65,536-entry chunks: a 27-byte Pulsar range can
    /// name a whole 2^32-entry ledger, so decoders pass [`MAX_DECODED_CHUNKS`].
    pub fn add_ranges_within(
        &mut self,
        rows: &[[i64; 4]],
        ledger_sizes: Option<&BTreeMap<i64, u64>>,
        max_chunks: u64,
    ) -> Result<()> {
        for row in rows {
            check_bound(row[0], row[1])?;
            check_bound(row[2], row[3])?;
        }
        if let Some(sizes) = ledger_sizes {
            validate_sizes(sizes)?;
        }
        if max_chunks < u64::MAX {
            let mut chunks: u64 = 0;
            for &[lk, lv, uk, uv] in rows {
                chunks =
                    chunks.saturating_add(range_chunks(lk, lv, uk, uv, ledger_sizes, max_chunks));
                if chunks > max_chunks {
                    return Err(CoreError::Budget(format!(
                        "ranges expand to more than {max_chunks} chunks of 65536 entries \
                         (the decode budget max_chunks; a range ({lk}:{lv}..{uk}:{uv}] alone \
                         may cover a whole ledger)"
                    )));
                }
            }
        }
        for &[lk, lv, uk, uv] in rows {
            self.add_open_closed_checked(lk, lv, uk, uv, ledger_sizes);
        }
        Ok(())
    }

    /// Whether the entry is held; entry `-1` is never held.
    #[inline]
    pub fn contains(&self, ledger_id: i64, entry_id: i64) -> Result<bool> {
        check_bound(ledger_id, entry_id)?;
        Ok(entry_id >= 0
            && self
                .ledgers
                .get(&ledger_id)
                .is_some_and(|l| l.contains(entry_id as u32)))
    }

    /// Membership of many positions, written into `out` (same length as the columns).
    pub fn contains_many_into(
        &self,
        ledger_ids: &[i64],
        entry_ids: &[i64],
        out: &mut [bool],
    ) -> Result<()> {
        if ledger_ids.len() != entry_ids.len() || out.len() != ledger_ids.len() {
            return Err(CoreError::LengthMismatch {
                ledgers: ledger_ids.len(),
                entries: entry_ids.len(),
            });
        }
        // Validation rides along in the probing loop (read-only, so a late error changes nothing).
        let mut bad = false;
        let mut cached: Option<(i64, Option<&LedgerBits>)> = None;
        for ((&ledger_id, &entry_id), slot) in ledger_ids.iter().zip(entry_ids).zip(out.iter_mut())
        {
            bad |= (ledger_id < 0) | !(-1..=MAX_ENTRY_ID).contains(&entry_id);
            let ledger = match cached {
                Some((l, bits)) if l == ledger_id => bits,
                _ => {
                    let bits = self.ledgers.get(&ledger_id).map(|b| &**b);
                    cached = Some((ledger_id, bits));
                    bits
                }
            };
            *slot = entry_id >= 0 && ledger.is_some_and(|l| l.contains(entry_id as u32));
        }
        if bad {
            validate_columns(ledger_ids, entry_ids, -1)?;
        }
        Ok(())
    }

    /// Membership of many positions.
    pub fn contains_many(&self, ledger_ids: &[i64], entry_ids: &[i64]) -> Result<Vec<bool>> {
        let mut out = vec![false; ledger_ids.len()];
        self.contains_many_into(ledger_ids, entry_ids, &mut out)?;
        Ok(out)
    }

    /// The CLOSED run `[L:first, L:last]` containing the entry, as Pulsar's `rangeContaining`.
    pub fn range_containing(
        &self,
        ledger_id: i64,
        entry_id: i64,
    ) -> Result<Option<(Position, Position)>> {
        check_bound(ledger_id, entry_id)?;
        if entry_id < 0 {
            return Ok(None);
        }
        let run = self
            .ledgers
            .get(&ledger_id)
            .and_then(|l| l.run_containing(entry_id as u32));
        Ok(run.map(|r| {
            (
                pos(ledger_id, i64::from(*r.start())),
                pos(ledger_id, i64::from(*r.end())),
            )
        }))
    }

    /// Removes every position `<= (ledger_id, entry_id)`.
    pub fn remove_at_most(&mut self, ledger_id: i64, entry_id: i64) -> Result<()> {
        check_bound(ledger_id, entry_id)?;
        self.empty_quirk_ledgers.clear();
        self.drop_ledgers_below(ledger_id);
        if entry_id >= 0 && self.ledgers.contains_key(&ledger_id) {
            self.with_ledger(ledger_id, |l| l.remove_range(0..=entry_id as u32));
        }
        Ok(())
    }

    fn drop_ledgers_below(&mut self, ledger_id: i64) {
        if self
            .ledgers
            .first_key_value()
            .is_none_or(|(&first, _)| first >= ledger_id)
        {
            return; // nothing below: no split of the map
        }
        let kept = self.ledgers.split_off(&ledger_id);
        let dropped = std::mem::replace(&mut self.ledgers, kept);
        for (id, l) in dropped {
            self.runs -= l.runs();
            self.removed.insert(id);
        }
    }

    /// Removes the positions `p` with `(lk, lv) < p <= (uk, uv)`, across ledgers.
    ///
    /// With `pulsar_quirks` a cross-ledger removal keeps the highest entry of the lower ledger,
    /// as Pulsar's implementations (and their tests) do.
    pub fn remove_open_closed(&mut self, lk: i64, lv: i64, uk: i64, uv: i64) -> Result<()> {
        check_bound(lk, lv)?;
        check_bound(uk, uv)?;
        if (lk, lv) >= (uk, uv) {
            return Ok(());
        }
        self.empty_quirk_ledgers.clear();
        if lk == uk {
            if self.ledgers.contains_key(&lk) {
                self.with_ledger(lk, |l| l.remove_range((lv + 1) as u32..=uv as u32));
            }
            return Ok(());
        }
        if let Some(top) = self.ledgers.get(&lk).map(|l| l.max()) {
            let end = if self.quirks { top - 1 } else { MAX_ENTRY_ID };
            if end > lv {
                self.with_ledger(lk, |l| l.remove_range((lv + 1) as u32..=end as u32));
            }
        }
        let middle: Vec<i64> = self.ledgers.range(lk + 1..uk).map(|(&id, _)| id).collect();
        for id in middle {
            if let Some(l) = self.ledgers.remove(&id) {
                self.runs -= l.runs();
                self.removed.insert(id);
            }
        }
        if uv >= 0 && self.ledgers.contains_key(&uk) {
            self.with_ledger(uk, |l| l.remove_range(0..=uv as u32));
        }
        Ok(())
    }

    /// Removes `(ledger, entry)` and the rest of its run; returns the run's last entry, or None
    /// when the position is not held (nothing changes then).
    pub fn take_run_from(&mut self, ledger_id: i64, entry_id: i64) -> Result<Option<i64>> {
        let entry = check_entry(ledger_id, entry_id)?;
        if !self
            .ledgers
            .get(&ledger_id)
            .is_some_and(|l| l.contains(entry))
        {
            return Ok(None); // the usual case, one lookup
        }
        Ok(self
            .with_ledger(ledger_id, |l| l.take_run_from(entry))
            .map(i64::from))
    }

    /// First range of the first ledger, open-closed.
    pub fn first_range(&self) -> Option<Range> {
        let (&id, l) = self.ledgers.first_key_value()?;
        l.first_run().map(|r| open_closed(id, *r.start(), *r.end()))
    }

    /// Last range of the last ledger, open-closed.
    pub fn last_range(&self) -> Option<Range> {
        let (&id, l) = self.ledgers.last_key_value()?;
        l.last_run().map(|r| open_closed(id, *r.start(), *r.end()))
    }

    /// `(first ledger:first entry-1 .. last ledger:last entry]`; may cross ledgers.
    pub fn span(&self) -> Option<Range> {
        let (first, _) = self.first_range()?;
        let (_, last) = self.last_range()?;
        Some((first, last))
    }

    /// Calls `f(ledger, first, last)` for every run (closed bounds) in ascending order.
    pub fn for_each_run(&self, mut f: impl FnMut(i64, u32, u32)) {
        for (&id, l) in &self.ledgers {
            l.for_each_run(|a, b| f(id, a, b));
        }
    }

    /// Every range, open-closed, ascending.
    pub fn ranges(&self) -> Vec<Range> {
        let mut out = Vec::with_capacity(self.runs as usize);
        self.for_each_run(|id, a, b| out.push(open_closed(id, a, b)));
        out
    }

    /// The first `max_ranges` ranges as rows `(L, first-1, L, last)`.
    pub fn ranges_rows(&self, max_ranges: Option<u64>) -> Vec<[i64; 4]> {
        self.ranges_flat(max_ranges)
            .chunks_exact(4)
            .map(|c| [c[0], c[1], c[2], c[3]])
            .collect()
    }

    /// The first `max_ranges` ranges as one flat row-major buffer of `(L, first-1, L, last)` rows,
    /// ready to become an `(n, 4)` array without a copy.
    pub fn ranges_flat(&self, max_ranges: Option<u64>) -> Vec<i64> {
        let limit = max_ranges.unwrap_or(u64::MAX).min(self.runs) as usize;
        let mut out = Vec::with_capacity(limit * 4);
        for (&id, l) in &self.ledgers {
            let more = l.try_for_each_run(|a, b| {
                if out.len() == limit * 4 {
                    return false;
                }
                out.extend_from_slice(&[id, i64::from(a) - 1, id, i64::from(b)]);
                true
            });
            if !more || out.len() == limit * 4 {
                break;
            }
        }
        out
    }

    /// Number of held entries `p` with `(lk, lv) <= p <= (uk, uv)`, inclusive at both ends.
    pub fn cardinality(&self, lk: i64, lv: i64, uk: i64, uv: i64) -> Result<u64> {
        check_bound(lk, lv)?;
        check_bound(uk, uv)?;
        if (lk, lv) > (uk, uv) {
            return Ok(0);
        }
        let mut total = 0;
        for (&id, l) in self.ledgers.range(lk..=uk) {
            let lo = if id == lk { lv.max(0) } else { 0 };
            let hi = if id == uk { uv } else { MAX_ENTRY_ID };
            if hi >= lo {
                total += l.range_cardinality(lo as u32..=hi as u32);
            }
        }
        Ok(total)
    }

    /// Number of held entries.
    pub fn total_cardinality(&self) -> u64 {
        self.ledgers.values().map(|l| l.cardinality()).sum()
    }

    /// Ids of the ledgers that hold at least one entry, ascending.
    pub fn ledger_ids(&self) -> Vec<i64> {
        self.ledgers.keys().copied().collect()
    }

    /// Ledgers whose entries changed since the last [`RangeSet::clear_dirty`], ascending.
    pub fn dirty_ledgers(&self) -> Vec<i64> {
        let mut out: BTreeSet<i64> = self.removed.clone();
        out.extend(
            self.ledgers
                .iter()
                .filter(|(_, l)| l.is_dirty())
                .map(|(&id, _)| id),
        );
        out.into_iter().collect()
    }

    /// Number of ledgers holding at least one entry, in O(1).
    pub fn ledger_count(&self) -> usize {
        self.ledgers.len()
    }

    /// Marks one ledger changed (a persist that failed must write it again).
    pub fn mark_dirty(&mut self, ledger_id: i64) {
        match self.ledgers.get_mut(&ledger_id) {
            Some(l) => l.set_dirty(true),
            None => {
                self.removed.insert(ledger_id);
            }
        }
    }

    /// Forgets which ledgers changed (call after persisting them).
    pub fn clear_dirty(&mut self) {
        self.removed.clear();
        for l in self.ledgers.values_mut() {
            l.set_dirty(false);
        }
    }

    /// Run-optimises every bitmap (done automatically as mutations accumulate).
    pub fn compact(&mut self) {
        for l in self.ledgers.values_mut() {
            l.optimize();
        }
    }

    /// Heap bytes held by the structure.
    pub fn memory_usage(&self) -> usize {
        // A BTreeMap entry costs its key and value plus roughly a sixth of a node's edges and header.
        let per_entry = std::mem::size_of::<i64>() + 16;
        std::mem::size_of::<Self>()
            + self
                .ledgers
                .values()
                .map(|l| l.memory_usage() + per_entry)
                .sum::<usize>()
            + (self.removed.len() + self.empty_quirk_ledgers.len()) * 16
    }

    /// Replaces (or removes, when `bits` is empty) one ledger's bitmap wholesale.
    pub(crate) fn put_ledger(&mut self, ledger_id: i64, bits: LedgerBits) {
        if let Some(old) = self.ledgers.remove(&ledger_id) {
            self.runs -= old.runs();
        }
        if !bits.is_empty() {
            self.runs += bits.runs();
            self.ledgers.insert(ledger_id, Box::new(bits));
        }
    }
}

impl fmt::Display for RangeSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[")?;
        let mut first = true;
        let mut result = Ok(());
        self.for_each_run(|id, a, b| {
            if result.is_err() {
                return;
            }
            let sep = if first { "" } else { "," };
            first = false;
            result = write!(f, "{sep}({id}:{}..{id}:{b}]", i64::from(a) - 1);
        });
        result?;
        f.write_str("]")
    }
}

#[inline]
fn pos(ledger_id: i64, entry_id: i64) -> Position {
    Position {
        ledger_id,
        entry_id,
    }
}

#[inline]
fn open_closed(ledger_id: i64, first: u32, last: u32) -> Range {
    (
        pos(ledger_id, i64::from(first) - 1),
        pos(ledger_id, i64::from(last)),
    )
}

fn count_stretches(ledger_ids: &[i64]) -> usize {
    if ledger_ids.is_empty() {
        return 0;
    }
    1 + ledger_ids.windows(2).filter(|w| w[0] != w[1]).count()
}

/// Buckets interleaved columns by ledger (entries keep their input order within a ledger).
fn group_by_ledger(ledger_ids: &[i64], entry_ids: &[i64]) -> Vec<(i64, Vec<u32>)> {
    let mut index: FastMap<i64, usize> = FastMap::default();
    let mut groups: Vec<(i64, Vec<u32>)> = Vec::new();
    let (mut last_ledger, mut last_slot) = (-1, 0);
    for (&ledger_id, &entry_id) in ledger_ids.iter().zip(entry_ids) {
        if ledger_id != last_ledger {
            last_slot = *index.entry(ledger_id).or_insert_with(|| {
                groups.push((ledger_id, Vec::new()));
                groups.len() - 1
            });
            last_ledger = ledger_id;
        }
        groups[last_slot].1.push(entry_id as u32);
    }
    groups
}

/// Checks equal lengths and every id (entries from `min_entry`: 0 for adds, -1 for look-ups).
pub(crate) fn validate_columns(
    ledger_ids: &[i64],
    entry_ids: &[i64],
    min_entry: i64,
) -> Result<()> {
    if ledger_ids.len() != entry_ids.len() {
        return Err(CoreError::LengthMismatch {
            ledgers: ledger_ids.len(),
            entries: entry_ids.len(),
        });
    }
    let is_bad = |l: i64, e: i64| (l < 0) | (e < min_entry) | (e > MAX_ENTRY_ID);
    // A branch-free scan finds whether anything is wrong; only then is the culprit located.
    let bad = ledger_ids
        .iter()
        .zip(entry_ids)
        .fold(false, |acc, (&l, &e)| acc | is_bad(l, e));
    if !bad {
        return Ok(());
    }
    let Some((i, (&l, &e))) = ledger_ids
        .iter()
        .zip(entry_ids)
        .enumerate()
        .find(|(_, (&l, &e))| is_bad(l, e))
    else {
        return Ok(());
    };
    let err = if min_entry >= 0 {
        check_entry(l, e).err()
    } else {
        check_bound(l, e).err()
    };
    Err(match err {
        Some(CoreError::InvalidPosition(m)) => {
            CoreError::InvalidPosition(format!("{m} (at index {i})"))
        }
        Some(other) => other,
        None => CoreError::InvalidPosition(format!("position {l}:{e} at index {i} is invalid")),
    })
}

pub(crate) fn validate_sizes(sizes: &BTreeMap<i64, u64>) -> Result<()> {
    for (&id, &size) in sizes {
        check_ledger(id)?;
        if size > MAX_ENTRY_ID as u64 + 1 {
            return Err(CoreError::InvalidArgument(format!(
                "ledger {id} has size {size}; a ledger holds at most 4294967296 entries"
            )));
        }
    }
    Ok(())
}

/// The decode budget of [`RangeSet::add_ranges_within`]: 2^21 chunks of 65,536 entries (2^37
/// entries, about 100 MiB of bitmaps). Real ledgers hold thousands of entries, so real cursors
/// stay far below it.
pub const MAX_DECODED_CHUNKS: u64 = 1 << 21;

/// An upper bound of the 65,536-entry chunks that adding `(lk:lv..uk:uv]` touches (stops counting
/// past `cap`). Without ledger sizes the lower ledger only fills up to entries already held.
fn range_chunks(
    lk: i64,
    lv: i64,
    uk: i64,
    uv: i64,
    sizes: Option<&BTreeMap<i64, u64>>,
    cap: u64,
) -> u64 {
    let span = |a: i64, b: i64| {
        if b >= a {
            ((b >> 16) - (a >> 16) + 1) as u64
        } else {
            0
        }
    };
    if lk == uk {
        return span(lv + 1, uv);
    }
    if lk > uk {
        return 0;
    }
    let mut n = span(0, uv);
    if let Some(sizes) = sizes {
        let lower = sizes.get(&lk).copied().unwrap_or(0) as i64;
        n = n.saturating_add(span(lv + 1, lower - 1));
        for (_, &size) in sizes.range(lk + 1..uk) {
            n = n.saturating_add(span(0, size as i64 - 1));
            if n > cap {
                break;
            }
        }
    }
    n
}
