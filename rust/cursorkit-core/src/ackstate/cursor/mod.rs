//! `Cursor`: a subscription's ack state — mark-delete position, individually acknowledged entries
//! after it, and the unacked indexes of partially acknowledged batches — with Pulsar's semantics.
//!
//! Every mutation leaves the mark-delete position fully rolled forward: it sits on the last entry
//! of the contiguous acknowledged prefix (across ledgers when ledger sizes are known), and the
//! range set holds only entries after it. So an acknowledgement can only move the mark-delete
//! position when it lands exactly on the next entry, and the common in-order ack never touches
//! the range set at all.
//!
//! What is left to deliver (backlog, next unacked, skip, clear, reset) is `backlog.rs`.

use std::collections::BTreeMap;
use std::ops::Bound::{Excluded, Unbounded};

use crate::ackstate::batch::BatchAcks;
use crate::ackstate::position::{check_bound, check_entry, Position, MAX_ENTRY_ID};
use crate::ackstate::rangeset::{validate_columns, validate_sizes, RangeSet};
use crate::error::{CoreError, Result};

mod backlog;

/// Most positions one `next_unacked` call returns (16 B each: 256 MiB); larger limits are refused.
pub const MAX_NEXT_UNACKED: u64 = 1 << 24;
/// Acks at most this many go one by one in [`Cursor::ack_many`] (bulk set-up costs more).
const FEW_ACKS: usize = 32;
/// Bytes the compact estimate charges per ledger record: tag, length and id varints (≤ 19) plus a
/// one-container roaring header (≤ 16, the array form's; its data is at most 2 B more than runs').
const COMPACT_BYTES_PER_LEDGER: u64 = 40;
/// Bytes the compact estimate charges per run (a roaring run-container interval).
const COMPACT_BYTES_PER_RUN: u64 = 4;
/// Bytes the compact estimate charges per partial batch besides its words: tags, lengths and the
/// ledger, entry and size varints at their widest.
const COMPACT_BYTES_PER_BATCH: u64 = 40;
/// Fixed bytes of a compact snapshot (version, mark-delete, checksum).
const COMPACT_BYTES_FIXED: u64 = 32;

/// What a cursor has done, for stats: applied acks and the no-ops among them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CursorCounters {
    /// Individual acks that acknowledged a new entry.
    pub acks: u64,
    /// Individual acks at or below mark-delete or of an entry already acknowledged (no-ops).
    pub duplicate_acks: u64,
    /// Batch-index acks that acknowledged a new index.
    pub batch_index_acks: u64,
    /// Batch-index acks of an index (or entry) already acknowledged (no-ops).
    pub duplicate_batch_index_acks: u64,
    /// Cumulative acks that moved the mark-delete position.
    pub cumulative_acks: u64,
    /// Cumulative acks at or below the mark-delete position (no-ops).
    pub stale_cumulative_acks: u64,
    /// Entries skipped by `skip`.
    pub skipped: u64,
    /// Resets (seeks).
    pub resets: u64,
}

/// A cursor's acknowledgement state.
///
/// ```
/// use cursorkit_core::{Cursor, Position};
/// let mut c = Cursor::new(Position::new(1, -1).unwrap(), false);
/// c.ack(1, 2).unwrap();
/// assert_eq!(c.mark_delete(), Position::new(1, -1).unwrap());
/// c.ack(1, 0).unwrap();
/// c.ack(1, 1).unwrap();
/// assert_eq!(c.mark_delete(), Position::new(1, 2).unwrap());
/// assert!(c.acked().is_empty());
/// ```
#[derive(Debug, Clone)]
pub struct Cursor {
    mark_delete: Position,
    acked: RangeSet,
    batches: BTreeMap<Position, BatchAcks>,
    batch_estimate: u64,
    sizes: Option<BTreeMap<i64, u64>>,
    /// `(ledger, entries)` of the ledger an ack last found in `sizes` (ledger `i64::MIN`: none),
    /// so that the acks of one ledger and the roll over them look its size up once.
    near: (i64, u64),
    counters: CursorCounters,
    mutations: u64,
}

impl Cursor {
    /// A cursor whose mark-delete position is `mark_delete` (`L:-1`: nothing of ledger L acked).
    pub fn new(mark_delete: Position, pulsar_quirks: bool) -> Self {
        Self {
            mark_delete,
            acked: RangeSet::new(pulsar_quirks),
            batches: BTreeMap::new(),
            batch_estimate: 0,
            sizes: None,
            near: NO_LEDGER,
            counters: CursorCounters::default(),
            mutations: 0,
        }
    }

