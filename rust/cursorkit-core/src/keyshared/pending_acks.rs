//! `PendingAcks`: one Key_Shared consumer's messages sent and not yet acknowledged, each with its
//! batch size and sticky-key hash (Pulsar's `PendingAcksMap`), in about 12–13 bytes a message.
//!
//! Pulsar keeps `ledger → (entry → IntIntPair)` in nested sorted maps, tens of bytes a message
//! (#26024). Here each ledger holds its messages as sorted *runs* of at most 128 packed items
//! `(entry u32, batch size u32, hash u32)`, 12 bytes each, with the first entry of every run in a
//! side vector for the binary search. Dispatch appends in entry order, so runs fill completely;
//! a redelivered (lower) position splits at most one run, so no insert or removal shifts more than
//! 128 items. Runs give back capacity as they empty and merge with a neighbour when both are small.
//! `drain_and_close` is Pulsar's `forEachAndClose`: it returns everything and refuses later adds.

use std::collections::VecDeque;
use std::mem::size_of;

use crate::ackstate::position::{check_bound, check_entries, check_entry};
use crate::error::{CoreError, Result};

/// Most items a run holds.
const RUN_MAX: usize = 128;

/// A removed or listed pending ack: `(ledger, entry, batch size, hash)`.
pub type PendingAck = (i64, i64, u32, u32);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Item {
    entry: u32,
    batch: u32,
    hash: u32,
}

/// A run with room for one more item (capacity doubles from 4, never beyond [`RUN_MAX`]).
#[inline]
fn make_room(run: &mut Vec<Item>) {
    let (len, cap) = (run.len(), run.capacity());
    if len == cap {
        let target = (cap * 2).clamp(4, RUN_MAX).max(len + 1);
        run.reserve_exact(target - len);
    }
}

/// Largest run kept as a ledger's spare when it empties (a bigger one is given back).
const SPARE_RUN_MAX: usize = 16;
/// Most runs a ledger may have had room for and still be kept as the spare ledger once empty.
const SPARE_LEDGER_RUNS: usize = 8;

/// The pending acks of one ledger: non-empty sorted runs, ascending and disjoint.
///
/// A removed item is first marked (batch size 0, which no live item has) and counted in its run's
/// `dead`; a run is compacted once half of it is dead and dropped once all of it is. Acks come in
/// the order messages were sent, so a run mostly empties front to back: each ack then costs a
/// mark, not a shift of the run, and dropping the front run costs nothing (the runs are deques).
#[derive(Debug, Clone, Default)]
struct LedgerAcks {
    /// First entry of each run (dead or alive).
    firsts: VecDeque<u32>,
    runs: VecDeque<Vec<Item>>,
    /// Marked (dead) items of each run.
    dead: VecDeque<u8>,
    /// The buffer of the last run that emptied, kept empty for the next new run: a consumer
    /// holding a message or two at a time would otherwise allocate a run per send and free it
    /// per ack.
    spare: Vec<Item>,
}

