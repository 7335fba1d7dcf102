//! Durable redelivery counts: how many times each position went back for redelivery, held as
//! run-length ranges `(ledger, first..=last entry, count)`.
//!
//! Beyond Pulsar, whose counts live in memory only (a restart, an unload or the last consumer
//! leaving resets them, so dead-letter policies may never fire). Neighbouring positions with one
//! count share a run, so a consumer's redelivered window or a burst of nacks costs a few runs.
//! The positions changed since the last [`take_delta`](RedeliveryCounts::take_delta) are kept,
//! so a flush writes only them; a snapshot ([`encode`](RedeliveryCounts::encode)) writes every
//! run. Both forms (version 1):
//!
//! ```text
//! version u8 (1) | ledgers varint
//! per ledger: ledger id varint (the first absolute, then the rise over the previous ledger) | runs varint
//!   per run: gap varint (first entry - the entry after the previous run; the first run: its first entry)
//!            | length - 1 varint | count varint (0 in a delta: forgotten)
//! ```
//!
//! Counts are absolute, so a delta applied twice gives the same state. Counts forgotten because
//! the cursor acknowledged their positions are not in deltas: whoever loads counts prunes them
//! with the cursor ([`prune`](RedeliveryCounts::prune)), which also keeps a count whose ack was
//! lost in a crash. Work and memory are
//! bounded by `max_runs`: a change that gives a count while that many runs are held (or a bulk
//! change that could pass it) is refused with [`CoreError::Budget`], nothing changed; forgetting
//! is always allowed.

use std::collections::BTreeMap;

use crate::ackstate::cursor::Cursor;
use crate::ackstate::position::{check_entry, Position, MAX_ENTRY_ID};
use crate::ackstate::wire::put_varint;
use crate::error::{CoreError, Result};

/// Version of the encoded form this build writes and reads.
pub const REDELIVERY_FORMAT_VERSION: u8 = 1;

/// Default budget of runs held (and decoded): 4,194,304 runs, about 200 MiB at the worst.
pub const DEFAULT_MAX_RUNS: usize = 1 << 22;

/// One run: entries `first..=last` of one ledger (the map key holds the first), one count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Run {
    last: i64,
    count: u32,
}

/// Redelivery counts of positions, as run-length ranges, with the positions changed since the
/// last delta.
#[derive(Debug, Clone)]
pub struct RedeliveryCounts {
    runs: BTreeMap<Position, Run>,
    changed: Vec<Position>,
    positions: u64,
    max_runs: usize,
}

impl Default for RedeliveryCounts {
    fn default() -> Self {
        Self::new(DEFAULT_MAX_RUNS)
    }
}

fn at(ledger_id: i64, entry_id: i64) -> Position {
    Position {
        ledger_id,
        entry_id,
    }
}

impl RedeliveryCounts {
    /// Empty counts holding at most `max_runs` runs (0: the default budget).
    pub fn new(max_runs: usize) -> Self {
        Self {
            runs: BTreeMap::new(),
            changed: Vec::new(),
            positions: 0,
            max_runs: if max_runs == 0 {
                DEFAULT_MAX_RUNS
            } else {
                max_runs
            },
        }
    }

    /// The budget of runs.
    pub fn max_runs(&self) -> usize {
        self.max_runs
    }

    /// Positions with a count.
    pub fn positions(&self) -> u64 {
        self.positions
    }

    /// Runs held.
    pub fn run_count(&self) -> usize {
        self.runs.len()
    }

