//! A ledger's live container as a plain bitset (`Hot`): where scattered acks land, one bit test
//! and set each.

use super::*;

/// A ledger's live container (the 65,536 entries where scattered acks land) as a plain bitset:
/// a bit test and set per ack, where roaring would search and shift an array container. Its
/// entries are never in `LedgerBits::bits` at the same time.
#[derive(Debug, Clone)]
pub(super) struct Hot {
    pub(super) key: u32,
    pub(super) words: Box<[u64; 1024]>,
    pub(super) card: u32,
    /// Every word below this one is zero (mark-delete clears the container from its start, so
    /// scans begin here instead of at word 0).
    pub(super) low: usize,
}

impl Hot {
    pub(super) fn base(&self) -> u32 {
        self.key << 16
    }

    pub(super) fn last(&self) -> u32 {
        (self.key << 16) | 0xFFFF
    }

    #[inline]
    pub(super) fn covers(&self, e: u32) -> bool {
        e >> 16 == self.key
    }

    #[inline]
    pub(super) fn get(&self, e: u32) -> bool {
        let i = (e & 0xFFFF) as usize;
        self.words[i >> 6] >> (i & 63) & 1 == 1
    }

    /// Sets the bit of `e`; whether it was clear.
    #[inline]
    pub(super) fn set(&mut self, e: u32) -> bool {
        let i = (e & 0xFFFF) as usize;
        let (w, m) = (&mut self.words[i >> 6], 1u64 << (i & 63));
        let new = *w & m == 0;
        *w |= m;
        self.card += u32::from(new);
        self.low = self.low.min(i >> 6);
        new
    }

    /// Clears the bit of `e`; whether it was set.
    pub(super) fn clear(&mut self, e: u32) -> bool {
        let i = (e & 0xFFFF) as usize;
        let (w, m) = (&mut self.words[i >> 6], 1u64 << (i & 63));
        let held = *w & m != 0;
        *w &= !m;
        self.card -= u32::from(held);
        held
    }

    /// Mask of the bits `lo..=hi` (offsets within a word).
    pub(super) fn mask(lo: u32, hi: u32) -> u64 {
        let upper = if hi == 63 {
            u64::MAX
        } else {
            (1u64 << (hi + 1)) - 1
        };
        upper & !((1u64 << lo) - 1)
    }

    /// The words of `a..=b` (clipped to this container) that can hold bits, each with the mask
    /// of the window's bits in it; words below `low` are zero and skipped.
    pub(super) fn window(&self, a: u32, b: u32) -> impl Iterator<Item = (usize, u64)> {
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
    pub(super) fn clear_range(&mut self, a: u32, b: u32) -> u64 {
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
    pub(super) fn count_range(&self, a: u32, b: u32) -> u64 {
        self.window(a, b)
            .map(|(k, m)| u64::from((self.words[k] & m).count_ones()))
            .sum()
    }

    /// Runs of the bits within `a..=b` (clipped), each cut at the window's edges.
    pub(super) fn runs_in(&self, a: u32, b: u32) -> u64 {
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
    pub(super) fn run_start(&self, e: u32) -> u32 {
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
    pub(super) fn run_end(&self, e: u32) -> u32 {
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

    pub(super) fn first(&self) -> Option<u32> {
        let k = self.low + self.words.get(self.low..)?.iter().position(|&w| w != 0)?;
        Some(self.base() + (k * 64) as u32 + self.words[k].trailing_zeros())
    }

    pub(super) fn max(&self) -> Option<u32> {
        let k = self.words.iter().rposition(|&w| w != 0)?;
        Some(self.base() + (k * 64) as u32 + 63 - self.words[k].leading_zeros())
    }

    pub(super) fn to_bitmap(&self) -> RoaringBitmap {
        let bytes: Vec<u8> = self.words.iter().flat_map(|w| w.to_le_bytes()).collect();
        RoaringBitmap::from_lsb0_bytes(self.base(), &bytes)
    }
}