impl LedgerAcks {
    fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }

    /// The run that holds (or would hold) `entry`.
    #[inline]
    fn run_of(&self, entry: u32) -> usize {
        self.firsts
            .partition_point(|&f| f <= entry)
            .saturating_sub(1)
    }

    fn get(&self, entry: u32) -> Option<Item> {
        let run = self.runs.get(self.run_of(entry))?;
        let i = run.binary_search_by_key(&entry, |it| it.entry).ok()?;
        Some(run[i]).filter(|it| it.batch != 0)
    }

    /// A run holding `item`, in the spare buffer when there is one.
    fn new_run(&mut self, item: Item) -> Vec<Item> {
        let mut run = std::mem::take(&mut self.spare);
        if run.capacity() == 0 {
            run.reserve_exact(4);
        }
        run.push(item);
        run
    }

    fn push_run(&mut self, at: usize, run: Vec<Item>) {
        let dead = run.iter().filter(|it| it.batch == 0).count() as u8;
        self.firsts.insert(at, run[0].entry);
        self.runs.insert(at, run);
        self.dead.insert(at, dead);
    }

    /// Inserts an item; false when its entry is present.
    fn insert(&mut self, item: Item) -> bool {
        if self.runs.is_empty() {
            let run = self.new_run(item);
            self.push_run(0, run);
            return true;
        }
        // Dispatch order: after the last item, no search.
        let last = self.runs.len() - 1;
        let tail = &mut self.runs[last];
        if tail.last().is_some_and(|it| it.entry < item.entry) {
            if tail.len() < RUN_MAX {
                make_room(tail);
                tail.push(item);
            } else {
                let run = self.new_run(item);
                self.push_run(last + 1, run);
            }
            return true;
        }
        let r = self.run_of(item.entry);
        let run = &mut self.runs[r];
        let pos = match run.binary_search_by_key(&item.entry, |it| it.entry) {
            Ok(p) if run[p].batch == 0 => {
                run[p] = item; // a marked item comes back to life
                self.dead[r] -= 1;
                return true;
            }
            Ok(_) => return false,
            Err(p) => p,
        };
        if run.len() < RUN_MAX {
            make_room(run);
            run.insert(pos, item);
            if pos == 0 {
                self.firsts[r] = item.entry;
            }
        } else if pos == RUN_MAX {
            // After a full run: the front of the next run if it has room, else a new run.
            match self.runs.get_mut(r + 1) {
                Some(next) if next.len() < RUN_MAX => {
                    make_room(next);
                    next.insert(0, item);
                    self.firsts[r + 1] = item.entry;
                }
                _ => {
                    let run = self.new_run(item);
                    self.push_run(r + 1, run);
                }
            }
        } else {
            // Inside a full run: split it in halves.
            let half = RUN_MAX / 2;
            let mut right = run.split_off(half);
            if pos <= half {
                run.insert(pos, item);
                if pos == 0 {
                    self.firsts[r] = item.entry;
                }
            } else {
                make_room(&mut right);
                right.insert(pos - half, item);
            }
            self.dead[r] = self.runs[r].iter().filter(|it| it.batch == 0).count() as u8;
            self.push_run(r + 1, right);
        }
        true
    }

    /// Removes the item of `entry`, if present.
    fn remove(&mut self, entry: u32) -> Option<Item> {
        let (r, _, item) = self.take(entry, None)?;
        self.tidy(r);
        Some(item)
    }

    /// Marks the item of `entry` taken (batch size 0, which no live item has) without moving
    /// anything: its run, index and item, or None when absent or taken already. `after` is where
    /// the previous take of the batch was: the item just after it is tried first, since acks come
    /// in the order messages were sent.
    #[inline]
    fn take(&mut self, entry: u32, after: Option<(usize, usize)>) -> Option<(usize, usize, Item)> {
        let next = after.map(|(r, i)| {
            if i + 1 < self.runs[r].len() {
                (r, i + 1)
            } else {
                (r + 1, 0)
            }
        });
        // Acks in send order take the oldest live item: the first run, just after its dead prefix.
        let oldest = || {
            let run = self.runs.front()?;
            let i = usize::from(*self.dead.front()?);
            (run.get(i)?.entry == entry).then_some((0, i))
        };
        let hinted =
            next.filter(|&(r, i)| self.runs.get(r).is_some_and(|run| run[i].entry == entry));
        let (r, pos) = match hinted.or_else(oldest) {
            Some(found) => found,
            None => {
                let r = self.run_of(entry);
                let pos = self
                    .runs
                    .get(r)?
                    .binary_search_by_key(&entry, |it| it.entry)
                    .ok()?;
                (r, pos)
            }
        };
        let item = &mut self.runs[r][pos];
        if item.batch == 0 {
            return None;
        }
        let taken = *item;
        item.batch = 0;
        self.dead[r] += 1;
        Some((r, pos, taken))
    }

    /// After marks in run `r`: drops it when all of it is dead, compacts it when half of it is.
    /// Returns whether the run was dropped (the runs after it moved down one).
    fn tidy(&mut self, r: usize) -> bool {
        let (len, dead) = (self.runs[r].len(), usize::from(self.dead[r]));
        if dead == len {
            if let Some(mut run) = self.runs.remove(r) {
                if self.spare.capacity() == 0 && run.capacity() <= SPARE_RUN_MAX {
                    run.clear();
                    self.spare = run;
                }
            }
            self.firsts.remove(r);
            self.dead.remove(r);
            return true;
        }
        if dead * 2 >= len {
            self.runs[r].retain(|it| it.batch != 0);
            self.dead[r] = 0;
            self.settle(r);
        }
        false
    }

    /// After a compaction of run `r` (no dead items left in it): fixes its first entry, gives
    /// back capacity beyond four times its length and merges it with a small neighbour.
    fn settle(&mut self, r: usize) {
        let run = &mut self.runs[r];
        self.firsts[r] = run[0].entry;
        if run.capacity() > 8 && run.len() * 4 <= run.capacity() {
            run.shrink_to(run.len() * 2);
        }
        let small = |a: &Vec<Item>, b: &Vec<Item>| a.len() + b.len() <= RUN_MAX / 2;
        if r + 1 < self.runs.len() && small(&self.runs[r], &self.runs[r + 1]) {
            let next = self.runs.remove(r + 1).unwrap_or_default();
            self.firsts.remove(r + 1);
            let dead = self.dead.remove(r + 1).unwrap_or(0);
            self.runs[r].extend(next);
            self.dead[r] += dead;
        } else if r > 0 && small(&self.runs[r - 1], &self.runs[r]) {
            let this = self.runs.remove(r).unwrap_or_default();
            self.firsts.remove(r);
            let dead = self.dead.remove(r).unwrap_or(0);
            self.runs[r - 1].extend(this);
            self.dead[r - 1] += dead;
        }
    }

    /// Removes the live items with entry `<= entry` into `out`, in order.
    fn remove_up_to(&mut self, ledger: i64, entry: u32, out: &mut Vec<PendingAck>) {
        let covered = self.firsts.partition_point(|&f| f <= entry);
        if covered == 0 {
            return;
        }
        let last = covered - 1;
        let push = |out: &mut Vec<PendingAck>, it: &Item| {
            if it.batch != 0 {
                out.push((ledger, i64::from(it.entry), it.batch, it.hash));
            }
        };
        for run in self.runs.range(..last) {
            run.iter().for_each(|it| push(out, it));
        }
        let run = &mut self.runs[last];
        let cut = run.partition_point(|it| it.entry <= entry);
        run.drain(..cut).for_each(|it| push(out, &it));
        self.runs.drain(..last);
        self.firsts.drain(..last);
        self.dead.drain(..last);
        if self.runs[0].is_empty() {
            self.runs.remove(0);
            self.firsts.remove(0);
            self.dead.remove(0);
            return;
        }
        self.dead[0] = self.runs[0].iter().filter(|it| it.batch == 0).count() as u8;
        if !self.tidy(0) {
            self.firsts[0] = self.runs[0][0].entry;
        }
    }

    fn for_each(&self, mut f: impl FnMut(&Item)) {
        self.runs
            .iter()
            .flatten()
            .filter(|it| it.batch != 0)
            .for_each(&mut f);
    }

    fn memory_usage(&self) -> usize {
        let items: usize = self.runs.iter().map(|r| r.capacity()).sum();
        self.firsts.capacity() * size_of::<u32>()
            + self.runs.capacity() * size_of::<Vec<Item>>()
            + self.dead.capacity()
            + (items + self.spare.capacity()) * size_of::<Item>()
    }
}