    /// Whether no position has a count.
    pub fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }

    /// Bytes held, approximately (the map's nodes and the changed positions).
    pub fn memory_usage(&self) -> u64 {
        (self.runs.len() * (std::mem::size_of::<(Position, Run)>() + 8)
            + self.changed.capacity() * std::mem::size_of::<Position>()) as u64
    }

    /// Every run as `(ledger, first entry, last entry, count)`, in position order.
    pub fn runs(&self) -> impl Iterator<Item = (i64, i64, i64, u32)> + '_ {
        self.runs
            .iter()
            .map(|(p, r)| (p.ledger_id, p.entry_id, r.last, r.count))
    }

    /// The run holding `p`.
    fn run_of(&self, p: Position) -> Option<(Position, Run)> {
        let (&k, &r) = self.runs.range(..=p).next_back()?;
        (k.ledger_id == p.ledger_id && p.entry_id <= r.last).then_some((k, r))
    }

    /// The count of an entry (0 when it has none).
    pub fn get(&self, ledger_id: i64, entry_id: i64) -> Result<u32> {
        check_entry(ledger_id, entry_id)?;
        Ok(self
            .run_of(at(ledger_id, entry_id))
            .map_or(0, |(_, r)| r.count))
    }

    /// Counts of many entries.
    pub fn get_many(&self, ledger_ids: &[i64], entry_ids: &[i64]) -> Result<Vec<u32>> {
        check_columns(ledger_ids, entry_ids)?;
        Ok(ledger_ids
            .iter()
            .zip(entry_ids)
            .map(|(&l, &e)| self.run_of(at(l, e)).map_or(0, |(_, r)| r.count))
            .collect())
    }

    /// Sets an entry's count (0 forgets it), recorded for the next delta.
    pub fn set(&mut self, ledger_id: i64, entry_id: i64, count: u32) -> Result<()> {
        check_entry(ledger_id, entry_id)?;
        self.set_range(ledger_id, entry_id, entry_id, count)?;
        self.note_changed(at(ledger_id, entry_id));
        Ok(())
    }

    /// Raises an entry's count by one (saturating) and returns it, recorded for the next delta.
    pub fn increment(&mut self, ledger_id: i64, entry_id: i64) -> Result<u32> {
        let count = self.get(ledger_id, entry_id)?.saturating_add(1);
        self.set(ledger_id, entry_id, count)?;
        Ok(count)
    }

    /// Sets the counts of many entries (all checked first: a bad row changes nothing).
    pub fn set_many(
        &mut self,
        ledger_ids: &[i64],
        entry_ids: &[i64],
        counts: &[u32],
    ) -> Result<()> {
        check_columns(ledger_ids, entry_ids)?;
        if counts.len() != ledger_ids.len() {
            return Err(CoreError::InvalidArgument(format!(
                "{} counts for {} positions",
                counts.len(),
                ledger_ids.len()
            )));
        }
        self.check_room_for(2 * counts.len())?;
        for ((&l, &e), &c) in ledger_ids.iter().zip(entry_ids).zip(counts) {
            self.set_range(l, e, e, c)?;
            self.note_changed(at(l, e));
        }
        Ok(())
    }

    /// Forgets every count at or below `through` (a mark-delete that moved). Not part of a delta:
    /// whoever loads the counts forgets what the cursor has acknowledged.
    pub fn forget_through(&mut self, through: Position) {
        let Some(first) = self.runs.keys().next().copied() else {
            return;
        };
        if first > through {
            return;
        }
        let next = at(through.ledger_id, through.entry_id.saturating_add(1));
        let keep = self.runs.split_off(&next);
        let gone = std::mem::replace(&mut self.runs, keep);
        for (k, r) in gone {
            let (start, end) = (k.entry_id, r.last);
            if k.ledger_id == through.ledger_id && end > through.entry_id {
                let tail = through.entry_id + 1;
                self.runs.insert(at(k.ledger_id, tail), r);
                self.positions -= (tail - start) as u64;
            } else {
                self.positions -= (end - start + 1) as u64;
            }
        }
    }

    /// Forgets the counts of everything `cursor` has acknowledged (mark-delete and individual
    /// acks); `O(positions counted)`. Returns how many were forgotten.
    pub fn prune(&mut self, cursor: &Cursor) -> Result<u64> {
        let before = self.positions;
        self.forget_through(cursor.mark_delete());
        let mut acked: Vec<(i64, i64, i64)> = Vec::new(); // (ledger, first, last) acked spans
        for (k, r) in &self.runs {
            let mut span: Option<(i64, i64)> = None;
            for e in k.entry_id..=r.last {
                if cursor.is_acked(k.ledger_id, e)? {
                    span = match span {
                        Some((a, b)) if b + 1 == e => Some((a, e)),
                        Some((a, b)) => {
                            acked.push((k.ledger_id, a, b));
                            Some((e, e))
                        }
                        None => Some((e, e)),
                    };
                }
            }
            if let Some((a, b)) = span {
                acked.push((k.ledger_id, a, b));
            }
        }
        for (l, a, b) in acked {
            self.remove_span(l, a, b);
        }
        Ok(before - self.positions)
    }

    /// Forgets every count (a seek's replay starts counting again); the next delta forgets them
    /// too (`O(positions counted)`).
    pub fn clear(&mut self) {
        for (k, r) in std::mem::take(&mut self.runs) {
            self.changed
                .extend((k.entry_id..=r.last).map(|e| at(k.ledger_id, e)));
        }
        self.positions = 0;
    }

    /// Whether anything changed since the last [`take_delta`](Self::take_delta).
    pub fn has_changes(&self) -> bool {
        !self.changed.is_empty()
    }

    /// The changed positions with their counts now (0: forgotten), encoded; clears the changes.
    pub fn take_delta(&mut self) -> Vec<u8> {
        let mut changed = std::mem::take(&mut self.changed);
        changed.sort_unstable();
        changed.dedup();
        let mut runs: Vec<(i64, i64, i64, u32)> = Vec::new();
        for p in changed {
            let count = self.run_of(p).map_or(0, |(_, r)| r.count);
            match runs.last_mut() {
                Some(last)
                    if last.0 == p.ledger_id && last.2 + 1 == p.entry_id && last.3 == count =>
                {
                    last.2 = p.entry_id;
                }
                _ => runs.push((p.ledger_id, p.entry_id, p.entry_id, count)),
            }
        }
        encode_runs(runs.into_iter())
    }

    /// Every run, encoded (a snapshot).
    pub fn encode(&self) -> Vec<u8> {
        encode_runs(self.runs())
    }

    /// The first `n` runs in position order, encoded (a snapshot cut to a budget).
    pub fn encode_first(&self, n: usize) -> Vec<u8> {
        encode_runs(self.runs().take(n))
    }

    /// Counts decoded from [`encode`](Self::encode) or [`take_delta`](Self::take_delta) bytes, as
    /// stored: nothing is changed yet.
    pub fn decode(data: &[u8], max_runs: usize) -> Result<Self> {
        let mut out = Self::new(max_runs);
        out.apply(data)?;
        out.changed = Vec::new();
        Ok(out)
    }

    /// Applies a delta (or a snapshot) over these counts: each run's count replaces the held one,
    /// and its positions are changed for the next delta (`O(positions in the runs)`). Damaged
    /// bytes change nothing ([`CoreError::Corrupt`]); so does a delta past the budget.
    pub fn apply(&mut self, data: &[u8]) -> Result<()> {
        let runs = decode_runs(data, self.max_runs)?;
        if !self.runs.is_empty() {
            // Each run adds at most two (a split and itself); into nothing, at most one.
            self.check_room_for(2 * runs.len())?;
        }
        for (l, a, b, c) in runs {
            self.set_range(l, a, b, c)?;
            self.changed.extend((a..=b).map(|e| at(l, e)));
        }
        Ok(())
    }

    /// Refuses a change that could add `more` runs past the budget (one run of slack: a change
    /// is checked before it splits a run).
    fn check_room_for(&self, more: usize) -> Result<()> {
        if more > 0 && self.runs.len().saturating_add(more) > self.max_runs.saturating_add(1) {
            return Err(self.over_budget(more));
        }
        Ok(())
    }

    fn over_budget(&self, more: usize) -> CoreError {
        CoreError::Budget(format!(
            "redelivery counts would pass their budget of {} runs ({} held, up to {more} more): \
             raise max_runs",
            self.max_runs,
            self.runs.len()
        ))
    }

    fn note_changed(&mut self, p: Position) {
        self.changed.push(p);
        if self.changed.len() > 1024 && self.changed.len() > 4 * self.positions as usize {
            self.changed.sort_unstable();
            self.changed.dedup();
        }
    }

    /// Removes entries `first..=last` of one ledger from every run (splitting the runs at its ends).
    fn remove_span(&mut self, ledger_id: i64, first: i64, last: i64) {
        if let Some((k, r)) = self.run_of(at(ledger_id, first)) {
            if k.entry_id < first {
                self.runs.insert(
                    k,
                    Run {
                        last: first - 1,
                        count: r.count,
                    },
                );
                self.positions -= (r.last.min(last) - first + 1) as u64;
                if r.last > last {
                    self.runs.insert(at(ledger_id, last + 1), r);
                }
            }
        }
        let inside: Vec<Position> = self
            .runs
            .range(at(ledger_id, first)..=at(ledger_id, last))
            .map(|(&k, _)| k)
            .collect();
        for k in inside {
            let Some(r) = self.runs.remove(&k) else {
                continue; // listed just above: always there
            };
            if r.last > last {
                self.runs.insert(at(ledger_id, last + 1), r);
                self.positions -= (last - k.entry_id + 1) as u64;
            } else {
                self.positions -= (r.last - k.entry_id + 1) as u64;
            }
        }
    }

    /// Gives entries `first..=last` of one ledger the count `count` (0: none), merging with equal
    /// neighbours. Refused past the budget, with nothing changed.
    fn set_range(&mut self, ledger_id: i64, first: i64, last: i64, count: u32) -> Result<()> {
        if count > 0 && self.runs.len() >= self.max_runs {
            return Err(self.over_budget(1));
        }
        self.remove_span(ledger_id, first, last);
        if count == 0 {
            return Ok(());
        }
        let (mut start, mut end) = (first, last);
        if first > 0 {
            if let Some((k, r)) = self.run_of(at(ledger_id, first - 1)) {
                if r.count == count {
                    self.runs.remove(&k);
                    self.positions -= (r.last - k.entry_id + 1) as u64;
                    start = k.entry_id;
                }
            }
        }
        if last < MAX_ENTRY_ID {
            let right = at(ledger_id, last + 1);
            if let Some(&r) = self.runs.get(&right) {
                if r.count == count {
                    self.runs.remove(&right);
                    self.positions -= (r.last - right.entry_id + 1) as u64;
                    end = r.last;
                }
            }
        }
        self.runs
            .insert(at(ledger_id, start), Run { last: end, count });
        self.positions += (end - start + 1) as u64;
        Ok(())
    }
}

