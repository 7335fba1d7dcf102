//! `LedgerBits`: the acknowledged entries of one ledger as a roaring bitmap plus its run count.
//!
//! The run count is what Pulsar's `size()` recounts after every mutation; here it is kept exact
//! by each mutation (±1 on a split or a merge), so the range count of a whole set is O(1).

use std::borrow::Cow;
use std::ops::RangeInclusive;

use roaring::RoaringBitmap;

/// Batches of at least this many entries, small beside the set, are merged rather than inserted
/// one by one.
const MERGE_BATCH_MIN: usize = 8;

/// Mutations between two automatic run-optimisations of a ledger, at the least.
const MIN_OPTIMIZE_INTERVAL: u64 = 4096;
/// Per container, mutations between two run-optimisations (bounds the amortised cost per add).
const OPTIMIZE_INTERVAL_PER_CONTAINER: u64 = 256;
/// A container becomes a hot bitset only when it holds at least this many entries (the bitset's
/// 8 KiB is then at most four times the array it replaces; one per ledger at most).
const HOT_MIN_ENTRIES: u64 = 1024;
/// Runs up to this many entries long are walked entry by entry rather than by a range seek.
const SHORT_RUN: u32 = 8;
/// Largest container roaring keeps as an array.
const ARRAY_LIMIT: u64 = 4096;

/// A ledger's live container (the 65,536 entries where scattered acks land) as a plain bitset:
/// a bit test and set per ack, where roaring would search and shift an array container. Its
/// entries are never in `LedgerBits::bits` at the same time.
#[derive(Debug, Clone)]
struct Hot {
    key: u32,
    words: Box<[u64; 1024]>,
    card: u32,
    /// Every word below this one is zero (mark-delete clears the container from its start, so
    /// scans begin here instead of at word 0).
    low: usize,
}

impl Hot {
    fn base(&self) -> u32 {
        self.key << 16
    }

    fn last(&self) -> u32 {
        (self.key << 16) | 0xFFFF
    }

    #[inline]
    fn covers(&self, e: u32) -> bool {
        e >> 16 == self.key
    }

    #[inline]
    fn get(&self, e: u32) -> bool {
        let i = (e & 0xFFFF) as usize;
        self.words[i >> 6] >> (i & 63) & 1 == 1
    }

    /// Sets the bit of `e`; whether it was clear.
    #[inline]
    fn set(&mut self, e: u32) -> bool {
        let i = (e & 0xFFFF) as usize;
        let (w, m) = (&mut self.words[i >> 6], 1u64 << (i & 63));
        let new = *w & m == 0;
        *w |= m;
        self.card += u32::from(new);
        self.low = self.low.min(i >> 6);
        new
    }

    /// Clears the bit of `e`; whether it was set.
    fn clear(&mut self, e: u32) -> bool {
        let i = (e & 0xFFFF) as usize;
        let (w, m) = (&mut self.words[i >> 6], 1u64 << (i & 63));
        let held = *w & m != 0;
        *w &= !m;
        self.card -= u32::from(held);
        held
    }

    /// Mask of the bits `lo..=hi` (offsets within a word).
    fn mask(lo: u32, hi: u32) -> u64 {
        let upper = if hi == 63 {
            u64::MAX
        } else {
            (1u64 << (hi + 1)) - 1
        };
        upper & !((1u64 << lo) - 1)
    }

    /// The words of `a..=b` (clipped to this container) that can hold bits, each with the mask
    /// of the window's bits in it; words below `low` are zero and skipped.
    fn window(&self, a: u32, b: u32) -> impl Iterator<Item = (usize, u64)> {
        let (a, b) = (a.max(self.base()), b.min(self.last()));
        let (lo, hi) = ((a & 0xFFFF) as usize, (b & 0xFFFF) as usize);
        let first = (lo >> 6).max(self.low.min(hi >> 6));
        let count = if a > b { 0 } else { (hi >> 6) + 1 - first };
        (first..).take(count).map(move |k| {
            let from = if k == lo >> 6 { (lo & 63) as u32 } else { 0 };
            let to = if k == hi >> 6 { (hi & 63) as u32 } else { 63 };
            (k, Self::mask(from, to))
        })
    }

    /// Clears `a..=b` (clipped to this container); how many were set.
    fn clear_range(&mut self, a: u32, b: u32) -> u64 {
        let (a, b) = (a.max(self.base()), b.min(self.last()));
        if a > b {
            return 0;
        }
        let (lo, hi) = ((a & 0xFFFF) as usize, (b & 0xFFFF) as usize);
        // Whether everything below `a` is clear (then, after this, every word below `b`'s is).
        let from_start = lo >> 6 < self.low
            || (lo >> 6 == self.low
                && (lo & 63 == 0
                    || self.words[lo >> 6] & Self::mask(0, (lo & 63) as u32 - 1) == 0));
        let mut removed = 0u64;
        for (k, m) in self.window(a, b) {
            removed += u64::from((self.words[k] & m).count_ones());
            self.words[k] &= !m;
        }
        self.card -= removed as u32;
        if from_start {
            self.low = self.low.max(hi >> 6);
        }
        removed
    }