/// One consumer's pending acks: `(ledger, entry) → (batch size, hash)`, ordered by position.
///
/// ```
/// use cursorkit_core::PendingAcks;
/// let mut p = PendingAcks::new();
/// assert!(p.add(3, 10, 5, 777).unwrap());   // entry 3:10, a batch of 5 messages, hash 777
/// assert!(!p.add(3, 10, 5, 777).unwrap());  // already pending
/// assert!(p.add(3, 11, 1, 12).unwrap());
/// assert_eq!(p.total_messages(), 6);
/// assert_eq!(p.remove(3, 10).unwrap(), Some((5, 777)));
/// assert_eq!(p.drain_and_close(), vec![(3, 11, 1, 12)]);
/// assert!(p.add(3, 12, 1, 12).is_err());     // closed
/// ```
#[derive(Debug, Clone, Default)]
pub struct PendingAcks {
    /// Ledgers holding pending acks, ascending.
    ledgers: Vec<(i64, LedgerAcks)>,
    /// The last ledger that emptied, kept (empty, with its buffers) for the next new ledger.
    spare: Option<LedgerAcks>,
    len: usize,
    messages: u64,
    closed: bool,
}

#[cold]
fn closed_error() -> CoreError {
    CoreError::InvalidArgument("the pending acks are closed (drain_and_close was called)".into())
}

#[inline]
fn check_batch(batch: u32) -> Result<()> {
    if batch == 0 {
        return Err(CoreError::InvalidArgument(
            "batch size must be at least 1".into(),
        ));
    }
    Ok(())
}

impl PendingAcks {
    /// An empty, open map.
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of pending entries.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when nothing is pending.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Sum of the batch sizes of the pending entries (messages, not entries).
    pub fn total_messages(&self) -> u64 {
        self.messages
    }

    /// Whether [`drain_and_close`](Self::drain_and_close) was called.
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    fn ledger(&self, ledger: i64) -> Option<&LedgerAcks> {
        let i = self.ledgers.binary_search_by_key(&ledger, |l| l.0).ok()?;
        Some(&self.ledgers[i].1)
    }

    /// Records a sent entry; false when it is already pending (it keeps its first values).
    /// Errors: a bad position (`InvalidPosition`), batch size 0 or a closed map (`InvalidArgument`).
    pub fn add(&mut self, ledger: i64, entry: i64, batch_size: u32, hash: u32) -> Result<bool> {
        if self.closed {
            return Err(closed_error());
        }
        let entry = check_entry(ledger, entry)?;
        check_batch(batch_size)?;
        Ok(self.add_unchecked(ledger, entry, batch_size, hash))
    }