fn check_columns(ledger_ids: &[i64], entry_ids: &[i64]) -> Result<()> {
    if ledger_ids.len() != entry_ids.len() {
        return Err(CoreError::LengthMismatch {
            ledgers: ledger_ids.len(),
            entries: entry_ids.len(),
        });
    }
    crate::ackstate::position::check_entries(ledger_ids, entry_ids)
}

/// One run of one ledger: first entry, last entry, count.
type LedgerRun = (i64, i64, u32);

/// Encodes runs given in position order (each ledger's runs ascending and apart).
fn encode_runs(runs: impl Iterator<Item = (i64, i64, i64, u32)>) -> Vec<u8> {
    let mut ledgers: Vec<(i64, Vec<LedgerRun>)> = Vec::new();
    for (l, a, b, c) in runs {
        match ledgers.last_mut() {
            Some((id, rs)) if *id == l => rs.push((a, b, c)),
            _ => ledgers.push((l, vec![(a, b, c)])),
        }
    }
    let mut out = vec![REDELIVERY_FORMAT_VERSION];
    put_varint(&mut out, ledgers.len() as u64);
    let mut prev_ledger = 0i64;
    for (i, (l, rs)) in ledgers.iter().enumerate() {
        put_varint(&mut out, if i == 0 { *l } else { l - prev_ledger } as u64);
        prev_ledger = *l;
        put_varint(&mut out, rs.len() as u64);
        let mut free = 0i64;
        for &(a, b, c) in rs {
            put_varint(&mut out, (a - free) as u64);
            put_varint(&mut out, (b - a) as u64);
            put_varint(&mut out, u64::from(c));
            free = b + 1;
        }
    }
    out
}

