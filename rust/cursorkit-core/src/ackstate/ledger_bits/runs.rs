//! `LedgerBits`' runs: taking the run after mark-delete, counting runs in a window, and walking
//! runs and gaps in order.

use super::*;

impl LedgerBits {
    /// Removes `e` and the rest of its run (`e..=end`); returns `end`, or None when `e` is not held.
    ///
    /// The roll of a mark-delete over the run just after it: one run found and dropped, without
    /// the run counting of [`remove_range`](Self::remove_range).
    pub(crate) fn take_run_from(&mut self, e: u32) -> Option<u32> {
        if !self.contains(e) {
            return None;
        }
        let end = self.run_end_of(e);
        let left = e > 0 && self.held(e - 1);
        let from_hot = self.hot.as_mut().map_or(0, |h| h.clear_range(e, end));
        let removed = from_hot
            + if (end >> 16) - (e >> 16) > 2 {
                let before = self.bits.len();
                let mut mask = RoaringBitmap::new();
                mask.insert_range(e..=end);
                self.bits -= mask;
                before - self.bits.len()
            } else if end - e < SHORT_RUN {
                (e..=end).map(|v| u64::from(self.bits.remove(v))).sum()
            } else {
                self.bits.remove_range(e..=end)
            };
        if !left {
            self.runs -= 1; // the whole run went (else its left part stays a run)
        }
        if i64::from(end) >= self.max {
            self.max = self.recompute_max();
        }
        self.touched(removed);
        Some(end)
    }

    /// Number of maximal runs of the bitmap restricted to `window`.
    pub(crate) fn runs_within(&self, window: RangeInclusive<u32>) -> u64 {
        let (lo, hi) = (*window.start(), *window.end());
        let Some(h) = self
            .hot
            .as_ref()
            .filter(|h| lo <= h.last() && hi >= h.base())
        else {
            return self.roaring_runs(lo, hi);
        };
        // The hot container's runs, roaring's on either side, minus runs joined across an edge.
        let mut n = h.runs_in(lo, hi);
        if lo < h.base() {
            n += self.roaring_runs(lo, h.base() - 1);
            n -= u64::from(h.get(h.base()) && self.bits.contains(h.base() - 1));
        }
        if hi > h.last() {
            n += self.roaring_runs(h.last() + 1, hi);
            n -= u64::from(h.get(h.last()) && self.bits.contains(h.last() + 1));
        }
        n
    }

    /// Runs of the roaring part alone within `lo..=hi`.
    pub(super) fn roaring_runs(&self, lo: u32, hi: u32) -> u64 {
        if lo > hi {
            return 0;
        }
        let mut it = self.bits.range(lo..=hi);
        let mut n = 0;
        while it.next_range().is_some() {
            n += 1;
        }
        n
    }

    /// First entry of the run holding `e` (held), across the hot container's edges.
    pub(super) fn run_start_of(&self, mut e: u32) -> u32 {
        loop {
            let start = match &self.hot {
                Some(h) if h.covers(e) => h.run_start(e),
                _ => self
                    .bits
                    .range(..=e)
                    .next_range_back()
                    .map_or(e, |r| *r.start()),
            };
            if start > 0 && self.held(start - 1) {
                e = start - 1;
            } else {
                return start;
            }
        }
    }

    /// Last entry of the run holding `e` (held), across the hot container's edges.
    pub(super) fn run_end_of(&self, mut e: u32) -> u32 {
        // Runs just above mark-delete are mostly a few entries long: probing the next few entries
        // costs less than seeking a range iterator.
        for _ in 0..SHORT_RUN {
            if e == u32::MAX || !self.held(e + 1) {
                return e;
            }
            e += 1;
        }
        loop {
            let end = match &self.hot {
                Some(h) if h.covers(e) => h.run_end(e),
                _ => self.bits.range(e..).next_range().map_or(e, |r| *r.end()),
            };
            if end < u32::MAX && self.held(end + 1) {
                e = end + 1;
            } else {
                return end;
            }
        }
    }

    pub(super) fn count_runs(&self) -> u64 {
        self.runs_within(0..=u32::MAX)
    }

    /// The maximal run containing `entry`, if the entry is held.
    pub(crate) fn run_containing(&self, entry: u32) -> Option<RangeInclusive<u32>> {
        if !self.contains(entry) {
            return None;
        }
        Some(self.run_start_of(entry)..=self.run_end_of(entry))
    }

    /// First run, if any.
    pub(crate) fn first_run(&self) -> Option<RangeInclusive<u32>> {
        let Some(h) = &self.hot else {
            return self.bits.iter().next_range();
        };
        let first = match (self.bits.min(), h.first()) {
            (Some(a), Some(b)) => a.min(b),
            (a, b) => a.or(b)?,
        };
        Some(first..=self.run_end_of(first))
    }

    /// Last run, if any.
    pub(crate) fn last_run(&self) -> Option<RangeInclusive<u32>> {
        if self.hot.is_none() {
            return self.bits.iter().next_range_back();
        }
        let last = u32::try_from(self.max).ok()?;
        Some(self.run_start_of(last)..=last)
    }

    /// Calls `f(first, last)` with every run in ascending order; stops when `f` returns false.
    ///
    /// Short runs are found from values fetched in blocks (about 1 ns a value), long ones with
    /// roaring's word-level `next_range`, whichever is fewer steps for this ledger's density.
    pub(crate) fn try_for_each_run(&self, mut f: impl FnMut(u32, u32) -> bool) -> bool {
        let view = self.view();
        let card = view.len();
        if card < self.runs * 4 {
            let mut buf = [0u32; 1024];
            let mut it = view.iter();
            let mut open: Option<(u32, u32)> = None;
            loop {
                let got = it.next_many(&mut buf);
                if got.is_empty() {
                    break;
                }
                for &v in got.iter() {
                    open = match open {
                        Some((a, b)) if b + 1 == v => Some((a, v)),
                        Some((a, b)) => {
                            if !f(a, b) {
                                return false;
                            }
                            Some((v, v))
                        }
                        None => Some((v, v)),
                    };
                }
            }
            return open.is_none_or(|(a, b)| f(a, b));
        }
        let mut it = view.iter();
        while let Some(r) = it.next_range() {
            if !f(*r.start(), *r.end()) {
                return false;
            }
        }
        true
    }

    /// Calls `f(first, last)` for every maximal stretch of entries NOT held inside `window`, in
    /// ascending order; stops (returning false) when `f` returns false.
    pub(crate) fn try_for_each_gap(
        &self,
        window: RangeInclusive<u32>,
        mut f: impl FnMut(u32, u32) -> bool,
    ) -> bool {
        let (lo, hi) = (u64::from(*window.start()), u64::from(*window.end()));
        let reaches_hot = self
            .hot
            .as_ref()
            .is_some_and(|h| *window.start() <= h.last() && *window.end() >= h.base());
        let all = if reaches_hot {
            self.view()
        } else {
            Cow::Borrowed(&self.bits)
        };
        let mut next = lo;
        let mut it = all.range(window);
        while let Some(r) = it.next_range() {
            let (a, b) = (u64::from(*r.start()), u64::from(*r.end()));
            if a > next && !f(next as u32, (a - 1) as u32) {
                return false;
            }
            next = b + 1;
        }
        next > hi || f(next as u32, hi as u32)
    }

    /// Calls `f(first, last)` with every run in ascending order.
    pub(crate) fn for_each_run(&self, mut f: impl FnMut(u32, u32)) {
        self.try_for_each_run(|a, b| {
            f(a, b);
            true
        });
    }
}