    /// Rebuilds a cursor from persisted parts; entries at or below `mark_delete` are dropped and
    /// the mark-delete position is rolled forward.
    ///
    /// A mark-delete entry outside `-1..=2^32-1` or a batch position outside `0..=2^32-1` is an
    /// `InvalidPosition` (no cursor can hold them, so none could be persisted and read back).
    pub fn from_parts(
        mark_delete: Position,
        mut acked: RangeSet,
        batches: Vec<(Position, BatchAcks)>,
    ) -> Result<Self> {
        check_bound(mark_delete.ledger_id, mark_delete.entry_id)?;
        for (p, _) in &batches {
            check_entry(p.ledger_id, p.entry_id)?;
        }
        acked.remove_at_most(mark_delete.ledger_id, mark_delete.entry_id)?;
        let mut cursor = Self::new(mark_delete, acked.pulsar_quirks());
        cursor.acked = acked;
        for (p, b) in batches {
            if p > mark_delete && b.unacked() > 0 && !cursor.acked_contains(p) {
                cursor.insert_batch(p, b);
            }
        }
        cursor.roll_forward();
        Ok(cursor)
    }

    /// Replaces the ack state with persisted parts (as [`Cursor::from_parts`]), keeping the ledger
    /// sizes and counters; every ledger of the old and the new state is dirty afterwards, so an
    /// incremental store writes the change. On error nothing changes.
    pub fn restore(
        &mut self,
        mark_delete: Position,
        mut acked: RangeSet,
        batches: Vec<(Position, BatchAcks)>,
    ) -> Result<()> {
        acked.set_pulsar_quirks(self.acked.pulsar_quirks());
        let mut fresh = Self::from_parts(mark_delete, acked, batches)?;
        fresh.set_ledger_sizes(self.sizes.clone())?;
        let old = self.acked.ledger_ids();
        let new = fresh.acked.ledger_ids();
        fresh.mark_dirty(&old);
        fresh.mark_dirty(&new);
        fresh.counters = self.counters;
        fresh.mutations = self.mutations + 1;
        *self = fresh;
        Ok(())
    }

    /// The last entry of the acknowledged prefix.
    pub fn mark_delete(&self) -> Position {
        self.mark_delete
    }

    /// Entries acknowledged after the mark-delete position.
    pub fn acked(&self) -> &RangeSet {
        &self.acked
    }

    /// Partially acknowledged batches, ascending.
    pub fn batches(&self) -> impl Iterator<Item = (&Position, &BatchAcks)> {
        self.batches.iter()
    }

    /// Number of partially acknowledged batches.
    pub fn batch_count(&self) -> usize {
        self.batches.len()
    }

    /// The unacked indexes of a partially acknowledged batch entry.
    pub fn batch(&self, ledger_id: i64, entry_id: i64) -> Option<&BatchAcks> {
        self.batches.get(&Position {
            ledger_id,
            entry_id,
        })
    }

    /// Counters of applied and no-op acknowledgements.
    pub fn counters(&self) -> CursorCounters {
        self.counters
    }

    /// Number of state changes so far (a store compares it to skip clean flushes).
    pub fn mutations(&self) -> u64 {
        self.mutations
    }

    /// Known ledger sizes (ledger id → entry count), if any.
    pub fn ledger_sizes(&self) -> Option<&BTreeMap<i64, u64>> {
        self.sizes.as_ref()
    }

    /// Sets (or, with `None`, forgets) the ledger sizes. With sizes, acks are checked against them
    /// and the mark-delete position rolls across ledger boundaries.
    pub fn set_ledger_sizes(&mut self, sizes: Option<BTreeMap<i64, u64>>) -> Result<()> {
        if let Some(s) = &sizes {
            validate_sizes(s)?;
            self.check_within(s)?;
        }
        self.sizes = sizes;
        self.near = NO_LEDGER;
        self.touch();
        self.roll_forward();
        Ok(())
    }

    /// Records that `ledger_id` holds `entries` entries (a new or growing ledger).
    pub fn set_ledger_size(&mut self, ledger_id: i64, entries: u64) -> Result<()> {
        let mut sizes = self.sizes.clone().unwrap_or_default();
        sizes.insert(ledger_id, entries);
        self.set_ledger_sizes(Some(sizes))
    }

    /// Whether the entry is acknowledged (at or below mark-delete, or individually).
    #[inline]
    pub fn is_acked(&self, ledger_id: i64, entry_id: i64) -> Result<bool> {
        check_entry(ledger_id, entry_id)?;
        let p = pos(ledger_id, entry_id);
        Ok(p <= self.mark_delete || self.acked_contains(p))
    }

    /// `is_acked` for columns of positions.
    pub fn is_acked_many(&self, ledger_ids: &[i64], entry_ids: &[i64]) -> Result<Vec<bool>> {
        validate_columns(ledger_ids, entry_ids, 0)?;
        let mut out = self.acked.contains_many(ledger_ids, entry_ids)?;
        let md = self.mark_delete;
        for ((o, &l), &e) in out.iter_mut().zip(ledger_ids).zip(entry_ids) {
            *o |= pos(l, e) <= md;
        }
        Ok(out)
    }

