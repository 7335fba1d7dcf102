//! `LedgerBits`' adds: batches (merged, by ranges, or bit by bit in the hot container), appends
//! past the end, and ranges.

use super::*;

impl LedgerBits {
    /// Adds a batch of entries in any order; returns how many were new.
    ///
    /// A sorted batch past the current end (in-order acks) is appended run by run with its run
    /// count taken from the batch itself; a small batch goes entry by entry; a large unsorted
    /// one is inserted wholesale and the ledger's runs recounted once.
    pub(crate) fn insert_batch(&mut self, entries: Vec<u32>) -> u64 {
        if entries.is_empty() {
            return 0;
        }
        let small = (entries.len() as u64) * 4 < self.cardinality();
        if !small && self.hot.is_none() {
            return self.insert_roaring(entries, small);
        }
        let (lo, hi) = entries
            .iter()
            .fold((u32::MAX, 0), |(lo, hi), &v| (lo.min(v), hi.max(v)));
        let in_hot = self
            .hot
            .as_ref()
            .is_some_and(|h| h.covers(lo) && h.covers(hi));
        if in_hot || (small && i64::from(lo) <= self.max) {
            // Inside the hot container, or small and among held entries (scattered acks): the part
            // in the hot container goes in bit by bit, the rest by a merge; both see every entry
            // wherever it lives.
            let key = entries[entries.len() / 2] >> 16;
            let mut rest = entries;
            let mut added = 0;
            self.use_hot(key);
            if let Some(hot_key) = self.hot.as_ref().map(|h| h.key) {
                // Whatever the hot container is now, its entries live only there.
                let inside: Vec<u32>;
                (inside, rest) = rest.into_iter().partition(|&e| e >> 16 == hot_key);
                added += self.insert_hot(&inside);
            }
            added += if rest.len() < MERGE_BATCH_MIN {
                rest.iter().map(|&e| u64::from(self.insert(e))).sum()
            } else {
                self.merge_small(rest)
            };
            return added;
        }
        self.settle(lo, hi);
        self.insert_roaring(entries, small)
    }

    /// The roaring paths of `insert_batch` (no hot container within reach of the batch).
    pub(super) fn insert_roaring(&mut self, mut entries: Vec<u32>, small: bool) -> u64 {
        // A batch opening with a contiguous stretch (in-order acks) goes in as ranges below.
        let runny = entries.len() >= 64
            && entries[63].wrapping_sub(entries[0]) == 63
            && entries[..64]
                .windows(2)
                .all(|w| w[1] == w[0].wrapping_add(1));
        if !small && !runny {
            if let Some(added) = self.insert_dense(&entries) {
                return added;
            }
        }
        let mut sorted = entries.windows(2).all(|w| w[0] <= w[1]);
        if !sorted && !small {
            // Sorting first beats random inserts into array containers (memmove) by far.
            sort_dedup(&mut entries);
            sorted = true;
        }
        if sorted && i64::from(entries[0]) > self.max {
            return self.append_sorted(&entries);
        }
        if small && entries.len() < MERGE_BATCH_MIN {
            return entries.iter().map(|&e| u64::from(self.insert(e))).sum();
        }
        if small {
            return self.merge_small(entries);
        }
        // Large and (now) sorted but overlapping what is held: insert wholesale, recount once.
        let before = self.bits.len();
        self.bits.extend(entries.iter().copied());
        let added = self.bits.len() - before;
        if added > 0 {
            self.runs = self.count_runs();
            self.max = self.recompute_max();
            self.touched(added);
        }
        added
    }

    /// Adds a dense batch (in any order) that lands where the set holds nothing: the entries
    /// become bits of a word array (one pass), the run count comes from the words, and the words
    /// become roaring containers at once (or, when they hold long runs, one range per run).
    /// None when the batch is sparse or overlaps held entries; the caller then takes another path.
    pub(super) fn insert_dense(&mut self, entries: &[u32]) -> Option<u64> {
        let (lo, hi) = entries
            .iter()
            .fold((u32::MAX, 0), |(lo, hi), &v| (lo.min(v), hi.max(v)));
        let base = lo & !0xFFFF; // container-aligned, so each container is built from whole words
        let span = u64::from(hi - base) + 1;
        if span > (entries.len() as u64) * 16 || self.bits.range(lo..=hi).next().is_some() {
            return None;
        }
        let mut words = vec![0u64; span.div_ceil(64) as usize];
        for &v in entries {
            let off = (v - base) as usize;
            words[off / 64] |= 1 << (off % 64);
        }
        let (mut distinct, mut runs, mut carry) = (0u64, 0u64, 0u64);
        for &w in &words {
            distinct += u64::from(w.count_ones());
            runs += u64::from((w & !((w << 1) | carry)).count_ones());
            carry = w >> 63;
        }
        let left = lo > 0 && self.bits.contains(lo - 1);
        let right = hi < u32::MAX && self.bits.contains(hi + 1);
        if distinct >= runs * 16 {
            // Long runs (a permutation that fills its span): each goes in as one range.
            for (start, end) in word_runs(&words) {
                self.bits.insert_range(base + start..=base + end);
            }
        } else {
            let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
            let batch = RoaringBitmap::from_lsb0_bytes(base, &bytes);
            if self.bits.is_empty() {
                self.bits = batch;
            } else {
                self.bits |= batch;
            }
        }
        self.runs = (self.runs + runs).saturating_sub(u64::from(left) + u64::from(right));
        self.max = self.max.max(i64::from(hi));
        self.touched(distinct);
        Some(distinct)
    }

