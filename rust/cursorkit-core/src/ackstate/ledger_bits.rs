//! `LedgerBits`: the acknowledged entries of one ledger as a roaring bitmap plus its run count.
//!
//! The run count is what Pulsar's `size()` recounts after every mutation; here it is kept exact
//! by each mutation (±1 on a split or a merge), so the range count of a whole set is O(1).

use std::ops::RangeInclusive;

use roaring::RoaringBitmap;

/// Batches of at least this many entries, small beside the set, are merged rather than inserted
/// one by one.
const MERGE_BATCH_MIN: usize = 8;

/// Mutations between two automatic run-optimisations of a ledger, at the least.
const MIN_OPTIMIZE_INTERVAL: u64 = 4096;
/// Per container, mutations between two run-optimisations (bounds the amortised cost per add).
const OPTIMIZE_INTERVAL_PER_CONTAINER: u64 = 256;
/// Largest container roaring keeps as an array.
const ARRAY_LIMIT: u64 = 4096;

/// One ledger's acknowledged entries.
#[derive(Debug, Clone)]
pub(crate) struct LedgerBits {
    bits: RoaringBitmap,
    runs: u64,
    /// Highest entry held, or -1 when empty.
    max: i64,
    dirty: bool,
    ops: u64,
    optimize_at: u64,
}

impl Default for LedgerBits {
    fn default() -> Self {
        Self {
            bits: RoaringBitmap::new(),
            runs: 0,
            max: -1,
            dirty: false,
            ops: 0,
            optimize_at: MIN_OPTIMIZE_INTERVAL,
        }
    }
}

impl PartialEq for LedgerBits {
    fn eq(&self, other: &Self) -> bool {
        self.bits == other.bits
    }
}

impl LedgerBits {
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Builds a ledger from a finished bitmap (decoding), counting its runs once.
    pub(crate) fn from_bitmap(bits: RoaringBitmap) -> Self {
        let mut ledger = Self::new();
        ledger.max = bits.max().map_or(-1, i64::from);
        ledger.bits = bits;
        ledger.runs = ledger.count_runs();
        ledger.optimize();
        ledger
    }

    pub(crate) fn runs(&self) -> u64 {
        self.runs
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.max < 0
    }

    pub(crate) fn max(&self) -> i64 {
        self.max
    }

    pub(crate) fn is_dirty(&self) -> bool {
        self.dirty
    }

    pub(crate) fn set_dirty(&mut self, dirty: bool) {
        self.dirty = dirty;
    }

    #[inline]
    pub(crate) fn contains(&self, entry: u32) -> bool {
        i64::from(entry) <= self.max && self.bits.contains(entry)
    }

    /// Adds one entry; returns whether it was new.
    #[inline]
    pub(crate) fn insert(&mut self, entry: u32) -> bool {
        let e = i64::from(entry);
        if e > self.max {
            // Appending past the end, the in-order ack path: no neighbour look-ups needed.
            // (`try_push` would rescan a bitmap container for its maximum; we know it already.)
            self.bits.insert(entry);
            if !(self.max >= 0 && e == self.max + 1) {
                self.runs += 1;
            }
            self.max = e;
        } else {
            if !self.bits.insert(entry) {
                return false;
            }
            let left = entry > 0 && self.bits.contains(entry - 1);
            let right = self.bits.contains(entry + 1); // entry < max, so no overflow
            self.runs = self.runs + 1 - u64::from(left) - u64::from(right);
        }
        self.touched(1);
        true
    }

    /// Removes one entry; returns whether it was present.
    pub(crate) fn remove(&mut self, entry: u32) -> bool {
        if !self.contains(entry) {
            return false;
        }
        self.bits.remove(entry);
        let left = entry > 0 && self.bits.contains(entry - 1);
        let right = entry < u32::MAX && self.bits.contains(entry + 1);
        match (left, right) {
            (true, true) => self.runs += 1,
            (false, false) => self.runs -= 1,
            _ => {}
        }
        if i64::from(entry) == self.max {
            self.max = self.bits.max().map_or(-1, i64::from);
        }
        self.touched(1);
        true
    }