    /// Whether one index of a batch entry is acknowledged (a fully acked entry acks every index).
    pub fn is_batch_index_acked(&self, ledger_id: i64, entry_id: i64, index: u32) -> Result<bool> {
        if self.is_acked(ledger_id, entry_id)? {
            return Ok(true);
        }
        Ok(self
            .batch(ledger_id, entry_id)
            .is_some_and(|b| !b.is_unacked(index)))
    }

    /// Acknowledges one entry; returns whether it was new. A no-op ack is counted.
    pub fn ack(&mut self, ledger_id: i64, entry_id: i64) -> Result<bool> {
        let p = self.valid_entry(ledger_id, entry_id)?;
        self.drop_batch(p);
        if p <= self.mark_delete {
            self.counters.duplicate_acks += 1;
            return Ok(false);
        }
        // The entry after mark-delete is never held (mark-delete would have rolled over it), so
        // it moves mark-delete; any other is one insert that also says whether it was new.
        if self.next_after(self.mark_delete) == Some(p) {
            self.counters.acks += 1;
            self.touch();
            self.mark_delete = p;
            self.roll_forward();
            return Ok(true);
        }
        if !self.acked.add(p.ledger_id, p.entry_id)? {
            self.counters.duplicate_acks += 1;
            return Ok(false);
        }
        self.counters.acks += 1;
        self.touch();
        Ok(true)
    }

    /// Checks that every position of the columns could be acknowledged (valid ids, inside the
    /// known ledgers): after it, acks of them cannot be refused.
    pub fn check_ackable(&self, ledger_ids: &[i64], entry_ids: &[i64]) -> Result<()> {
        validate_columns(ledger_ids, entry_ids, 0)?;
        if let Some(sizes) = &self.sizes {
            check_columns_within(sizes, ledger_ids, entry_ids)?;
        }
        Ok(())
    }

    /// Acknowledges many entries (equal-length columns); returns how many were new.
    ///
    /// Every position is checked before anything changes.
    pub fn ack_many(&mut self, ledger_ids: &[i64], entry_ids: &[i64]) -> Result<u64> {
        validate_columns(ledger_ids, entry_ids, 0)?;
        if let Some(sizes) = &self.sizes {
            check_columns_within(sizes, ledger_ids, entry_ids)?;
        }
        if ledger_ids.len() <= FEW_ACKS {
            // A handful (a consumer's grouped acks): one by one beats building bulk bitmaps.
            let mut added = 0;
            for (&l, &e) in ledger_ids.iter().zip(entry_ids) {
                added += u64::from(self.ack(l, e)?);
            }
            return Ok(added);
        }
        let md = self.mark_delete;
        let below = ledger_ids
            .iter()
            .zip(entry_ids)
            .filter(|&(&l, &e)| pos(l, e) <= md)
            .count();
        if !self.batches.is_empty() {
            for (&l, &e) in ledger_ids.iter().zip(entry_ids) {
                self.drop_batch(pos(l, e));
            }
        }
        let added = if below == 0 {
            self.acked.add_many(ledger_ids, entry_ids)?
        } else {
            let (ls, es): (Vec<i64>, Vec<i64>) = ledger_ids
                .iter()
                .zip(entry_ids)
                .filter(|&(&l, &e)| pos(l, e) > md)
                .map(|(&l, &e)| (l, e))
                .unzip();
            self.acked.add_many(&ls, &es)?
        };
        let n = ledger_ids.len() as u64;
        self.counters.acks += added;
        self.counters.duplicate_acks += n - added;
        if added > 0 {
            self.touch();
            self.roll_forward();
        }
        Ok(added)
    }

    /// Acknowledges everything up to and including the position; returns whether mark-delete moved.
    pub fn ack_cumulative(&mut self, ledger_id: i64, entry_id: i64) -> Result<bool> {
        check_bound(ledger_id, entry_id)?;
        let p = pos(ledger_id, entry_id);
        if entry_id >= 0 {
            self.check_known(p)?;
        }
        if p <= self.mark_delete {
            self.counters.stale_cumulative_acks += 1;
            return Ok(false);
        }
        self.counters.cumulative_acks += 1;
        self.move_mark_delete(p);
        Ok(true)
    }