    /// Entries set within `a..=b` (clipped to this container).
    fn count_range(&self, a: u32, b: u32) -> u64 {
        self.window(a, b)
            .map(|(k, m)| u64::from((self.words[k] & m).count_ones()))
            .sum()
    }

    /// Runs of the bits within `a..=b` (clipped), each cut at the window's edges.
    fn runs_in(&self, a: u32, b: u32) -> u64 {
        let mut runs = 0u64;
        let mut carry = 0u64; // the window's bit just below the current word (0 before the first)
        for (k, m) in self.window(a, b) {
            let w = self.words[k] & m;
            runs += u64::from((w & !((w << 1) | carry)).count_ones());
            carry = (w >> 63) & (m >> 63);
        }
        runs
    }

    /// The first entry of the run holding `e` (set), within this container.
    fn run_start(&self, e: u32) -> u32 {
        let mut i = (e & 0xFFFF) as usize;
        loop {
            let (k, b) = (i >> 6, i & 63);
            // Bits at or below b, inverted: the highest clear bit below i ends the run.
            let below = !self.words[k] & Self::mask(0, b as u32);
            if below != 0 {
                let z = 63 - below.leading_zeros() as usize;
                return self.base() + (k * 64 + z + 1) as u32;
            }
            if k == 0 {
                return self.base();
            }
            i = k * 64 - 1;
        }
    }

    /// The last entry of the run holding `e` (set), within this container.
    fn run_end(&self, e: u32) -> u32 {
        let mut i = (e & 0xFFFF) as usize;
        loop {
            let (k, b) = (i >> 6, i & 63);
            let above = !self.words[k] & Self::mask(b as u32, 63);
            if above != 0 {
                let z = above.trailing_zeros() as usize;
                return self.base() + (k * 64 + z - 1) as u32;
            }
            if k == 1023 {
                return self.last();
            }
            i = (k + 1) * 64;
        }
    }

    fn first(&self) -> Option<u32> {
        let k = self.low + self.words.get(self.low..)?.iter().position(|&w| w != 0)?;
        Some(self.base() + (k * 64) as u32 + self.words[k].trailing_zeros())
    }

    fn max(&self) -> Option<u32> {
        let k = self.words.iter().rposition(|&w| w != 0)?;
        Some(self.base() + (k * 64) as u32 + 63 - self.words[k].leading_zeros())
    }

    fn to_bitmap(&self) -> RoaringBitmap {
        let bytes: Vec<u8> = self.words.iter().flat_map(|w| w.to_le_bytes()).collect();
        RoaringBitmap::from_lsb0_bytes(self.base(), &bytes)
    }
}