    /// [`add`](Self::add) for each row in order; every row is checked first, so on error nothing
    /// changes. Returns which rows were new.
    pub fn add_many(
        &mut self,
        ledgers: &[i64],
        entries: &[i64],
        batch_sizes: &[u32],
        hashes: &[u32],
    ) -> Result<Vec<bool>> {
        let n = ledgers.len();
        if entries.len() != n || batch_sizes.len() != n || hashes.len() != n {
            return Err(CoreError::InvalidArgument(format!(
                "columns differ in length: {n} ledgers, {} entries, {} batch sizes, {} hashes",
                entries.len(),
                batch_sizes.len(),
                hashes.len()
            )));
        }
        if self.closed {
            return Err(closed_error());
        }
        for ((&l, &e), &b) in ledgers.iter().zip(entries).zip(batch_sizes) {
            check_entry(l, e)?;
            check_batch(b)?;
        }
        Ok((0..n)
            .map(|i| self.add_unchecked(ledgers[i], entries[i] as u32, batch_sizes[i], hashes[i]))
            .collect())
    }

    fn add_unchecked(&mut self, ledger: i64, entry: u32, batch: u32, hash: u32) -> bool {
        let i = match self.ledgers.binary_search_by_key(&ledger, |l| l.0) {
            Ok(i) => i,
            Err(i) => {
                let fresh = self.spare.take().unwrap_or_default();
                self.ledgers.insert(i, (ledger, fresh));
                i
            }
        };
        let added = self.ledgers[i].1.insert(Item { entry, batch, hash });
        if added {
            self.len += 1;
            self.messages += u64::from(batch);
        }
        added
    }

    /// Removes a pending entry (an ack); its `(batch size, hash)`, or `None` if it was not pending.
    pub fn remove(&mut self, ledger: i64, entry: i64) -> Result<Option<(u32, u32)>> {
        let entry = check_entry(ledger, entry)?;
        Ok(self.remove_unchecked(ledger, entry))
    }

    /// [`remove`](Self::remove) for each position in order; every position is checked first.
    pub fn remove_many(
        &mut self,
        ledgers: &[i64],
        entries: &[i64],
    ) -> Result<Vec<Option<(u32, u32)>>> {
        if ledgers.len() != entries.len() {
            return Err(CoreError::LengthMismatch {
                ledgers: ledgers.len(),
                entries: entries.len(),
            });
        }
        let mut out = vec![None; ledgers.len()];
        self.remove_each(ledgers, entries, |i, found| out[i] = found)?;
        Ok(out)
    }

    /// [`remove`](Self::remove) for each position in order, reporting `found(i, (batch size, hash))`
    /// for row `i` or `found(i, None)` when it was not pending (a repeat within the call included).
    /// Every position is checked first: on error nothing changes.
    ///
    /// Acks arrive in the order messages were sent, so a batch mostly empties runs front to back:
    /// items are marked first and each run they sat in is compacted once at the end, one pass over
    /// it, instead of shifting the run's tail for every item.
    pub fn remove_each(
        &mut self,
        ledgers: &[i64],
        entries: &[i64],
        mut found: impl FnMut(usize, Option<(u32, u32)>),
    ) -> Result<()> {
        if ledgers.len() != entries.len() {
            return Err(CoreError::LengthMismatch {
                ledgers: ledgers.len(),
                entries: entries.len(),
            });
        }
        check_entries(ledgers, entries)?;
        // (ledger index, run) of every run a take marked: the first kept apart, so the usual
        // handful of acks (all in one run) allocates nothing.
        let mut first: Option<(usize, usize)> = None;
        let mut touched: Vec<(usize, usize)> = Vec::new();
        let mut at: Option<(i64, usize)> = None; // the last ledger looked up
        let mut last: Option<(usize, usize, usize)> = None; // the last take: ledger index, run, item
        for (i, (&l, &e)) in ledgers.iter().zip(entries).enumerate() {
            let li = match at {
                Some((ledger, li)) if ledger == l => li,
                _ => match self.ledgers.binary_search_by_key(&l, |x| x.0) {
                    Ok(li) => {
                        at = Some((l, li));
                        li
                    }
                    Err(_) => {
                        found(i, None);
                        continue;
                    }
                },
            };
            let after = last.filter(|t| t.0 == li).map(|t| (t.1, t.2));
            match self.ledgers[li].1.take(e as u32, after) {
                Some((r, pos, item)) => {
                    last = Some((li, r, pos));
                    match first {
                        None => first = Some((li, r)),
                        Some(f) if f != (li, r) && touched.last() != Some(&(li, r)) => {
                            touched.push((li, r));
                        }
                        Some(_) => {}
                    }
                    self.len -= 1;
                    self.messages -= u64::from(item.batch);
                    found(i, Some((item.batch, item.hash)));
                }
                None => found(i, None),
            }
        }
        let Some(first) = first else {
            return Ok(());
        };
        if touched.is_empty() {
            let (li, r) = first;
            let acks = &mut self.ledgers[li].1;
            acks.tidy(r);
            if acks.is_empty() {
                self.drop_ledger(li);
            }
            return Ok(());
        }
        touched.push(first);
        touched.sort_unstable();
        touched.dedup();
        // From the last run back: settling run r merges only with r + 1 (swept already) or r - 1
        // (swept next, at the same index), so the indexes still to visit stay valid.
        let mut emptied = false;
        for &(li, r) in touched.iter().rev() {
            let acks = &mut self.ledgers[li].1;
            acks.tidy(r);
            emptied |= acks.is_empty();
        }
        if emptied {
            self.ledgers.retain(|(_, acks)| !acks.is_empty());
        }
        Ok(())
    }