    /// Cumulative ack that ends inside a batch: everything before the entry and its indexes
    /// `0..=index` are acknowledged. Returns whether anything new was acknowledged.
    pub fn ack_cumulative_batch(
        &mut self,
        ledger_id: i64,
        entry_id: i64,
        index: u32,
        batch_size: u32,
    ) -> Result<bool> {
        let p = self.valid_entry(ledger_id, entry_id)?;
        let mut fresh = BatchAcks::new(batch_size)?;
        fresh.check(index, batch_size)?;
        if let Some(existing) = self.batches.get(&p) {
            existing.clone().check(index, batch_size)?;
        }
        if index + 1 == batch_size || self.acked_contains(p) {
            return self.ack_cumulative(ledger_id, entry_id);
        }
        if p <= self.mark_delete {
            self.counters.stale_cumulative_acks += 1;
            return Ok(false);
        }
        let prev = pos(ledger_id, entry_id - 1);
        let mut changed = false;
        if prev > self.mark_delete {
            self.mark_delete = prev;
            self.after_mark_delete_moved();
            changed = true;
        }
        if !self.batches.contains_key(&p) {
            self.insert_batch(p, fresh);
        }
        let batch = self.batches.get_mut(&p).expect("inserted above");
        batch.check(index, batch_size)?;
        changed |= batch.ack_through(index) > 0;
        if batch.unacked() == 0 {
            self.drop_batch(p);
            self.ack_new(p);
        }
        if changed {
            self.counters.cumulative_acks += 1;
            self.touch();
            self.roll_forward();
        } else {
            self.counters.stale_cumulative_acks += 1;
        }
        Ok(changed)
    }

    /// Acknowledges one index of a batch entry of `batch_size` messages; when the last unacked
    /// index goes, the entry itself is acknowledged. Returns whether the index was new.
    pub fn ack_batch_index(
        &mut self,
        ledger_id: i64,
        entry_id: i64,
        index: u32,
        batch_size: u32,
    ) -> Result<bool> {
        let p = self.valid_entry(ledger_id, entry_id)?;
        let created = match self.batches.get_mut(&p) {
            Some(b) => {
                b.check(index, batch_size)?;
                None
            }
            None => {
                let mut b = BatchAcks::new(batch_size)?;
                b.check(index, batch_size)?;
                Some(b)
            }
        };
        if p <= self.mark_delete || self.acked_contains(p) {
            self.counters.duplicate_batch_index_acks += 1;
            return Ok(false);
        }
        if let Some(b) = created {
            self.insert_batch(p, b);
        }
        let batch = self.batches.get_mut(&p).expect("inserted above");
        if !batch.ack(index) {
            self.counters.duplicate_batch_index_acks += 1;
            return Ok(false);
        }
        self.counters.batch_index_acks += 1;
        if batch.unacked() == 0 {
            self.drop_batch(p);
            self.ack_new(p);
        } else {
            self.touch();
        }
        Ok(true)
    }

    /// Applies Pulsar's `ack_set` to a batch entry of `batch_size` messages: `words` hold the
    /// indexes still unacknowledged (a set bit = unacked) and are ANDed into the entry's bitset, so
    /// every index they leave unset is acknowledged; when none is left, the entry itself is (all
    /// zero words ack the whole entry, as in Pulsar). Cost O(`batch_size` / 64): words past the
    /// batch's last and bits past `batch_size` are ignored, missing words count as zero. Returns
    /// how many indexes were newly acknowledged (each counted as a batch-index ack; a call that
    /// acknowledges none counts one duplicate). Sizes are checked as `ack_batch_index` checks them.
    pub fn ack_batch_set(
        &mut self,
        ledger_id: i64,
        entry_id: i64,
        words: &[u64],
        batch_size: u32,
    ) -> Result<u32> {
        let p = self.valid_entry(ledger_id, entry_id)?;
        let created = match self.batches.get_mut(&p) {
            Some(b) => {
                b.check(0, batch_size)?;
                None
            }
            None => Some(BatchAcks::new(batch_size)?),
        };
        if p <= self.mark_delete || self.acked_contains(p) {
            self.counters.duplicate_batch_index_acks += 1;
            return Ok(0);
        }
        let acked = match created {
            // A new batch is held only once something of it is acknowledged.
            Some(mut b) => {
                let n = b.and_words(words);
                if n > 0 {
                    self.insert_batch(p, b);
                }
                n
            }
            None => self
                .batches
                .get_mut(&p)
                .expect("held above")
                .and_words(words),
        };
        if acked == 0 {
            self.counters.duplicate_batch_index_acks += 1;
            return Ok(0);
        }
        self.counters.batch_index_acks += u64::from(acked);
        if self.batches.get(&p).is_none_or(|b| b.unacked() == 0) {
            self.drop_batch(p);
            self.ack_new(p);
        } else {
            self.touch();
        }
        Ok(acked)
    }

    /// An O(1) upper estimate of the compact encoding's size in bytes: exact to within the
    /// per-ledger constant for ledgers below 65,536 entries, where each bitmap is one container.
    pub fn compact_size_estimate(&self) -> u64 {
        COMPACT_BYTES_FIXED
            + COMPACT_BYTES_PER_LEDGER * self.acked.ledger_count() as u64
            + COMPACT_BYTES_PER_RUN * self.acked.len()
            + self.batch_estimate
    }