/// One ledger's acknowledged entries.
#[derive(Debug, Clone)]
pub(crate) struct LedgerBits {
    bits: RoaringBitmap,
    /// The live container as a bitset, when scattered acks have been landing there.
    hot: Option<Box<Hot>>,
    /// Entries added through `hot` since it was made (pays for switching it).
    hot_gain: u64,
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
            hot: None,
            hot_gain: 0,
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
        self.view() == other.view()
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
        i64::from(entry) <= self.max && self.held(entry)
    }

    /// Whether `e` is held, wherever it lives.
    #[inline]
    fn held(&self, e: u32) -> bool {
        match &self.hot {
            Some(h) if h.covers(e) => h.get(e),
            _ => self.bits.contains(e),
        }
    }

    /// The highest entry held, recomputed (after a removal at the top).
    fn recompute_max(&self) -> i64 {
        let roaring = self.bits.max().map_or(-1, i64::from);
        let hot = self
            .hot
            .as_ref()
            .and_then(|h| h.max())
            .map_or(-1, i64::from);
        roaring.max(hot)
    }

    /// The whole set as one bitmap (the hot container merged in), for readers that walk it all.
    fn view(&self) -> Cow<'_, RoaringBitmap> {
        match &self.hot {
            Some(h) if h.card > 0 => {
                let mut all = self.bits.clone();
                all |= h.to_bitmap();
                Cow::Owned(all)
            }
            _ => Cow::Borrowed(&self.bits),
        }
    }

    /// Moves the hot container's entries back into the roaring bitmap.
    fn flush_hot(&mut self) {
        if let Some(h) = self.hot.take() {
            if h.card > 0 {
                self.bits |= h.to_bitmap();
            }
        }
        self.hot_gain = 0;
    }

    /// Flushes the hot container when `lo..=hi` or a neighbour reaches it, so that the roaring
    /// paths that follow see every entry they look at.
    fn settle(&mut self, lo: u32, hi: u32) {
        if let Some(h) = &self.hot {
            if lo.saturating_sub(1) <= h.last() && hi.saturating_add(1) >= h.base() {
                self.flush_hot();
            }
        }
    }

    /// Makes container `key` the hot bitset for a small batch landing there, if that pays: the container holds enough entries that a bitset costs at most twice
    /// its array, and switching away from another hot container is paid for by what that one
    /// took in (so alternating batches cannot make every call copy a container).
    fn use_hot(&mut self, key: u32) {
        if self.hot.as_ref().is_some_and(|h| h.key == key) {
            return;
        }
        let (base, last) = (key << 16, (key << 16) | 0xFFFF);
        let held = self.bits.range_cardinality(base..=last);
        if held < HOT_MIN_ENTRIES {
            return;
        }
        if let Some(h) = &self.hot {
            if self.hot_gain * 16 < u64::from(h.card) + held {
                return;
            }
        }
        self.flush_hot();
        let mut hot = Hot {
            key,
            words: Box::new([0; 1024]),
            card: 0,
            low: 1024,
        };
        for v in self.bits.range(base..=last) {
            hot.set(v);
        }
        self.bits.remove_range(base..=last);
        self.hot = Some(Box::new(hot));
    }

    /// Adds a batch lying in the hot container: a bit per entry, the run count kept exact by
    /// looking at each new entry's neighbours as it goes in (in any order).
    fn insert_hot(&mut self, entries: &[u32]) -> u64 {
        let Some(hot) = self.hot.as_mut() else {
            return 0;
        };
        let bits = &self.bits;
        let (mut added, mut delta, mut top) = (0u64, 0i64, self.max);
        for &e in entries {
            if !hot.set(e) {
                continue;
            }
            added += 1;
            top = top.max(i64::from(e));
            let left = e > 0
                && if hot.covers(e - 1) {
                    hot.get(e - 1)
                } else {
                    bits.contains(e - 1)
                };
            let right = e < u32::MAX
                && if hot.covers(e + 1) {
                    hot.get(e + 1)
                } else {
                    bits.contains(e + 1)
                };
            delta += 1 - i64::from(left) - i64::from(right);
        }
        self.max = top;
        if added > 0 {
            self.runs = self.runs.saturating_add_signed(delta);
            self.hot_gain += added;
            self.touched(added);
        }
        added
    }

    /// Adds one entry; returns whether it was new.
    #[inline]
    pub(crate) fn insert(&mut self, entry: u32) -> bool {
        if self.hot.as_ref().is_some_and(|h| h.covers(entry)) {
            return self.insert_hot(&[entry]) == 1;
        }
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
            let left = entry > 0 && self.held(entry - 1);
            let right = self.held(entry + 1); // entry < max, so no overflow
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
        match self.hot.as_mut() {
            Some(h) if h.covers(entry) => {
                h.clear(entry);
            }
            _ => {
                self.bits.remove(entry);
            }
        }
        let left = entry > 0 && self.held(entry - 1);
        let right = entry < u32::MAX && self.held(entry + 1);
        match (left, right) {
            (true, true) => self.runs += 1,
            (false, false) => self.runs -= 1,
            _ => {}
        }
        if i64::from(entry) == self.max {
            self.max = self.recompute_max();
        }
        self.touched(1);
        true
    }

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
    fn insert_roaring(&mut self, mut entries: Vec<u32>, small: bool) -> u64 {
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
        let left_rest = a > 0 && self.held(a - 1) && self.held(a);
        let right_rest = b < u32::MAX && self.held(b + 1) && self.held(b);
        let from_hot = self.hot.as_mut().map_or(0, |h| h.clear_range(a, b));
        let removed = from_hot
            + if (b >> 16) - (a >> 16) > 2 {
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
            self.max = self.recompute_max();
        }
        self.touched(removed);
        removed
    }

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
    fn roaring_runs(&self, lo: u32, hi: u32) -> u64 {
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
    fn run_start_of(&self, mut e: u32) -> u32 {
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
    fn run_end_of(&self, mut e: u32) -> u32 {
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

    fn count_runs(&self) -> u64 {
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

    /// Entries held within `range`.
    pub(crate) fn range_cardinality(&self, range: RangeInclusive<u32>) -> u64 {
        let hot = self
            .hot
            .as_ref()
            .map_or(0, |h| h.count_range(*range.start(), *range.end()));
        self.bits.range_cardinality(range) + hot
    }

    pub(crate) fn cardinality(&self) -> u64 {
        self.bits.len() + self.hot.as_ref().map_or(0, |h| u64::from(h.card))
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
        let all = self.view();
        let bits: &RoaringBitmap = &all;
        let mut canonical = bits.clone();
        // Only containers of at most 4096 entries can tie between array and run encodings;
        // rebuild those from their values so they start as arrays, as the reference does.
        let mut it = bits.iter();
        let mut next_key: u32 = 0;
        loop {
            it.advance_to(next_key << 16);
            let Some(v) = it.next() else { break };
            let key = v >> 16;
            let span = (key << 16)..=((key << 16) | 0xFFFF);
            if bits.range_cardinality(span.clone()) <= ARRAY_LIMIT {
                let values = RoaringBitmap::from_sorted_iter(bits.range(span.clone()))
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
        let hot = self
            .hot
            .as_ref()
            .map_or(0, |_| std::mem::size_of::<Hot>() + 8192);
        payload as usize + s.n_containers as usize * 32 + std::mem::size_of::<Self>() + hot
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