    fn remove_unchecked(&mut self, ledger: i64, entry: u32) -> Option<(u32, u32)> {
        let i = self.ledgers.binary_search_by_key(&ledger, |l| l.0).ok()?;
        let item = self.ledgers[i].1.remove(entry)?;
        if self.ledgers[i].1.is_empty() {
            self.drop_ledger(i);
        }
        self.len -= 1;
        self.messages -= u64::from(item.batch);
        Some((item.batch, item.hash))
    }

    /// Removes the emptied ledger at index `i`, keeping its buffers as the spare when small.
    fn drop_ledger(&mut self, i: usize) {
        let (_, acks) = self.ledgers.remove(i);
        if self.spare.is_none() && acks.runs.capacity() <= SPARE_LEDGER_RUNS {
            self.spare = Some(acks);
        }
    }

    /// Removes every pending entry at or before `(ledger, entry)` (a cumulative ack; entry may
    /// be -1) and returns them in position order.
    pub fn remove_all_up_to(&mut self, ledger: i64, entry: i64) -> Result<Vec<PendingAck>> {
        let entry = check_bound(ledger, entry)?;
        let mut out = Vec::new();
        let below = self.ledgers.partition_point(|l| l.0 < ledger);
        for (l, acks) in self.ledgers.drain(..below) {
            acks.for_each(|it| out.push((l, i64::from(it.entry), it.batch, it.hash)));
        }
        if entry >= 0 {
            if let Some((l, acks)) = self.ledgers.first_mut().filter(|l| l.0 == ledger) {
                acks.remove_up_to(*l, entry as u32, &mut out);
                if acks.is_empty() {
                    self.ledgers.remove(0);
                }
            }
        }
        self.len -= out.len();
        self.messages -= out.iter().map(|r| u64::from(r.2)).sum::<u64>();
        Ok(out)
    }

    /// Removes and returns everything in position order, and closes the map: later adds fail
    /// (Pulsar's `forEachAndClose`, used when the consumer leaves).
    pub fn drain_and_close(&mut self) -> Vec<PendingAck> {
        let out = self.items();
        *self = Self {
            closed: true,
            ..Self::default()
        };
        out
    }

    /// The `(batch size, hash)` of a pending entry, or `None`.
    pub fn get(&self, ledger: i64, entry: i64) -> Result<Option<(u32, u32)>> {
        let entry = check_entry(ledger, entry)?;
        Ok(self
            .ledger(ledger)
            .and_then(|l| l.get(entry))
            .map(|it| (it.batch, it.hash)))
    }

    /// Whether an entry is pending.
    pub fn contains(&self, ledger: i64, entry: i64) -> Result<bool> {
        Ok(self.get(ledger, entry)?.is_some())
    }

    /// Every pending ack in position order (the map is unchanged).
    pub fn items(&self) -> Vec<PendingAck> {
        let mut out = Vec::with_capacity(self.len);
        for (l, acks) in &self.ledgers {
            acks.for_each(|it| out.push((*l, i64::from(it.entry), it.batch, it.hash)));
        }
        out
    }

    /// The hash of every pending ack, in position order (for registering draining hashes).
    pub fn hashes(&self) -> Vec<u32> {
        let mut out = Vec::with_capacity(self.len);
        for (_, acks) in &self.ledgers {
            acks.for_each(|it| out.push(it.hash));
        }
        out
    }