    /// Adds a batch of entries in any order; returns how many were new.
    ///
    /// A sorted batch past the current end (in-order acks) is appended run by run with its run
    /// count taken from the batch itself; a small batch goes entry by entry; a large unsorted
    /// one is inserted wholesale and the ledger's runs recounted once.
    pub(crate) fn insert_batch(&mut self, mut entries: Vec<u32>) -> u64 {
        if entries.is_empty() {
            return 0;
        }
        let small = (entries.len() as u64) * 4 < self.bits.len();
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
            self.max = self.bits.max().map_or(-1, i64::from);
            self.touched(added);
        }
        added
    }

    /// Adds a dense batch (in any order) that lands where the set holds nothing: the entries
    /// become bits of a word array (one pass), the run count comes from the words, and the words
    /// become roaring containers at once (or, when they hold long runs, one range per run).
    /// None when the batch is sparse or overlaps held entries; the caller then takes another path.
    fn insert_dense(&mut self, entries: &[u32]) -> Option<u64> {
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
    fn merge_small(&mut self, mut entries: Vec<u32>) -> u64 {
        sort_dedup(&mut entries);
        entries.retain(|&e| !self.bits.contains(e));
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
            let left = a > 0 && self.bits.contains(a - 1);
            let right = b < u32::MAX && self.bits.contains(b + 1);
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
    fn append_sorted(&mut self, entries: &[u32]) -> u64 {
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

    /// Removes every entry of `range`; returns how many were present.
    pub(crate) fn remove_range(&mut self, range: RangeInclusive<u32>) -> u64 {
        let (a, b) = (*range.start(), *range.end());
        if a > b || self.is_empty() || i64::from(a) > self.max {
            return 0;
        }
        let hit = self.runs_within(a..=b);
        if hit == 0 {
            return 0;
        }
        let left_rest = a > 0 && self.bits.contains(a - 1) && self.bits.contains(a);
        let right_rest = b < u32::MAX && self.bits.contains(b + 1) && self.bits.contains(b);
        let removed = if (b >> 16) - (a >> 16) > 2 {
            // roaring's remove_range drops emptied containers one Vec::remove at a time
            // (quadratic over many containers); a set difference is one linear merge.
            let before = self.bits.len();
            let mut mask = RoaringBitmap::new();
            mask.insert_range(a..=b);
            self.bits -= mask;
            before - self.bits.len()
        } else {
            self.bits.remove_range(a..=b)
        };
        self.runs = self.runs - hit + u64::from(left_rest) + u64::from(right_rest);
        if i64::from(b) >= self.max {
            self.max = self.bits.max().map_or(-1, i64::from);
        }
        self.touched(removed);
        removed
    }

    /// Number of maximal runs of the bitmap restricted to `window`.
    pub(crate) fn runs_within(&self, window: RangeInclusive<u32>) -> u64 {
        let mut it = self.bits.range(window);
        let mut n = 0;
        while it.next_range().is_some() {
            n += 1;
        }
        n
    }

    fn count_runs(&self) -> u64 {
        self.runs_within(0..=u32::MAX)
    }

    /// The maximal run containing `entry`, if the entry is held.
    pub(crate) fn run_containing(&self, entry: u32) -> Option<RangeInclusive<u32>> {
        if !self.contains(entry) {
            return None;
        }
        let start = *self.bits.range(..=entry).next_range_back()?.start();
        let end = *self.bits.range(entry..).next_range()?.end();
        Some(start..=end)
    }

    /// First run, if any.
    pub(crate) fn first_run(&self) -> Option<RangeInclusive<u32>> {
        self.bits.iter().next_range()
    }

    /// Last run, if any.
    pub(crate) fn last_run(&self) -> Option<RangeInclusive<u32>> {
        self.bits.iter().next_range_back()
    }

    /// Calls `f(first, last)` with every run in ascending order; stops when `f` returns false.
    ///
    /// Short runs are found from values fetched in blocks (about 1 ns a value), long ones with
    /// roaring's word-level `next_range`, whichever is fewer steps for this ledger's density.
    pub(crate) fn try_for_each_run(&self, mut f: impl FnMut(u32, u32) -> bool) -> bool {
        let card = self.bits.len();
        if card < self.runs * 4 {
            let mut buf = [0u32; 1024];
            let mut it = self.bits.iter();
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
        let mut it = self.bits.iter();
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
        let mut next = lo;
        let mut it = self.bits.range(window);
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

    /// Entries held within `range`.
    pub(crate) fn range_cardinality(&self, range: RangeInclusive<u32>) -> u64 {
        self.bits.range_cardinality(range)
    }

    pub(crate) fn cardinality(&self) -> u64 {
        self.bits.len()
    }

    /// Run-optimises every container (arrays and bitmaps that hold long runs become run containers).
    pub(crate) fn optimize(&mut self) {
        self.bits.optimize();
        let containers = u64::from(self.bits.statistics().n_containers);
        self.ops = 0;
        self.optimize_at = MIN_OPTIMIZE_INTERVAL.max(containers * OPTIMIZE_INTERVAL_PER_CONTAINER);
    }

    /// The bitmap in the standard portable format, run-optimised the way CRoaring and Java's
    /// RoaringBitmap do it, so bytes match theirs: a container of at most 4096 entries starts as
    /// an array and becomes a run container only where that is strictly smaller.
    pub(crate) fn portable_bytes(&self) -> Vec<u8> {
        let mut canonical = self.bits.clone();
        // Only containers of at most 4096 entries can tie between array and run encodings;
        // rebuild those from their values so they start as arrays, as the reference does.
        let mut it = self.bits.iter();
        let mut next_key: u32 = 0;
        loop {
            it.advance_to(next_key << 16);
            let Some(v) = it.next() else { break };
            let key = v >> 16;
            let span = (key << 16)..=((key << 16) | 0xFFFF);
            if self.bits.range_cardinality(span.clone()) <= ARRAY_LIMIT {
                let values = RoaringBitmap::from_sorted_iter(self.bits.range(span.clone()))
                    .expect("a bitmap iterates in ascending order");
                canonical.remove_range(span);
                canonical |= values;
            }
            if key == 0xFFFF {
                break;
            }
            next_key = key + 1;
        }
        canonical.optimize();
        let mut out = Vec::with_capacity(canonical.serialized_size());
        canonical
            .serialize_into(&mut out)
            .expect("writing to a Vec cannot fail");
        out
    }

    /// Bytes this ledger holds on the heap: container payloads plus per-container bookkeeping.
    pub(crate) fn memory_usage(&self) -> usize {
        let s = self.bits.statistics();
        // roaring's statistics count array capacity in u32s and bitmaps in bits; use real sizes.
        let payload = s.n_bytes_array_containers / 2
            + s.n_bytes_run_containers
            + u64::from(s.n_bitset_containers) * 8192;
        // A container is a key plus a store enum holding a Vec/Box: ~32 bytes each.
        payload as usize + s.n_containers as usize * 32 + std::mem::size_of::<Self>()
    }

    #[inline]
    fn touched(&mut self, n: u64) {
        self.dirty = true;
        self.ops += n;
        if self.ops >= self.optimize_at {
            self.optimize();
        }
    }
}

/// The inclusive bit ranges `(start, end)` set in `words` (bit `i` of word `k` is `64k + i`).
fn word_runs(words: &[u64]) -> Vec<(u32, u32)> {
    let mut out = Vec::new();
    let mut open: Option<u32> = None;
    for (k, &w) in words.iter().enumerate() {
        let at = (k as u64 * 64).min(u64::from(u32::MAX)) as u32;
        match w {
            u64::MAX => {
                open.get_or_insert(at);
            }
            0 => {
                if let Some(s) = open.take() {
                    out.push((s, at - 1));
                }
            }
            _ => {
                for b in 0..64u32 {
                    let set = w >> b & 1 == 1;
                    match (set, open) {
                        (true, None) => open = Some(at + b),
                        (false, Some(s)) => {
                            out.push((s, at + b - 1));
                            open = None;
                        }
                        _ => {}
                    }
                }
            }
        }
    }
    if let Some(s) = open {
        // The last bit of the last word (spans are at most 2^32 bits, so this fits).
        let last = (words.len() as u64 * 64).saturating_sub(1);
        out.push((s, last.min(u64::from(u32::MAX)) as u32));
    }
    out
}

/// Sorts and deduplicates `values`: through a bit array when they are dense (one pass each way,
/// about a nanosecond a value), otherwise with an unstable sort.
fn sort_dedup(values: &mut Vec<u32>) {
    let (lo, hi) = values
        .iter()
        .fold((u32::MAX, 0), |(lo, hi), &v| (lo.min(v), hi.max(v)));
    let span = u64::from(hi - lo) + 1;
    if span > (values.len() as u64) * 16 {
        values.sort_unstable();
        values.dedup();
        return;
    }
    let mut words = vec![0u64; span.div_ceil(64) as usize];
    for &v in values.iter() {
        let off = (v - lo) as usize;
        words[off / 64] |= 1 << (off % 64);
    }
    values.clear();
    for (i, &w) in words.iter().enumerate() {
        let mut w = w;
        while w != 0 {
            values.push(lo + (i * 64) as u32 + w.trailing_zeros());
            w &= w - 1;
        }
    }
}