    /// Forgets which ledgers changed (after a flush wrote them).
    pub fn clear_dirty(&mut self) {
        self.acked.clear_dirty();
    }

    /// Marks ledgers dirty again (a flush that failed must write them next time).
    pub fn mark_dirty(&mut self, ledger_ids: &[i64]) {
        for &l in ledger_ids {
            self.acked.mark_dirty(l);
        }
    }

    fn touch(&mut self) {
        self.mutations += 1;
    }

    #[inline]
    fn acked_contains(&self, p: Position) -> bool {
        !self.acked.is_empty()
            && self
                .acked
                .contains(p.ledger_id, p.entry_id)
                .unwrap_or(false)
    }

    /// Acknowledges an entry known to be new: moves mark-delete when it is the next entry.
    fn ack_new(&mut self, p: Position) {
        self.touch();
        if self.next_after(self.mark_delete) == Some(p) {
            self.mark_delete = p;
            self.roll_forward();
        } else {
            self.acked
                .add(p.ledger_id, p.entry_id)
                .expect("position validated");
        }
    }

    fn move_mark_delete(&mut self, p: Position) {
        self.mark_delete = p;
        self.after_mark_delete_moved();
        self.touch();
        self.roll_forward();
    }

    /// Drops acked entries and batches at or below mark-delete.
    fn after_mark_delete_moved(&mut self) {
        let md = self.mark_delete;
        self.acked
            .remove_at_most(md.ledger_id, md.entry_id)
            .expect("mark-delete is a valid bound");
        self.drop_batches_through(md);
    }

    /// Forgets the batch acks of positions at or before `md` (they are acknowledged whole).
    #[inline]
    fn drop_batches_through(&mut self, md: Position) {
        if self
            .batches
            .first_key_value()
            .is_some_and(|(&first, _)| first <= md)
        {
            let kept = self.batches.split_off(&pos(md.ledger_id, md.entry_id + 1));
            for b in std::mem::replace(&mut self.batches, kept).values() {
                self.batch_estimate -= batch_estimate(b);
            }
        }
    }

    /// The entry after `p`: the next entry of its ledger, or with ledger sizes the first entry of
    /// the next non-empty ledger once `p` is the last entry of its own.
    #[inline(always)]
    fn next_after(&self, p: Position) -> Option<Position> {
        match &self.sizes {
            None => (p.entry_id < MAX_ENTRY_ID).then(|| pos(p.ledger_id, p.entry_id + 1)),
            Some(sizes) => {
                let n = if self.near.0 == p.ledger_id {
                    Some(self.near.1)
                } else {
                    sizes.get(&p.ledger_id).copied()
                };
                if n.is_some_and(|n| p.entry_id + 1 < n as i64) {
                    return Some(pos(p.ledger_id, p.entry_id + 1));
                }
                sizes
                    .range((Excluded(p.ledger_id), Unbounded))
                    .find(|(_, &n)| n > 0)
                    .map(|(&l, _)| pos(l, 0))
            }
        }
    }

    /// Moves mark-delete over every acknowledged run that starts at the next entry.
    #[inline]
    fn roll_forward(&mut self) {
        if !self.acked.is_empty() {
            self.roll_over_runs();
        }
    }

    /// [`roll_forward`](Self::roll_forward) when something is held.
    fn roll_over_runs(&mut self) {
        // Everything held is after mark-delete, so the run just after it (if any) starts there:
        // mark-delete moves to its end and the run leaves the set, then the next one is tried.
        let mut moved = false;
        while !self.acked.is_empty() {
            let Some(next) = self.next_after(self.mark_delete) else {
                break;
            };
            if moved && next.ledger_id == self.mark_delete.ledger_id {
                break; // a run was taken whole: the entry after its end is not held
            }
            // `next_after` only makes valid positions, so the take cannot be refused; if it were,
            // mark-delete would simply stay where it is.
            let Ok(Some(end)) = self.acked.take_run_from(next.ledger_id, next.entry_id) else {
                break; // the usual case: nothing held right after mark-delete
            };
            self.mark_delete = pos(next.ledger_id, end);
            moved = true;
        }
        if moved {
            // The runs taken were everything held up to the new mark-delete: only batch acks
            // may remain behind it.
            debug_assert!(self
                .acked
                .first_range()
                .is_none_or(|(from, _)| from >= self.mark_delete));
            self.touch();
            self.drop_batches_through(self.mark_delete);
        }
    }

    fn insert_batch(&mut self, p: Position, b: BatchAcks) {
        self.batch_estimate += batch_estimate(&b);
        if let Some(old) = self.batches.insert(p, b) {
            self.batch_estimate -= batch_estimate(&old);
        }
    }