    /// Adds a batch much smaller than the set, overlapping what is held: one merge per container
    /// (a union) instead of an insert per entry, each of which would shift an array container.
    /// The run count changes by `1 - left - right` for each maximal stretch of new entries.
    pub(super) fn merge_small(&mut self, mut entries: Vec<u32>) -> u64 {
        sort_dedup(&mut entries);
        entries.retain(|&e| !self.held(e));
        let Some(&last) = entries.last() else {
            return 0;
        };
        let mut delta: i64 = 0;
        let mut start = 0;
        while start < entries.len() {
            let mut end = start;
            while end + 1 < entries.len() && entries[end + 1] == entries[end] + 1 {
                end += 1;
            }
            let (a, b) = (entries[start], entries[end]);
            let left = a > 0 && self.held(a - 1);
            let right = b < u32::MAX && self.held(b + 1);
            delta += 1 - i64::from(left) - i64::from(right);
            start = end + 1;
        }
        let added = entries.len() as u64;
        let Ok(batch) = RoaringBitmap::from_sorted_iter(entries) else {
            return 0; // unreachable: sorted and deduplicated above
        };
        self.bits |= batch;
        self.runs = self.runs.saturating_add_signed(delta);
        self.max = self.max.max(i64::from(last));
        self.touched(added);
        added
    }

    /// Appends a sorted batch whose first entry lies past the current maximum.
    ///
    /// One pass counts distinct entries and runs; long runs then go in as ranges (W1-style
    /// in-order acks become run containers at once), short ones through roaring's `append`.
    pub(super) fn append_sorted(&mut self, entries: &[u32]) -> u64 {
        let (mut distinct, mut runs) = (1u64, 1u64);
        for w in entries.windows(2) {
            distinct += u64::from(w[1] != w[0]);
            runs += u64::from(w[1].saturating_sub(w[0]) > 1);
        }
        let joins_last = self.max >= 0 && i64::from(entries[0]) == self.max + 1;
        if distinct >= runs * 16 {
            let mut start = entries[0];
            let mut prev = start;
            for &e in &entries[1..] {
                if e.saturating_sub(prev) > 1 {
                    self.bits.insert_range(start..=prev);
                    start = e;
                }
                prev = e;
            }
            self.bits.insert_range(start..=prev);
        } else if let Some(added) = self.insert_dense(entries) {
            return added;
        } else {
            let mut last = None;
            let deduped = entries
                .iter()
                .copied()
                .filter(|&e| last.replace(e) != Some(e));
            if self.bits.append(deduped).is_err() {
                // Unreachable for a sorted batch past the maximum; stay correct regardless.
                for &e in entries {
                    self.bits.insert(e);
                }
                runs = self.count_runs() - self.runs + u64::from(joins_last);
            }
        }
        self.runs = self.runs + runs - u64::from(joins_last);
        self.max = i64::from(entries[entries.len() - 1]);
        self.touched(distinct);
        distinct
    }

    /// Adds every entry of `range`; returns how many were new.
    pub(crate) fn insert_range(&mut self, range: RangeInclusive<u32>) -> u64 {
        let (a, b) = (*range.start(), *range.end());
        if a > b {
            return 0;
        }
        self.settle(a, b);
        // Every existing run that overlaps or touches [a, b] merges into one.
        let touching = self.runs_within(a.saturating_sub(1)..=b.saturating_add(1));
        let added = self.bits.insert_range(a..=b);
        if added > 0 {
            self.runs = self.runs + 1 - touching;
            self.max = self.max.max(i64::from(b));
            self.touched(added);
        }
        added
    }
}