    /// Heap bytes held: the ledger vector, run vectors and items (capacities).
    pub fn memory_usage(&self) -> usize {
        self.ledgers.capacity() * size_of::<(i64, LedgerAcks)>()
            + self.spare.as_ref().map_or(0, LedgerAcks::memory_usage)
            + self
                .ledgers
                .iter()
                .map(|(_, l)| l.memory_usage())
                .sum::<usize>()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    #[test]
    fn add_remove_and_totals() {
        let mut p = PendingAcks::new();
        assert!(p.add(1, 0, 3, 9).unwrap());
        assert!(!p.add(1, 0, 7, 8).unwrap()); // first values kept
        assert!(p.add(0, 5, 1, 1).unwrap());
        assert_eq!(p.len(), 2);
        assert_eq!(p.total_messages(), 4);
        assert_eq!(p.get(1, 0).unwrap(), Some((3, 9)));
        assert!(p.contains(0, 5).unwrap());
        assert_eq!(p.remove(1, 1).unwrap(), None);
        assert_eq!(p.items(), vec![(0, 5, 1, 1), (1, 0, 3, 9)]);
        assert_eq!(p.hashes(), vec![1, 9]);
        assert_eq!(p.remove(1, 0).unwrap(), Some((3, 9)));
        assert_eq!(p.remove(0, 5).unwrap(), Some((1, 1)));
        assert!(p.is_empty());
        assert_eq!(p.total_messages(), 0);
        // Emptied, it keeps one small spare ledger (with one spare run) for the next add.
        let spare = p.spare.as_ref().map_or(0, LedgerAcks::memory_usage);
        assert!(spare > 0 && spare <= 256, "{spare} B kept");
        assert_eq!(
            p.memory_usage(),
            p.ledgers.capacity() * size_of::<(i64, LedgerAcks)>() + spare
        );
        assert!(p.add(5, 1, 1, 2).unwrap()); // the spare comes back into use
        assert!(p.spare.is_none());
        assert_eq!(p.items(), vec![(5, 1, 1, 2)]);
    }

    #[test]
    fn bad_input_changes_nothing() {
        let mut p = PendingAcks::new();
        p.add(2, 2, 1, 5).unwrap();
        assert!(matches!(
            p.add(-1, 0, 1, 0),
            Err(CoreError::InvalidPosition(_))
        ));
        assert!(matches!(
            p.add(1, -1, 1, 0),
            Err(CoreError::InvalidPosition(_))
        ));
        assert!(matches!(
            p.add(1, 1 << 32, 1, 0),
            Err(CoreError::InvalidPosition(_))
        ));
        assert!(matches!(
            p.add(1, 0, 0, 0),
            Err(CoreError::InvalidArgument(_))
        ));
        assert!(p.add_many(&[1, 1], &[0, 1], &[1, 0], &[0, 0]).is_err());
        assert!(p.add_many(&[1, 1], &[0], &[1, 1], &[0, 0]).is_err());
        assert!(p.remove_many(&[2, -3], &[2, 0]).is_err());
        assert!(p.remove_many(&[2], &[2, 0]).is_err());
        assert!(p.remove(2, -1).is_err());
        assert!(p.remove_all_up_to(2, -2).is_err());
        assert!(p.remove_all_up_to(-2, 5).is_err());
        assert_eq!(p.items(), vec![(2, 2, 1, 5)]);
    }

    #[test]
    fn remove_all_up_to_is_inclusive_and_crosses_ledgers() {
        let mut p = PendingAcks::new();
        for l in 1..=3 {
            for e in 0..300 {
                p.add(l, e, 2, (l * 1000 + e) as u32).unwrap();
            }
        }
        let got = p.remove_all_up_to(2, 199).unwrap();
        assert_eq!(got.len(), 500);
        assert_eq!(got[0], (1, 0, 2, 1000));
        assert_eq!(*got.last().unwrap(), (2, 199, 2, 2199));
        assert_eq!(p.len(), 400);
        assert_eq!(p.total_messages(), 800);
        assert!(p.remove_all_up_to(3, -1).unwrap().len() == 100);
        assert_eq!(p.items()[0], (3, 0, 2, 3000));
        assert!(p.remove_all_up_to(0, 5).unwrap().is_empty());
        assert_eq!(p.remove_all_up_to(i64::MAX, 0).unwrap().len(), 300);
        assert!(p.is_empty());
    }

    #[test]
    fn drain_and_close_refuses_later_adds() {
        let mut p = PendingAcks::new();
        p.add(1, 1, 1, 1).unwrap();
        assert_eq!(p.drain_and_close(), vec![(1, 1, 1, 1)]);
        assert!(p.is_closed());
        assert!(p.add(1, 2, 1, 1).is_err());
        assert!(p.add_many(&[1], &[3], &[1], &[1]).is_err());
        assert!(p.add_many(&[], &[], &[], &[]).is_err());
        assert!(p.drain_and_close().is_empty());
        assert_eq!(p.remove(1, 1).unwrap(), None);
        assert_eq!(p.memory_usage(), 0);
    }

    #[test]
    fn in_order_dispatch_costs_about_12_bytes() {
        let mut p = PendingAcks::new();
        for e in 0..100_000 {
            p.add(7, e, 1, e as u32 % 65535 + 1).unwrap();
        }
        let per = p.memory_usage() as f64 / 100_000.0;
        assert!(per < 12.5, "{per} B per pending ack");
        // Every other one acked: runs shrink.
        for e in (0..100_000).step_by(2) {
            assert!(p.remove(7, e).unwrap().is_some());
        }
        let per = p.memory_usage() as f64 / 50_000.0;
        assert!(per < 26.0, "{per} B per pending ack");
    }

    #[test]
    fn runs_split_and_merge() {
        let mut p = PendingAcks::new();
        // Out of order: split full runs everywhere.
        let mut x = 7u64;
        let mut model = BTreeMap::new();
        for _ in 0..5000 {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            let e = (x >> 33) as i64 % 20_000;
            assert_eq!(p.add(1, e, 1, 0).unwrap(), model.insert(e, ()).is_none());
        }
        let l = &p.ledgers[0].1;
        assert!(l.runs.iter().all(|r| !r.is_empty() && r.len() <= RUN_MAX));
        let got: Vec<i64> = p.items().iter().map(|r| r.1).collect();
        assert_eq!(got, model.keys().copied().collect::<Vec<_>>());
        let runs_before = p.ledgers[0].1.runs.len();
        for &e in model.keys().collect::<Vec<_>>().iter().step_by(10).skip(1) {
            p.remove(1, *e).unwrap();
        }
        for e in model.keys().copied().collect::<Vec<_>>() {
            if e % 3 != 0 {
                p.remove(1, e).unwrap();
            }
        }
        assert!(p.ledgers[0].1.runs.len() < runs_before);
        for (i, r) in p.ledgers[0].1.runs.iter().enumerate() {
            assert_eq!(p.ledgers[0].1.firsts[i], r[0].entry);
        }
    }

    // ------------------------------------------------------------------- randomised model check

    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        }

        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    fn check(p: &PendingAcks, m: &BTreeMap<(i64, i64), (u32, u32)>) {
        let want: Vec<PendingAck> = m.iter().map(|(&(l, e), &(b, h))| (l, e, b, h)).collect();
        assert_eq!(p.items(), want);
        assert_eq!(p.len(), m.len());
        assert_eq!(
            p.total_messages(),
            m.values().map(|v| u64::from(v.0)).sum::<u64>()
        );
        for (_, l) in &p.ledgers {
            assert!(!l.is_empty());
            assert_eq!(l.firsts.len(), l.runs.len());
            for (f, r) in l.firsts.iter().zip(&l.runs) {
                assert!(!r.is_empty() && r.len() <= RUN_MAX && r.capacity() <= RUN_MAX);
                assert_eq!(*f, r[0].entry);
            }
        }
    }