    #[inline(always)]
    fn drop_batch(&mut self, p: Position) {
        if self.batches.is_empty() {
            return;
        }
        if let Some(b) = self.batches.remove(&p) {
            self.batch_estimate -= batch_estimate(&b);
            self.touch();
        }
    }

    /// A position that may be acknowledged: a real entry, inside the known ledgers if any. The
    /// ledger's size comes from `near` while acks stay in one ledger (one lookup per ledger).
    #[inline(always)]
    fn valid_entry(&mut self, ledger_id: i64, entry_id: i64) -> Result<Position> {
        check_entry(ledger_id, entry_id)?;
        let p = pos(ledger_id, entry_id);
        if let Some(sizes) = &self.sizes {
            if self.near.0 != ledger_id {
                let Some(&n) = sizes.get(&ledger_id) else {
                    return self.check_known(p).map(|()| p); // the unknown-ledger error
                };
                self.near = (ledger_id, n);
            }
            if entry_id >= self.near.1 as i64 {
                self.check_known(p)?; // the past-the-end error
            }
        }
        Ok(p)
    }

    #[inline]
    fn check_known(&self, p: Position) -> Result<()> {
        match &self.sizes {
            Some(sizes) => check_within(sizes, p.ledger_id, p.entry_id),
            None => Ok(()),
        }
    }

    fn sizes_for<'a>(
        &'a self,
        what: &str,
        given: Option<&'a BTreeMap<i64, u64>>,
    ) -> Result<&'a BTreeMap<i64, u64>> {
        if let Some(s) = given {
            validate_sizes(s)?;
            return Ok(s);
        }
        self.sizes.as_ref().ok_or_else(|| {
            CoreError::InvalidArgument(format!(
                "{what} needs ledger sizes: pass them or set them on the cursor"
            ))
        })
    }

    /// Checks that every acknowledged entry lies inside `sizes`.
    fn check_within(&self, sizes: &BTreeMap<i64, u64>) -> Result<()> {
        for (&l, bits) in &self.acked.ledgers {
            check_within(sizes, l, bits.max())?;
        }
        for p in self.batches.keys() {
            check_within(sizes, p.ledger_id, p.entry_id)?;
        }
        Ok(())
    }
}

/// `Cursor::near` when no ledger size is at hand.
const NO_LEDGER: (i64, u64) = (i64::MIN, 0);

#[inline]
fn pos(ledger_id: i64, entry_id: i64) -> Position {
    Position {
        ledger_id,
        entry_id,
    }
}

/// A batch's share of the compact estimate; it depends only on the word count, which never changes
/// while the batch is held (so adding and removing it always balance).
fn batch_estimate(b: &BatchAcks) -> u64 {
    COMPACT_BYTES_PER_BATCH + 8 * b.word_count() as u64
}

fn check_within(sizes: &BTreeMap<i64, u64>, ledger_id: i64, entry_id: i64) -> Result<()> {
    match sizes.get(&ledger_id) {
        None => Err(CoreError::UnknownLedger(format!(
            "ledger {ledger_id} of position {ledger_id}:{entry_id} is not among the known ledgers"
        ))),
        Some(&n) if entry_id >= n as i64 => Err(CoreError::InvalidPosition(format!(
            "entry {entry_id} is beyond the end of ledger {ledger_id} ({n} entries)"
        ))),
        Some(_) => Ok(()),
    }
}

