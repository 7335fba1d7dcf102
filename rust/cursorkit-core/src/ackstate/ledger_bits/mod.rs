//! `LedgerBits`: the acknowledged entries of one ledger as a roaring bitmap plus its run count.
//!
//! The run count is what Pulsar's `size()` recounts after every mutation; here it is kept exact
//! by each mutation (±1 on a split or a merge), so the range count of a whole set is O(1).
//!
//! Here: the type, membership, removal and the byte and memory figures; `hot.rs` the live
//! container as a bitset, `insert.rs` the adds, `runs.rs` the run walks and counts.

use std::borrow::Cow;
use std::ops::RangeInclusive;

use roaring::RoaringBitmap;

mod hot;
mod insert;
mod runs;

use hot::Hot;

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