    #[test]
    fn randomised_against_model() {
        let (mut peak, mut most_runs) = (0, 0);
        for seed in 0..40u64 {
            let mut rng = Rng(seed);
            let ledgers = [0i64, 3, 5, i64::MAX];
            let span = [50u64, 2_000, 1 << 32][seed as usize % 3];
            let mut p = PendingAcks::new();
            let mut m: BTreeMap<(i64, i64), (u32, u32)> = BTreeMap::new();
            // A moving "read position" per ledger, so most adds append as a dispatcher's do.
            let mut next = [0i64; 4];
            for step in 0..4000 {
                let li = rng.below(4) as usize;
                let l = ledgers[li];
                let e = if rng.below(3) == 0 {
                    rng.below(span) as i64
                } else {
                    next[li] = (next[li] + 1 + rng.below(3) as i64) % span as i64;
                    next[li]
                };
                let growing = (step / 1000) % 2 == 0;
                let op = if growing && rng.below(3) == 0 {
                    45
                } else {
                    rng.below(100)
                };
                match op {
                    0..=44 => {
                        let (b, h) = (1 + rng.below(5) as u32, rng.next() as u32);
                        let new = !m.contains_key(&(l, e));
                        if new {
                            m.insert((l, e), (b, h));
                        }
                        assert_eq!(p.add(l, e, b, h).unwrap(), new);
                    }
                    45..=49 => {
                        // Mostly appends after the ledger's read position, some anywhere.
                        let n = rng.below(if growing { 200 } else { 30 }) as usize;
                        let rows: Vec<(i64, i64, u32, u32)> = (0..n)
                            .map(|_| {
                                let li = rng.below(4) as usize;
                                let e = if rng.below(4) == 0 {
                                    rng.below(span) as i64
                                } else {
                                    next[li] = (next[li] + 1) % span as i64;
                                    next[li]
                                };
                                (ledgers[li], e, 1 + rng.below(3) as u32, rng.next() as u32)
                            })
                            .collect();
                        let cols = |f: fn(&(i64, i64, u32, u32)) -> i64| -> Vec<i64> {
                            rows.iter().map(f).collect()
                        };
                        let (ls, es) = (cols(|r| r.0), cols(|r| r.1));
                        let bs: Vec<u32> = rows.iter().map(|r| r.2).collect();
                        let hs: Vec<u32> = rows.iter().map(|r| r.3).collect();
                        let want: Vec<bool> = rows
                            .iter()
                            .map(|r| {
                                let new = !m.contains_key(&(r.0, r.1));
                                if new {
                                    m.insert((r.0, r.1), (r.2, r.3));
                                }
                                new
                            })
                            .collect();
                        assert_eq!(p.add_many(&ls, &es, &bs, &hs).unwrap(), want);
                    }
                    50..=84 => {
                        // Acks: mostly of pending entries.
                        let (l, e) = if rng.below(4) > 0 && !m.is_empty() {
                            let k = rng.below(m.len() as u64) as usize;
                            *m.keys().nth(k).unwrap()
                        } else {
                            (l, e)
                        };
                        assert_eq!(p.remove(l, e).unwrap(), m.remove(&(l, e)));
                    }
                    85..=89 => {
                        // A batch as a consumer acks: a stretch of its pending entries in order
                        // (whole runs emptied front to back), mixed with misses and repeats.
                        let mut ls: Vec<i64> = Vec::new();
                        let mut es: Vec<i64> = Vec::new();
                        if !m.is_empty() {
                            let from = rng.below(m.len() as u64) as usize;
                            let n = rng.below(300) as usize;
                            for &(l, e) in m.keys().skip(from).take(n) {
                                if rng.below(8) > 0 {
                                    ls.push(l);
                                    es.push(e);
                                }
                            }
                        }
                        for _ in 0..rng.below(12) {
                            let at = rng.below(ls.len() as u64 + 1) as usize;
                            let (l, e) = if rng.below(2) == 0 && !ls.is_empty() {
                                let k = rng.below(ls.len() as u64) as usize;
                                (ls[k], es[k])
                            } else {
                                (ledgers[rng.below(4) as usize], rng.below(span) as i64)
                            };
                            ls.insert(at, l);
                            es.insert(at, e);
                        }
                        let want: Vec<Option<(u32, u32)>> = ls
                            .iter()
                            .zip(&es)
                            .map(|(&l, &e)| m.remove(&(l, e)))
                            .collect();
                        assert_eq!(p.remove_many(&ls, &es).unwrap(), want);
                        check(&p, &m);
                    }
                    90..=92 => {
                        let e = e.min(span as i64 / 8) - 1;
                        let got = p.remove_all_up_to(l, e).unwrap();
                        let keep = m.split_off(&(l, e + 1));
                        let want: Vec<PendingAck> =
                            m.iter().map(|(&(l, e), &(b, h))| (l, e, b, h)).collect();
                        m = keep;
                        assert_eq!(got, want);
                    }
                    93..=96 => {
                        for (l, e) in m.keys() {
                            assert!(p.contains(*l, *e).unwrap());
                        }
                        assert_eq!(p.hashes(), m.values().map(|v| v.1).collect::<Vec<_>>());
                    }
                    _ => {
                        if rng.below(8) == 0 {
                            let want: Vec<PendingAck> =
                                m.iter().map(|(&(l, e), &(b, h))| (l, e, b, h)).collect();
                            assert_eq!(p.drain_and_close(), want);
                            assert!(p.add(1, 1, 1, 1).is_err());
                            p = PendingAcks::new();
                            m.clear();
                        }
                    }
                }
                if step % 100 == 0 {
                    check(&p, &m);
                }
                peak = peak.max(p.len());
                let runs = p.ledgers.iter().map(|l| l.1.runs.len()).max().unwrap_or(0);
                most_runs = most_runs.max(runs);
            }
            check(&p, &m);
        }
        // Large enough that runs split and merge.
        assert!(
            peak > 1000 && most_runs > 8,
            "peak {peak}, runs {most_runs}"
        );
    }
}