fn check_columns_within(
    sizes: &BTreeMap<i64, u64>,
    ledger_ids: &[i64],
    entry_ids: &[i64],
) -> Result<()> {
    let mut last: Option<(i64, u64)> = None;
    for (i, (&l, &e)) in ledger_ids.iter().zip(entry_ids).enumerate() {
        let n = match last {
            Some((id, n)) if id == l => n,
            _ => match sizes.get(&l) {
                Some(&n) => {
                    last = Some((l, n));
                    n
                }
                None => u64::MAX,
            },
        };
        if n == u64::MAX || e as u64 >= n {
            return Err(match check_within(sizes, l, e) {
                Err(CoreError::UnknownLedger(m)) => {
                    CoreError::UnknownLedger(format!("{m} (at index {i})"))
                }
                Err(CoreError::InvalidPosition(m)) => {
                    CoreError::InvalidPosition(format!("{m} (at index {i})"))
                }
                other => other.err().unwrap_or_else(|| {
                    CoreError::InvalidPosition(format!("position {l}:{e} at index {i}"))
                }),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(l: i64, e: i64) -> Position {
        pos(l, e)
    }

    fn sizes(pairs: &[(i64, u64)]) -> BTreeMap<i64, u64> {
        pairs.iter().copied().collect()
    }

    #[test]
    fn in_order_acks_only_move_mark_delete() {
        let mut c = Cursor::new(p(3, -1), false);
        for e in 0..1000 {
            assert!(c.ack(3, e).unwrap());
        }
        assert_eq!(c.mark_delete(), p(3, 999));
        assert!(c.acked().is_empty());
        assert!(!c.ack(3, 10).unwrap());
        assert_eq!(c.counters().duplicate_acks, 1);
    }

    #[test]
    fn hole_fill_rolls_over_the_run() {
        let mut c = Cursor::new(p(1, -1), false);
        for e in [1, 2, 3, 5] {
            c.ack(1, e).unwrap();
        }
        assert_eq!(c.acked().len(), 2);
        c.ack(1, 0).unwrap();
        assert_eq!(c.mark_delete(), p(1, 3));
        assert_eq!(c.acked().to_string(), "[(1:4..1:5]]");
    }

    #[test]
    fn rolls_across_ledgers_only_with_sizes() {
        let mut c = Cursor::new(p(1, -1), false);
        c.ack_many(&[2, 2], &[0, 1]).unwrap();
        c.ack_many(&[1, 1], &[0, 1]).unwrap();
        assert_eq!(c.mark_delete(), p(1, 1));
        c.set_ledger_sizes(Some(sizes(&[(1, 2), (2, 5)]))).unwrap();
        assert_eq!(c.mark_delete(), p(2, 1));
        assert!(c.acked().is_empty());
        assert!(matches!(c.ack(3, 0), Err(CoreError::UnknownLedger(_))));
        assert!(matches!(c.ack(2, 5), Err(CoreError::InvalidPosition(_))));
    }

    /// The size an ack looked up last is forgotten when the sizes change (a ledger grows, or
    /// another takes its place in the sizes).
    #[test]
    fn a_grown_ledger_takes_acks_past_its_old_end() {
        let mut c = Cursor::new(p(1, -1), false);
        c.set_ledger_sizes(Some(sizes(&[(1, 2)]))).unwrap();
        assert!(c.ack(1, 1).unwrap());
        assert!(matches!(c.ack(1, 2), Err(CoreError::InvalidPosition(_))));
        c.set_ledger_size(1, 5).unwrap();
        assert!(c.ack(1, 3).unwrap());
        c.set_ledger_sizes(Some(sizes(&[(1, 4), (2, 3)]))).unwrap();
        assert!(matches!(c.ack(1, 4), Err(CoreError::InvalidPosition(_))));
        assert!(c.ack(1, 0).unwrap());
        assert!(c.ack(1, 2).unwrap());
        assert_eq!(c.mark_delete(), p(1, 3));
        assert!(matches!(c.ack(3, 0), Err(CoreError::UnknownLedger(_))));
        assert!(c.ack(2, 0).unwrap());
        assert_eq!(c.mark_delete(), p(2, 0));
    }

    #[test]
    fn empty_ledgers_are_stepped_over() {
        let mut c = Cursor::new(p(1, -1), false);
        c.set_ledger_sizes(Some(sizes(&[(1, 1), (2, 0), (3, 4)])))
            .unwrap();
        c.ack(3, 0).unwrap();
        c.ack(1, 0).unwrap();
        assert_eq!(c.mark_delete(), p(3, 0));
        assert_eq!(c.backlog(None).unwrap(), 3);
    }

    #[test]
    fn batch_indexes_complete_an_entry() {
        let mut c = Cursor::new(p(1, -1), false);
        c.ack(1, 1).unwrap();
        assert!(c.ack_batch_index(1, 0, 0, 2).unwrap());
        assert!(!c.ack_batch_index(1, 0, 0, 2).unwrap());
        assert!(!c.is_acked(1, 0).unwrap());
        assert!(c.is_batch_index_acked(1, 0, 0).unwrap());
        assert!(c.ack_batch_index(1, 0, 0, 3).is_err());
        assert!(c.ack_batch_index(1, 0, 1, 2).unwrap());
        assert_eq!(c.mark_delete(), p(1, 1));
        assert_eq!(c.batch_count(), 0);
    }

    #[test]
    fn individual_ack_drops_the_batch() {
        let mut c = Cursor::new(p(1, -1), false);
        c.ack_batch_index(1, 4, 0, 10).unwrap();
        assert_eq!(c.batch_count(), 1);
        c.ack(1, 4).unwrap();
        assert_eq!(c.batch_count(), 0);
        assert_eq!(
            c.compact_size_estimate(),
            COMPACT_BYTES_FIXED + COMPACT_BYTES_PER_LEDGER + COMPACT_BYTES_PER_RUN
        );
    }

    #[test]
    fn cumulative_batch_ack_stops_before_the_entry() {
        let mut c = Cursor::new(p(1, -1), false);
        c.ack_batch_index(1, 5, 7, 10).unwrap();
        assert!(c.ack_cumulative_batch(1, 5, 3, 10).unwrap());
        assert_eq!(c.mark_delete(), p(1, 4));
        let b = c.batch(1, 5).unwrap();
        assert_eq!(b.words(), &[0b11_0111_0000]);
        assert!(c.ack_cumulative_batch(1, 5, 9, 10).unwrap());
        assert_eq!(c.mark_delete(), p(1, 5));
        assert_eq!(c.batch_count(), 0);
    }

    #[test]
    fn cumulative_ack_clears_below() {
        let mut c = Cursor::new(p(1, -1), false);
        c.ack_many(&[1, 1, 1, 2], &[3, 5, 9, 0]).unwrap();
        c.ack_batch_index(1, 7, 0, 2).unwrap();
        assert!(c.ack_cumulative(1, 7).unwrap());
        assert_eq!(c.acked().to_string(), "[(1:8..1:9],(2:-1..2:0]]");
        assert_eq!(c.batch_count(), 0);
        assert!(!c.ack_cumulative(1, 2).unwrap());
        assert_eq!(c.counters().stale_cumulative_acks, 1);
    }

    #[test]
    fn next_unacked_skips_acked_runs() {
        let mut c = Cursor::new(p(1, 1), false);
        c.ack_many(&[1, 1, 1, 2], &[3, 4, 6, 1]).unwrap();
        let s = sizes(&[(1, 8), (2, 3)]);
        let got = c.next_unacked(None, 10, Some(&s)).unwrap();
        assert_eq!(got, vec![1, 2, 1, 5, 1, 7, 2, 0, 2, 2]);
        assert_eq!(
            c.next_unacked(Some(p(1, 5)), 2, Some(&s)).unwrap(),
            vec![1, 7, 2, 0]
        );
        assert_eq!(c.backlog(Some(&s)).unwrap(), 5);
        assert_eq!(c.skip(3, Some(&s)).unwrap(), 3);
        assert_eq!(c.mark_delete(), p(1, 7));
        assert!(c.clear_backlog(Some(&s)).unwrap());
        assert_eq!(c.mark_delete(), p(2, 2));
        assert_eq!(c.backlog(Some(&s)).unwrap(), 0);
    }

    #[test]
    fn backlog_rejects_acks_outside_sizes() {
        let mut c = Cursor::new(p(1, -1), false);
        c.ack(1, 9).unwrap();
        assert!(c.backlog(Some(&sizes(&[(1, 5)]))).is_err());
        assert!(c.backlog(None).is_err());
    }

    #[test]
    fn reset_forgets_acks() {
        let mut c = Cursor::new(p(1, -1), false);
        c.ack_many(&[1, 1], &[5, 7]).unwrap();
        c.ack_batch_index(1, 9, 0, 3).unwrap();
        c.reset(1, 3).unwrap();
        assert_eq!(c.mark_delete(), p(1, 2));
        assert!(c.acked().is_empty());
        assert_eq!(c.batch_count(), 0);
        assert_eq!(c.acked().dirty_ledgers(), vec![1]);
    }

    #[test]
    fn rejected_calls_change_nothing() {
        let mut c = Cursor::new(p(1, -1), false);
        c.ack(1, 3).unwrap();
        let before = c.clone();
        assert!(c.ack_many(&[1, 1], &[4, -2]).is_err());
        assert!(c.ack_batch_index(1, 5, 3, 3).is_err());
        assert!(c.ack_batch_index(1, 5, 0, 0).is_err());
        assert!(c.ack(-1, 0).is_err());
        assert_eq!(c.acked(), before.acked());
        assert_eq!(c.batch_count(), 0);
        assert_eq!(c.mutations(), before.mutations());
    }

    #[test]
    fn adopting_a_batch_size_keeps_the_estimate_balanced() {
        let restored = BatchAcks::from_words(0, &[1 << 5]).unwrap();
        let mut c =
            Cursor::from_parts(p(1, -1), RangeSet::new(false), vec![(p(1, 4), restored)]).unwrap();
        let empty = Cursor::new(p(1, -1), false).compact_size_estimate();
        assert!(c.ack_batch_index(1, 4, 5, 100).unwrap());
        assert_eq!(
            c.compact_size_estimate(),
            empty + COMPACT_BYTES_PER_LEDGER + COMPACT_BYTES_PER_RUN
        );
    }

    #[test]
    fn from_parts_normalises() {
        let mut rs = RangeSet::new(false);
        rs.add_open_closed(1, -1, 1, 9, None).unwrap();
        rs.add(1, 12).unwrap();
        let b = BatchAcks::new(4).unwrap();
        let c = Cursor::from_parts(p(1, 4), rs, vec![(p(1, 3), b.clone()), (p(1, 11), b)]).unwrap();
        assert_eq!(c.mark_delete(), p(1, 9));
        assert_eq!(c.acked().to_string(), "[(1:11..1:12]]");
        assert_eq!(c.batch_count(), 1);
    }
}
