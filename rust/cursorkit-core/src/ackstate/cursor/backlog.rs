//! What a cursor has left to deliver: the backlog, the next unacknowledged entries, and the moves
//! that skip, clear or reset it.

use super::*;

impl Cursor {
    /// Unacknowledged entries after the mark-delete position (partial batches count as unacked).
    pub fn backlog(&self, sizes: Option<&BTreeMap<i64, u64>>) -> Result<u64> {
        let sizes = self.sizes_for("backlog", sizes)?;
        self.check_within(sizes)?;
        let md = self.mark_delete;
        let mut total = 0;
        for (&l, &n) in sizes.range(md.ledger_id..) {
            let start = if l == md.ledger_id {
                md.entry_id + 1
            } else {
                0
            };
            let n = n as i64;
            if start >= n {
                continue;
            }
            let acked = self.acked.cardinality(l, start, l, n - 1)?;
            total += (n - start) as u64 - acked;
        }
        Ok(total)
    }

    /// Up to `limit` entries after `after` (and after mark-delete) that are not fully
    /// acknowledged, in order, as a flat `[ledger, entry, ledger, entry, …]` buffer.
    pub fn next_unacked(
        &self,
        after: Option<Position>,
        limit: u64,
        sizes: Option<&BTreeMap<i64, u64>>,
    ) -> Result<Vec<i64>> {
        if limit > MAX_NEXT_UNACKED {
            return Err(CoreError::InvalidArgument(format!(
                "next_unacked limit {limit} is over the {MAX_NEXT_UNACKED} positions one call returns \
                 (16 B each): page through with `after`"
            )));
        }
        let sizes = self.sizes_for("next_unacked", sizes)?;
        if let Some(a) = after {
            check_bound(a.ledger_id, a.entry_id)?;
        }
        let from = after.map_or(self.mark_delete, |a| a.max(self.mark_delete));
        let limit = limit as usize;
        let mut out = Vec::with_capacity(limit.min(1 << 16) * 2);
        self.for_each_unacked_run(from, sizes, |l, a, b| {
            let mut e = a;
            loop {
                if out.len() / 2 >= limit {
                    return false;
                }
                out.extend_from_slice(&[l, i64::from(e)]);
                if e == b {
                    return true;
                }
                e += 1;
            }
        });
        Ok(out)
    }

    /// Calls `f(ledger, first, last)` for each run of entries after `from` that is not fully
    /// acknowledged, in order, until `f` returns false. Costs O(ledgers + runs), not O(entries).
    pub(super) fn for_each_unacked_run(
        &self,
        from: Position,
        sizes: &BTreeMap<i64, u64>,
        mut f: impl FnMut(i64, u32, u32) -> bool,
    ) {
        for (&l, &n) in sizes.range(from.ledger_id..) {
            let start = if l == from.ledger_id {
                from.entry_id.saturating_add(1)
            } else {
                0
            };
            if n == 0 || start >= n as i64 {
                continue;
            }
            let (lo, hi) = (start as u32, (n - 1) as u32);
            let more = match self.acked.ledgers.get(&l) {
                Some(bits) => bits.try_for_each_gap(lo..=hi, |a, b| f(l, a, b)),
                None => f(l, lo, hi),
            };
            if !more {
                break;
            }
        }
    }

    /// Skips (acknowledges) the next `count` unacknowledged entries; returns how many.
    ///
    /// Walks runs of unacknowledged entries without listing them: O(ledgers + runs) time, O(1)
    /// memory, whatever `count` is.
    pub fn skip(&mut self, count: u64, sizes: Option<&BTreeMap<i64, u64>>) -> Result<u64> {
        let sizes = self.sizes_for("skip", sizes)?;
        let mut remaining = count;
        let mut last = None;
        if remaining > 0 {
            self.for_each_unacked_run(self.mark_delete, sizes, |l, a, b| {
                let run = u64::from(b - a) + 1;
                if run >= remaining {
                    last = Some(pos(l, i64::from(a) + remaining as i64 - 1));
                    remaining = 0;
                    return false;
                }
                remaining -= run;
                last = Some(pos(l, i64::from(b)));
                true
            });
        }
        let n = count - remaining;
        if let Some(p) = last {
            self.counters.skipped += n;
            self.move_mark_delete(p);
        }
        Ok(n)
    }

    /// Acknowledges everything up to the last entry of the last non-empty ledger.
    pub fn clear_backlog(&mut self, sizes: Option<&BTreeMap<i64, u64>>) -> Result<bool> {
        let sizes = self.sizes_for("clear_backlog", sizes)?;
        let last = sizes
            .iter()
            .rev()
            .find(|(_, &n)| n > 0)
            .map(|(&l, &n)| pos(l, n as i64 - 1));
        match last {
            Some(p) if p > self.mark_delete => {
                self.move_mark_delete(p);
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    /// Moves the cursor so that `read_position` is the next entry delivered: mark-delete becomes
    /// the entry before it and every individual and batch acknowledgement is forgotten.
    pub fn reset(&mut self, ledger_id: i64, entry_id: i64) -> Result<()> {
        check_entry(ledger_id, entry_id)?;
        self.mark_delete = pos(ledger_id, entry_id - 1);
        self.acked.clear();
        self.batches.clear();
        self.batch_estimate = 0;
        self.counters.resets += 1;
        self.touch();
        self.roll_forward();
        Ok(())
    }
}