struct Bytes<'a> {
    data: &'a [u8],
    pos: usize,
}

impl Bytes<'_> {
    fn varint(&mut self, what: &str) -> Result<u64> {
        let mut value = 0u64;
        for i in 0..10 {
            let Some(&byte) = self.data.get(self.pos) else {
                return Err(corrupt(format!("truncated in {what} at byte {}", self.pos)));
            };
            self.pos += 1;
            if i == 9 && byte > 1 {
                break;
            }
            value |= u64::from(byte & 0x7F) << (7 * i);
            if byte < 0x80 {
                return Ok(value);
            }
        }
        Err(corrupt(format!(
            "{what} at byte {} overflows 64 bits",
            self.pos
        )))
    }
}

fn corrupt(what: String) -> CoreError {
    CoreError::Corrupt(format!("redelivery counts: {what}"))
}

/// Decodes runs, every value checked; the work is bounded by the input's length.
fn decode_runs(data: &[u8], max_runs: usize) -> Result<Vec<(i64, i64, i64, u32)>> {
    let Some(&version) = data.first() else {
        return Err(corrupt("empty".into()));
    };
    if version != REDELIVERY_FORMAT_VERSION {
        return Err(CoreError::UnsupportedVersion {
            found: version,
            supported: REDELIVERY_FORMAT_VERSION,
        });
    }
    let mut b = Bytes { data, pos: 1 };
    let ledgers = b.varint("the ledger count")?;
    let mut out = Vec::new();
    let mut ledger = 0i64;
    for i in 0..ledgers {
        let rise = b.varint("a ledger id")?;
        let next = if i == 0 {
            i64::try_from(rise).ok()
        } else if rise == 0 {
            None
        } else {
            i64::try_from(rise).ok().and_then(|r| ledger.checked_add(r))
        };
        ledger = next.ok_or_else(|| {
            corrupt(format!(
                "ledger {i} does not follow ledger {ledger} in order"
            ))
        })?;
        let runs = b.varint("a run count")?;
        if runs == 0 {
            return Err(corrupt(format!("ledger {ledger} has no runs")));
        }
        let mut free = 0u64;
        for _ in 0..runs {
            let gap = b.varint("a gap")?;
            let len = b.varint("a run length")?;
            let count = b.varint("a count")?;
            let first = free.checked_add(gap);
            let last = first.and_then(|f| f.checked_add(len));
            let (Some(first), Some(last)) = (first, last) else {
                return Err(corrupt(format!("a run of ledger {ledger} overflows")));
            };
            if last > MAX_ENTRY_ID as u64 {
                return Err(corrupt(format!(
                    "a run of ledger {ledger} ends at entry {last}, past {MAX_ENTRY_ID}"
                )));
            }
            let count = u32::try_from(count).map_err(|_| {
                corrupt(format!(
                    "count {count} of ledger {ledger} entry {first} is not in 0..2^32"
                ))
            })?;
            if out.len() >= max_runs {
                return Err(CoreError::Budget(format!(
                    "redelivery counts hold more than their budget of {max_runs} runs: raise max_runs"
                )));
            }
            out.push((ledger, first as i64, last as i64, count));
            free = last + 1;
        }
    }
    if b.pos != data.len() {
        return Err(corrupt(format!(
            "{} bytes after the last run",
            data.len() - b.pos
        )));
    }
    Ok(out)
}

#[cfg(test)]
#[path = "redeliveries_tests.rs"]
mod tests;
