//! `DrainingHashes`: PIP-379's draining-hash state of a Key_Shared subscription (Pulsar's
//! `DrainingHashesTracker`), in about 8–10 bytes a draining hash where Pulsar spends about 80.
//!
//! When a hash range moves from consumer `c` to another consumer while `c` still has unacked
//! messages of some of its hashes, each such hash becomes *draining* on `c`: it carries a reference
//! count (one per pending message, [`DrainingHashes::add_entry`]) and every attempt to dispatch it
//! to another consumer is blocked ([`DrainingHashes::should_block`]) until `c` acks the last of
//! them ([`DrainingHashes::reduce_ref`]) or leaves ([`DrainingHashes::remove_consumer`]). That keeps
//! PIP-379's contract: a key has unacked messages on at most one consumer at a time.
//!
//! Layout. Hashes are slots `1..=65535`, so the table is a two-level trie keyed by the hash's
//! high and low byte: a 256-entry index of the present *pages* (512 bytes), then per page a
//! 256-bit map of its present hashes and a dense vector of their values in hash order, found by
//! popcount rank (one popcount: each page keeps the counts before each of its four words).
//! A value is one `u64`: the reference count (32 bits), the owner's *slot* (16 bits: an index into
//! a small table of the consumers that own draining hashes, freed when a consumer's last one
//! leaves) and the blocked-attempt count (16 bits; counts of 65,535 and more move to a side map).
//! Page vectors grow by an eighth, so a page wastes at most about 12% of its values; a page costs
//! 64 bytes. Per-consumer statistics (Pulsar 4's `drainingHashesCount`,
//! `drainingHashesClearedTotal`, `drainingHashesUnackedMessages`) are kept incrementally.

use std::mem::size_of;

use crate::bits::set_bits;
use crate::error::{CoreError, Result};
use crate::mem::{map_bytes, FastMap};

/// Bits of the reference count inside a value.
const REFS_MASK: u64 = 0xFFFF_FFFF;
/// Shift and mask of the owner slot inside a value.
const OWNER_SHIFT: u32 = 32;
const OWNER_MASK: u64 = 0xFFFF;
/// Shift of the inline blocked-attempt count inside a value.
const BLOCKED_SHIFT: u32 = 48;
/// Largest blocked-attempt count kept inline.
const BLOCKED_INLINE_MAX: u64 = 0xFFFE;
/// Inline blocked field meaning "the count is in the side map".
const BLOCKED_SPILLED: u64 = 0xFFFF;
/// `ConsumerRecord::slot` of a consumer that owns no draining hash.
const NO_SLOT: u16 = u16::MAX;
/// Values a page holds at most (one per low byte); also the number of pages.
const PAGE_SIZE: usize = 256;
/// `DrainingHashes::index` entry of an absent page.
const NO_PAGE: u16 = u16::MAX;

#[inline]
fn refs_of(val: u64) -> u32 {
    (val & REFS_MASK) as u32
}

#[inline]
fn owner_slot_of(val: u64) -> u16 {
    ((val >> OWNER_SHIFT) & OWNER_MASK) as u16
}

#[inline]
fn blocked_field(val: u64) -> u64 {
    val >> BLOCKED_SHIFT
}

#[inline]
fn pack(refs: u32, slot: u16) -> u64 {
    u64::from(refs) | (u64::from(slot) << OWNER_SHIFT)
}

/// Spare capacity a page vector of `len` values may carry (an eighth, at least 4).
#[inline]
fn slack(len: usize) -> usize {
    (len / 8).max(4)
}

/// The hashes `hi * 256 + lo` of one high byte `hi` (64 bytes).
#[derive(Debug, Clone)]
struct Page {
    /// Bit `lo` set = hash `hi * 256 + lo` is draining.
    bits: [u64; 4],
    /// Values of the present hashes, in hash order.
    vals: Vec<u64>,
    /// `before[w]`: set bits in words `0..w`, so a rank costs one popcount.
    before: [u8; 4],
    /// The page's high byte.
    hi: u8,
}

impl Page {
    fn new(hi: u8) -> Self {
        Self {
            bits: [0; 4],
            vals: Vec::new(),
            before: [0; 4],
            hi,
        }
    }

    /// Whether `lo` is present, and the index of its value (or where it would go).
    #[inline]
    fn rank(&self, lo: usize) -> (bool, usize) {
        let (w, b) = (lo >> 6, lo & 63);
        let word = self.bits[w];
        let below = (word & ((1u64 << b) - 1)).count_ones() as usize;
        ((word >> b) & 1 == 1, usize::from(self.before[w]) + below)
    }

    fn insert(&mut self, lo: usize, at: usize, val: u64) {
        if self.vals.len() == self.vals.capacity() {
            let len = self.vals.len();
            let target = (len + slack(len)).min(PAGE_SIZE);
            self.vals.reserve_exact(target - len);
        }
        self.vals.insert(at, val);
        self.bits[lo >> 6] |= 1u64 << (lo & 63);
        self.before[(lo >> 6) + 1..]
            .iter_mut()
            .for_each(|n| *n += 1);
    }

    fn remove(&mut self, lo: usize, at: usize) -> u64 {
        let val = self.vals.remove(at);
        self.bits[lo >> 6] &= !(1u64 << (lo & 63));
        self.before[(lo >> 6) + 1..]
            .iter_mut()
            .for_each(|n| *n -= 1);
        self.trim();
        val
    }

    /// Recomputes `before` after `bits` changed wholesale.
    fn recount(&mut self) {
        let mut acc = 0u32;
        for (n, word) in self.before.iter_mut().zip(self.bits) {
            *n = acc as u8; // at most 192 before the last word
            acc += word.count_ones();
        }
    }

    /// Gives back capacity beyond twice the allowed slack.
    fn trim(&mut self) {
        let len = self.vals.len();
        if self.vals.capacity() > len + 2 * slack(len) {
            self.vals.shrink_to(len + slack(len));
        }
    }
}

/// Per-consumer state: its owner slot (while it owns draining hashes) and its statistics.
#[derive(Debug, Clone, Copy)]
struct ConsumerRecord {
    slot: u16,
    count: u32,
    unacked: u64,
    cleared_total: u64,
}

impl ConsumerRecord {
    const EMPTY: Self = Self {
        slot: NO_SLOT,
        count: 0,
        unacked: 0,
        cleared_total: 0,
    };
}

/// Pulsar 4's per-consumer draining statistics (`ConsumerStats.drainingHashes*`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ConsumerDrainingStats {
    /// Hashes draining on the consumer now (`drainingHashesCount`).
    pub draining_hashes_count: u32,
    /// Hashes that stopped draining on it: last pending message acked, or the hash returned to
    /// it (`drainingHashesClearedTotal`).
    pub draining_hashes_cleared_total: u64,
    /// Sum of the reference counts of its draining hashes (`drainingHashesUnackedMessages`).
    pub draining_hashes_unacked_messages: u64,
}

/// One draining hash as Pulsar 4 lists it (`drainingHashes[{hash, unackMsgs, blockedAttempts}]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DrainingHash {
    /// The sticky-key hash slot (`1..=65535`).
    pub hash: u32,
    /// The consumer it drains on.
    pub owner: u32,
    /// Its reference count: the owner's pending messages of this hash (`unackMsgs`).
    pub unacked: u32,
    /// Dispatch attempts to other consumers it blocked (`blockedAttempts`).
    pub blocked_attempts: u64,
}

/// Lifetime counters of a [`DrainingHashes`] (not reset by `clear`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DrainingCounters {
    /// `should_block` calls that blocked.
    pub blocked_attempts: u64,
    /// Unblock signals returned (a blocked hash whose last reference went, not while closing).
    pub unblocked: u64,
    /// Draining hashes that were cleared (last reference acked, or reclaimed by their owner).
    pub cleared: u64,
    /// `reduce_ref` calls by a consumer that does not own the hash's entry (ignored).
    pub stale_reductions: u64,
}

/// What [`DrainingHashes::remove_consumer`] dropped.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RemovedHashes {
    /// The consumer's draining hashes, ascending.
    pub hashes: Vec<u32>,
    /// Per hash, whether it had blocked another consumer (always false when closing): the
    /// dispatcher should reschedule reads for those.
    pub unblocked: Vec<bool>,
}

/// PIP-379's draining hashes: hash → (owner, reference count, blocked attempts), one owner each.
///
/// ```
/// use cursorkit_core::DrainingHashes;
/// let mut d = DrainingHashes::new();
/// d.add_entry(1, 42).unwrap();           // consumer 1 still has a message of hash 42 unacked
/// assert!(d.should_block(2, 42).unwrap()); // so consumer 2 may not get hash 42 yet
/// assert!(d.reduce_ref(1, 42, false).unwrap()); // the ack: removed, and it had blocked -> unblock
/// assert!(!d.should_block(2, 42).unwrap());
/// ```
#[derive(Debug, Clone, Default)]
pub struct DrainingHashes {
    /// `index[hi]`: where page `hi` is in `pages`, or [`NO_PAGE`]; 256 entries while any hash
    /// drains, empty otherwise.
    index: Vec<u16>,
    /// Present pages, in no particular order.
    pages: Vec<Page>,
    len: u32,
    /// Blocked-attempt counts beyond [`BLOCKED_INLINE_MAX`], by hash.
    spilled: FastMap<u16, u64>,
    consumers: FastMap<u32, ConsumerRecord>,
    /// Slot → consumer id (stale for free slots).
    slot_owner: Vec<u32>,
    free_slots: Vec<u16>,
    counters: DrainingCounters,
}

/// Checks a hash slot (`1..=65535`; 0 is Pulsar's `STICKY_KEY_HASH_NOT_SET`).
#[inline]
fn check_hash(hash: u32) -> Result<u16> {
    match u16::try_from(hash) {
        Ok(h) if h != 0 => Ok(h),
        _ => Err(bad_hash(hash)),
    }
}

/// Checks a column of hash slots in one vectorisable pass (the first bad one is reported).
#[inline]
fn check_hashes(hashes: &[u32]) -> Result<()> {
    if hashes
        .iter()
        .all(|&h| h.wrapping_sub(1) < DrainingHashes::MAX_HASH)
    {
        return Ok(());
    }
    let bad = hashes.iter().find(|&&h| check_hash(h).is_err());
    Err(bad_hash(bad.copied().unwrap_or_default()))
}

#[cold]
fn bad_hash(hash: u32) -> CoreError {
    CoreError::InvalidArgument(format!(
        "sticky key hash {hash} is outside 1..=65535 (0 means not set)"
    ))
}

#[cold]
fn foreign_owner(hash: u32, owner: u32, consumer: u32) -> CoreError {
    CoreError::InvalidArgument(format!(
        "hash {hash} is draining on consumer {owner}; consumer {consumer} cannot add to it"
    ))
}

#[cold]
fn refs_overflow(hash: u32) -> CoreError {
    CoreError::InvalidArgument(format!(
        "hash {hash} would hold more than 4294967295 references"
    ))
}

impl DrainingHashes {
    /// Highest hash slot (slots are `1..=MAX_HASH`).
    pub const MAX_HASH: u32 = 65535;

    /// An empty tracker.
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of draining hashes.
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// True when no hash is draining.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// `(page index, value index)` of a present hash.
    #[inline]
    fn find(&self, h: u16) -> Option<(usize, usize)> {
        let p = *self.index.get(usize::from(h >> 8))?;
        if p == NO_PAGE {
            return None;
        }
        let (present, v) = self.pages[usize::from(p)].rank(usize::from(h & 0xFF));
        present.then_some((usize::from(p), v))
    }

    /// The page of high byte `hi`, created if absent.
    fn page_for(&mut self, hi: usize) -> usize {
        if self.index.is_empty() {
            self.index = vec![NO_PAGE; PAGE_SIZE];
        }
        match self.index[hi] {
            NO_PAGE => {
                self.pages.push(Page::new(hi as u8));
                self.index[hi] = (self.pages.len() - 1) as u16;
                self.pages.len() - 1
            }
            p => usize::from(p),
        }
    }

    /// Drops the (empty) page at `p`; the last page moves into its place.
    fn drop_page(&mut self, p: usize) {
        self.index[usize::from(self.pages[p].hi)] = NO_PAGE;
        self.pages.swap_remove(p);
        if let Some(moved) = self.pages.get(p) {
            self.index[usize::from(moved.hi)] = p as u16;
        }
        if self.pages.is_empty() {
            self.pages = Vec::new();
            self.index = Vec::new();
        }
    }

    #[inline]
    fn owner_of_val(&self, val: u64) -> u32 {
        self.slot_owner[usize::from(owner_slot_of(val))]
    }

    fn blocked_of(&self, h: u16, val: u64) -> u64 {
        match blocked_field(val) {
            BLOCKED_SPILLED => self.spilled.get(&h).copied().unwrap_or(BLOCKED_SPILLED),
            b => b,
        }
    }

    /// The owner of a draining hash, or `None`.
    pub fn owner(&self, hash: u32) -> Result<Option<u32>> {
        let h = check_hash(hash)?;
        Ok(self
            .find(h)
            .map(|(p, v)| self.owner_of_val(self.pages[p].vals[v])))
    }

    /// The entry of a draining hash, or `None`.
    pub fn entry(&self, hash: u32) -> Result<Option<DrainingHash>> {
        let h = check_hash(hash)?;
        Ok(self
            .find(h)
            .map(|(p, v)| self.describe(h, self.pages[p].vals[v])))
    }

    fn describe(&self, h: u16, val: u64) -> DrainingHash {
        DrainingHash {
            hash: u32::from(h),
            owner: self.owner_of_val(val),
            unacked: refs_of(val),
            blocked_attempts: self.blocked_of(h, val),
        }
    }

    /// Registers one pending message of `hash` on `consumer`: creates the entry owned by
    /// `consumer` (reference count 1) or adds a reference. An entry owned by another consumer is
    /// `InvalidArgument` (Pulsar's `IllegalStateException`), as is a hash outside `1..=65535`.
    pub fn add_entry(&mut self, consumer: u32, hash: u32) -> Result<()> {
        let h = check_hash(hash)?;
        if let Some((p, v)) = self.find(h) {
            let val = self.pages[p].vals[v];
            let owner = self.owner_of_val(val);
            if owner != consumer {
                return Err(foreign_owner(hash, owner, consumer));
            }
            if refs_of(val) == u32::MAX {
                return Err(refs_overflow(hash));
            }
        }
        self.add_unchecked(consumer, h);
        Ok(())
    }

    /// [`add_entry`](Self::add_entry) for each hash in order (a hash may repeat); every hash is
    /// checked first, so on error nothing changes.
    pub fn add_entries(&mut self, consumer: u32, hashes: &[u32]) -> Result<()> {
        for &hash in hashes {
            let h = check_hash(hash)?;
            if let Some((p, v)) = self.find(h) {
                let owner = self.owner_of_val(self.pages[p].vals[v]);
                if owner != consumer {
                    return Err(foreign_owner(hash, owner, consumer));
                }
            }
        }
        // The consumer's unacked sum bounds each of its counts; only near 2^32 count exactly.
        let held = self.consumers.get(&consumer).map_or(0, |r| r.unacked);
        if held + hashes.len() as u64 > u64::from(u32::MAX) {
            self.check_overflow(hashes)?;
        }
        for &hash in hashes {
            self.add_unchecked(consumer, hash as u16);
        }
        Ok(())
    }

    #[cold]
    fn check_overflow(&self, hashes: &[u32]) -> Result<()> {
        let mut sorted = hashes.to_vec();
        sorted.sort_unstable();
        for run in sorted.chunk_by(|a, b| a == b) {
            let h = run[0] as u16;
            let refs = self
                .find(h)
                .map_or(0, |(p, v)| refs_of(self.pages[p].vals[v]));
            if u64::from(refs) + run.len() as u64 > u64::from(u32::MAX) {
                return Err(refs_overflow(run[0]));
            }
        }
        Ok(())
    }

    /// Adds a reference; the caller checked the hash, the owner and the count.
    fn add_unchecked(&mut self, consumer: u32, h: u16) {
        if let Some((p, v)) = self.find(h) {
            self.pages[p].vals[v] += 1;
            self.record(consumer).unacked += 1;
            return;
        }
        let slot = self.slot_for(consumer);
        let (hi, lo) = (usize::from(h >> 8), usize::from(h & 0xFF));
        let p = self.page_for(hi);
        let page = &mut self.pages[p];
        let (_, v) = page.rank(lo);
        page.insert(lo, v, pack(1, slot));
        self.len += 1;
        let rec = self.record(consumer);
        rec.count += 1;
        rec.unacked += 1;
    }

    fn record(&mut self, consumer: u32) -> &mut ConsumerRecord {
        self.consumers
            .entry(consumer)
            .or_insert(ConsumerRecord::EMPTY)
    }

    /// The consumer's owner slot, allocated if it owns nothing yet.
    fn slot_for(&mut self, consumer: u32) -> u16 {
        let current = self.record(consumer).slot;
        if current != NO_SLOT {
            return current;
        }
        let slot = match self.free_slots.pop() {
            Some(s) => {
                self.slot_owner[usize::from(s)] = consumer;
                s
            }
            None => {
                // Live slots never exceed live hashes (< 65535), so this stays below NO_SLOT.
                self.slot_owner.push(consumer);
                (self.slot_owner.len() - 1) as u16
            }
        };
        self.record(consumer).slot = slot;
        slot
    }

    /// Removes the entry at `(p, v)`: updates the owner's record (freeing its slot when it owns
    /// nothing more) and returns `(owner, references, blocked attempts)`.
    fn remove_at(&mut self, h: u16, p: usize, v: usize) -> (u32, u32, u64) {
        let val = self.pages[p].remove(usize::from(h & 0xFF), v);
        if self.pages[p].vals.is_empty() {
            self.drop_page(p);
        }
        let blocked = match blocked_field(val) {
            BLOCKED_SPILLED => self.spilled.remove(&h).unwrap_or(BLOCKED_SPILLED),
            b => b,
        };
        self.len -= 1;
        let owner = self.owner_of_val(val);
        let refs = refs_of(val);
        let rec = self.record(owner);
        rec.count -= 1;
        rec.unacked -= u64::from(refs);
        if rec.count == 0 {
            let slot = rec.slot;
            rec.slot = NO_SLOT;
            self.free_slots.push(slot);
        }
        (owner, refs, blocked)
    }

    /// Drops one reference of `consumer` to `hash` (an ack, or with `closing` a redelivery of a
    /// leaving consumer's message). At zero the entry is removed; returns true when it had
    /// blocked another consumer and `closing` is false: Pulsar's `unblocked(hash)` signal.
    ///
    /// A hash with no entry is a no-op (most acks are of hashes that never drained). A hash
    /// draining on another consumer is also a no-op, counted in `stale_reductions`: a stale ack
    /// (from before the hash was reclaimed and moved on) must not remove the new owner's entry.
    pub fn reduce_ref(&mut self, consumer: u32, hash: u32, closing: bool) -> Result<bool> {
        let h = check_hash(hash)?;
        Ok(self.reduce_unchecked(consumer, h, closing))
    }

    /// [`reduce_ref`](Self::reduce_ref) for each hash in order; returns the unblocked hashes in
    /// the order they were unblocked. Every hash is checked first, so on error nothing changes.
    pub fn reduce_refs(
        &mut self,
        consumer: u32,
        hashes: &[u32],
        closing: bool,
    ) -> Result<Vec<u32>> {
        check_hashes(hashes)?;
        let mut unblocked = Vec::new();
        for &hash in hashes {
            if self.reduce_unchecked(consumer, hash as u16, closing) {
                unblocked.push(hash);
            }
        }
        Ok(unblocked)
    }

    fn reduce_unchecked(&mut self, consumer: u32, h: u16, closing: bool) -> bool {
        let Some((p, v)) = self.find(h) else {
            return false;
        };
        let val = self.pages[p].vals[v];
        if self.owner_of_val(val) != consumer {
            self.counters.stale_reductions += 1;
            return false;
        }
        if refs_of(val) > 1 {
            self.pages[p].vals[v] -= 1;
            self.record(consumer).unacked -= 1;
            return false;
        }
        let (_, _, blocked) = self.remove_at(h, p, v);
        self.record(consumer).cleared_total += 1;
        self.counters.cleared += 1;
        let unblocked = blocked > 0 && !closing;
        self.counters.unblocked += u64::from(unblocked);
        unblocked
    }

    /// PIP-379's gate: may `hash` not be dispatched to `target`? No entry: false. The entry's
    /// owner is `target` (the hash came back to it): the entry is removed and false. Otherwise the
    /// hash's blocked attempts grow by one and true.
    pub fn should_block(&mut self, target: u32, hash: u32) -> Result<bool> {
        let h = check_hash(hash)?;
        Ok(self.should_block_unchecked(target, h))
    }

    /// [`should_block`](Self::should_block) for `(targets[i], hashes[i])` in order. Lengths and
    /// hashes are checked first, so on error nothing changes.
    pub fn should_block_many(&mut self, targets: &[u32], hashes: &[u32]) -> Result<Vec<bool>> {
        let mut out = Vec::with_capacity(hashes.len());
        self.should_block_into(targets, hashes, &mut out)?;
        Ok(out)
    }

    /// [`should_block_many`](Self::should_block_many) appending to `out` (for callers that feed
    /// long columns in chunks). Lengths and hashes are checked first; on error nothing changes.
    pub fn should_block_into(
        &mut self,
        targets: &[u32],
        hashes: &[u32],
        out: &mut Vec<bool>,
    ) -> Result<()> {
        if targets.len() != hashes.len() {
            return Err(CoreError::InvalidArgument(format!(
                "targets and hashes differ in length: {} targets, {} hashes",
                targets.len(),
                hashes.len()
            )));
        }
        check_hashes(hashes)?;
        if self.len == 0 {
            out.resize(out.len() + hashes.len(), false);
            return Ok(());
        }
        out.extend(
            targets
                .iter()
                .zip(hashes)
                .map(|(&t, &hash)| self.should_block_unchecked(t, hash as u16)),
        );
        Ok(())
    }

    #[inline]
    fn should_block_unchecked(&mut self, target: u32, h: u16) -> bool {
        let Some((p, v)) = self.find(h) else {
            return false;
        };
        let val = self.pages[p].vals[v];
        if self.owner_of_val(val) == target {
            self.remove_at(h, p, v);
            self.record(target).cleared_total += 1;
            self.counters.cleared += 1;
            return false;
        }
        self.counters.blocked_attempts += 1;
        match blocked_field(val) {
            b if b < BLOCKED_INLINE_MAX => self.pages[p].vals[v] += 1 << BLOCKED_SHIFT,
            BLOCKED_INLINE_MAX => {
                self.pages[p].vals[v] |= BLOCKED_SPILLED << BLOCKED_SHIFT;
                self.spilled.insert(h, BLOCKED_SPILLED);
            }
            _ => {
                let n = self.spilled.entry(h).or_insert(BLOCKED_SPILLED);
                *n = n.saturating_add(1);
            }
        }
        true
    }

    /// Drops every draining hash of `consumer` and its statistics (Pulsar's `consumerRemoved`).
    /// `unblocked` marks the hashes that had blocked another consumer, unless `closing`.
    pub fn remove_consumer(&mut self, consumer: u32, closing: bool) -> RemovedHashes {
        let mut out = RemovedHashes::default();
        let Some(rec) = self.consumers.remove(&consumer) else {
            return out;
        };
        if rec.slot == NO_SLOT {
            return out;
        }
        out.hashes.reserve_exact(rec.count as usize);
        out.unblocked.reserve_exact(rec.count as usize);
        for hi in 0..PAGE_SIZE {
            // Read the index each time: dropping a page moves another one.
            let p = match self.index.get(hi) {
                None | Some(&NO_PAGE) => continue,
                Some(&p) => usize::from(p),
            };
            let page = &mut self.pages[p];
            let (mut bits, mut keep) = ([0u64; 4], 0usize);
            for (v, lo) in set_bits(&page.bits.clone()).enumerate() {
                let val = page.vals[v];
                if owner_slot_of(val) == rec.slot {
                    let h = ((hi << 8) | lo) as u16;
                    let blocked = match blocked_field(val) {
                        BLOCKED_SPILLED => self.spilled.remove(&h).unwrap_or(BLOCKED_SPILLED),
                        b => b,
                    };
                    out.hashes.push(u32::from(h));
                    out.unblocked.push(blocked > 0 && !closing);
                } else {
                    page.vals[keep] = val;
                    keep += 1;
                    bits[lo >> 6] |= 1u64 << (lo & 63);
                }
            }
            page.vals.truncate(keep);
            page.bits = bits;
            page.recount();
            if keep == 0 {
                self.drop_page(p);
            } else {
                page.trim();
            }
        }
        self.len -= out.hashes.len() as u32;
        self.free_slots.push(rec.slot);
        self.counters.unblocked += out.unblocked.iter().filter(|&&u| u).count() as u64;
        out
    }

    /// Forgets every hash and every consumer's statistics (all consumers gone) and releases the
    /// memory; the lifetime counters stay.
    pub fn clear(&mut self) {
        *self = Self {
            counters: self.counters,
            ..Self::default()
        };
    }

    /// Statistics of one consumer (zeros for one without a record).
    pub fn consumer_stats(&self, consumer: u32) -> ConsumerDrainingStats {
        self.consumers
            .get(&consumer)
            .map_or_else(ConsumerDrainingStats::default, |r| ConsumerDrainingStats {
                draining_hashes_count: r.count,
                draining_hashes_cleared_total: r.cleared_total,
                draining_hashes_unacked_messages: r.unacked,
            })
    }

    /// Every consumer with a record (it owned a draining hash since it was last removed), with
    /// its statistics, ascending by consumer id.
    pub fn consumers_stats(&self) -> Vec<(u32, ConsumerDrainingStats)> {
        let mut out: Vec<_> = self
            .consumers
            .keys()
            .map(|&c| (c, self.consumer_stats(c)))
            .collect();
        out.sort_unstable_by_key(|&(c, _)| c);
        out
    }

    /// The draining hashes, ascending; only those of `owner` when given.
    pub fn entries(&self, owner: Option<u32>) -> Vec<DrainingHash> {
        let (slot, count) = match owner {
            None => (None, self.len),
            Some(c) => match self.consumers.get(&c) {
                Some(r) if r.slot != NO_SLOT => (Some(r.slot), r.count),
                _ => return Vec::new(),
            },
        };
        let mut out = Vec::with_capacity(count as usize);
        let pages = self
            .index
            .iter()
            .enumerate()
            .filter(|&(_, &p)| p != NO_PAGE);
        for (hi, page) in pages.map(|(hi, &p)| (hi, &self.pages[usize::from(p)])) {
            for (&val, lo) in page.vals.iter().zip(set_bits(&page.bits)) {
                if slot.is_none_or(|s| owner_slot_of(val) == s) {
                    out.push(self.describe(((hi << 8) | lo) as u16, val));
                }
            }
        }
        out
    }

    /// Lifetime counters.
    pub fn counters(&self) -> DrainingCounters {
        self.counters
    }

    /// Heap bytes held: the page index, pages and their value vectors (capacities), the
    /// spilled-count map, the consumer records and the slot table.
    pub fn memory_usage(&self) -> usize {
        let values: usize = self.pages.iter().map(|p| p.vals.capacity() * 8).sum();
        self.index.capacity() * size_of::<u16>()
            + self.pages.capacity() * size_of::<Page>()
            + values
            + map_bytes(&self.spilled)
            + map_bytes(&self.consumers)
            + self.slot_owner.capacity() * size_of::<u32>()
            + self.free_slots.capacity() * size_of::<u16>()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, HashMap};

    use super::*;

    #[test]
    fn pulsar_draining_rule() {
        let mut d = DrainingHashes::new();
        d.add_entry(1, 100).unwrap();
        d.add_entry(1, 100).unwrap();
        assert_eq!(d.owner(100).unwrap(), Some(1));
        assert_eq!(d.len(), 1);
        // Another consumer may not add to it.
        assert!(matches!(
            d.add_entry(2, 100),
            Err(CoreError::InvalidArgument(_))
        ));
        assert!(d.should_block(2, 100).unwrap());
        assert!(d.should_block(3, 100).unwrap());
        assert!(!d.should_block(2, 101).unwrap());
        let e = d.entry(100).unwrap().unwrap();
        assert_eq!((e.owner, e.unacked, e.blocked_attempts), (1, 2, 2));
        assert!(!d.reduce_ref(1, 100, false).unwrap());
        assert!(d.reduce_ref(1, 100, false).unwrap()); // removed, had blocked: unblock
        assert!(d.is_empty());
        assert_eq!(d.owner(100).unwrap(), None);
        let s = d.consumer_stats(1);
        assert_eq!(s.draining_hashes_cleared_total, 1);
        assert_eq!(s.draining_hashes_count, 0);
        assert_eq!(d.counters().unblocked, 1);
        assert_eq!(d.pages.capacity(), 0); // pages are released with the last hash
    }

    #[test]
    fn closing_never_signals_and_unblocked_needs_a_block() {
        let mut d = DrainingHashes::new();
        d.add_entry(1, 7).unwrap();
        assert!(d.should_block(2, 7).unwrap());
        assert!(!d.reduce_ref(1, 7, true).unwrap());
        d.add_entry(1, 8).unwrap();
        assert!(!d.reduce_ref(1, 8, false).unwrap()); // never blocked: no signal
        assert_eq!(d.counters().unblocked, 0);
        assert_eq!(d.consumer_stats(1).draining_hashes_cleared_total, 2);
    }

    #[test]
    fn owner_reclaims_lazily() {
        let mut d = DrainingHashes::new();
        d.add_entry(4, 65535).unwrap();
        d.add_entry(4, 65535).unwrap();
        assert!(!d.should_block(4, 65535).unwrap());
        assert!(d.is_empty());
        let s = d.consumer_stats(4);
        assert_eq!(s.draining_hashes_unacked_messages, 0);
        assert_eq!(s.draining_hashes_cleared_total, 1);
        // Its later acks find nothing.
        assert!(!d.reduce_ref(4, 65535, false).unwrap());
        assert_eq!(d.counters().stale_reductions, 0);
    }

    #[test]
    fn stale_ack_keeps_the_replacement() {
        let mut d = DrainingHashes::new();
        d.add_entry(1, 9).unwrap();
        assert!(!d.should_block(1, 9).unwrap()); // reclaimed by 1
        d.add_entry(2, 9).unwrap(); // moved on: now draining on 2
        assert!(!d.reduce_ref(1, 9, false).unwrap()); // 1's old ack
        assert_eq!(d.owner(9).unwrap(), Some(2));
        assert_eq!(d.entry(9).unwrap().unwrap().unacked, 1);
        assert_eq!(d.counters().stale_reductions, 1);
    }

    #[test]
    fn bad_hashes_are_rejected_and_change_nothing() {
        let mut d = DrainingHashes::new();
        d.add_entry(1, 5).unwrap();
        for bad in [0, 65536, u32::MAX] {
            assert!(d.add_entry(1, bad).is_err());
            assert!(d.reduce_ref(1, bad, false).is_err());
            assert!(d.should_block(2, bad).is_err());
            assert!(d.owner(bad).is_err());
        }
        assert!(d.add_entries(1, &[5, 6, 0]).is_err());
        assert!(d.add_entries(2, &[6, 5]).is_err());
        assert!(d.reduce_refs(1, &[5, 65536], false).is_err());
        assert!(d.should_block_many(&[2, 2], &[5, 0]).is_err());
        assert!(d.should_block_many(&[2], &[5, 5]).is_err());
        assert_eq!(d.len(), 1);
        assert_eq!(d.entry(5).unwrap().unwrap().unacked, 1);
        assert_eq!(d.entry(5).unwrap().unwrap().blocked_attempts, 0);
        assert_eq!(d.owner(6).unwrap(), None);
    }

    #[test]
    fn reference_overflow_is_refused() {
        let mut d = DrainingHashes::new();
        d.add_entry(1, 3).unwrap();
        let (p, v) = d.find(3).unwrap();
        d.pages[p].vals[v] = pack(u32::MAX, owner_slot_of(d.pages[p].vals[v]));
        d.record(1).unacked = u64::from(u32::MAX);
        assert!(d.add_entry(1, 3).is_err());
        assert!(d.add_entries(1, &[4, 3]).is_err());
        assert_eq!(d.owner(4).unwrap(), None);
        d.add_entries(1, &[4, 4]).unwrap(); // 4 is not near the limit
        assert_eq!(d.entry(4).unwrap().unwrap().unacked, 2);
    }

    #[test]
    fn blocked_counts_spill_past_16_bits() {
        let mut d = DrainingHashes::new();
        d.add_entry(1, 300).unwrap();
        for _ in 0..70_000 {
            assert!(d.should_block(2, 300).unwrap());
        }
        assert_eq!(d.entry(300).unwrap().unwrap().blocked_attempts, 70_000);
        assert_eq!(d.spilled.len(), 1);
        let removed = d.remove_consumer(1, false);
        assert_eq!(removed.hashes, vec![300]);
        assert_eq!(removed.unblocked, vec![true]);
        assert!(d.spilled.is_empty());
        d.add_entry(1, 301).unwrap();
        for _ in 0..65_535 {
            d.should_block(2, 301).unwrap();
        }
        assert_eq!(d.entry(301).unwrap().unwrap().blocked_attempts, 65_535);
        assert!(d.reduce_ref(1, 301, false).unwrap());
        assert!(d.spilled.is_empty());
    }

    #[test]
    fn remove_consumer_drops_only_its_hashes() {
        let mut d = DrainingHashes::new();
        d.add_entries(1, &[1, 256, 257, 65535, 1]).unwrap();
        d.add_entries(2, &[2, 258, 512]).unwrap();
        d.should_block(3, 257).unwrap();
        let r = d.remove_consumer(1, false);
        assert_eq!(r.hashes, vec![1, 256, 257, 65535]);
        assert_eq!(r.unblocked, vec![false, false, true, false]);
        assert_eq!(d.len(), 3);
        assert_eq!(d.consumer_stats(1), ConsumerDrainingStats::default());
        let left: Vec<u32> = d.entries(None).iter().map(|e| e.hash).collect();
        assert_eq!(left, vec![2, 258, 512]);
        assert!(d.remove_consumer(1, false).hashes.is_empty());
        assert_eq!(d.remove_consumer(2, true).unblocked, vec![false; 3]);
        assert!(d.is_empty());
        assert_eq!(d.pages.capacity(), 0);
    }

    #[test]
    fn clear_keeps_counters() {
        let mut d = DrainingHashes::new();
        d.add_entries(1, &[10, 11]).unwrap();
        d.should_block(2, 10).unwrap();
        d.clear();
        assert!(d.is_empty());
        assert_eq!(d.memory_usage(), 0);
        assert!(d.consumers_stats().is_empty());
        assert_eq!(d.counters().blocked_attempts, 1);
    }

    #[test]
    fn memory_per_hash_is_small() {
        let mut d = DrainingHashes::new();
        let all: Vec<u32> = (1..=65535).collect();
        // Ten consumers, interleaved hashes.
        for c in 0..10u32 {
            let mine: Vec<u32> = all.iter().copied().filter(|h| h % 10 == c).collect();
            d.add_entries(c, &mine).unwrap();
        }
        assert_eq!(d.len(), 65535);
        let per_hash = d.memory_usage() as f64 / 65535.0;
        assert!(per_hash <= 10.0, "{per_hash} B per hash");
        let mut d = DrainingHashes::new();
        let mut x = 1u32;
        while d.len() < 10_000 {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
            let h = (x >> 8) % 65535 + 1;
            if d.owner(h).unwrap().is_none() {
                d.add_entry(x % 100, h).unwrap();
            }
        }
        let per_hash = d.memory_usage() as f64 / 10_000.0;
        assert!(per_hash <= 12.0, "{per_hash} B per hash");
    }

    // ------------------------------------------------------------------- randomised model check

    /// SplitMix64, so a failure replays from its seed.
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

    /// The obvious implementation: hash → (owner, refs, blocked); consumer → (cleared, present).
    #[derive(Default)]
    struct Model {
        entries: BTreeMap<u32, (u32, u32, u64)>,
        cleared: HashMap<u32, u64>,
        counters: DrainingCounters,
    }

    impl Model {
        fn add(&mut self, c: u32, h: u32) -> bool {
            if h == 0 || h > 65535 {
                return false;
            }
            let e = self.entries.entry(h).or_insert((c, 0, 0));
            if e.0 != c {
                return false;
            }
            e.1 += 1;
            self.cleared.entry(c).or_insert(0);
            true
        }

        fn clear_entry(&mut self, c: u32, h: u32) {
            self.entries.remove(&h);
            *self.cleared.entry(c).or_insert(0) += 1;
            self.counters.cleared += 1;
        }

        fn reduce(&mut self, c: u32, h: u32, closing: bool) -> bool {
            let Some(e) = self.entries.get_mut(&h) else {
                return false;
            };
            if e.0 != c {
                self.counters.stale_reductions += 1;
                return false;
            }
            e.1 -= 1;
            if e.1 > 0 {
                return false;
            }
            let blocked = e.2;
            self.clear_entry(c, h);
            let unblocked = blocked > 0 && !closing;
            self.counters.unblocked += u64::from(unblocked);
            unblocked
        }

        fn block(&mut self, t: u32, h: u32) -> bool {
            let Some(e) = self.entries.get_mut(&h) else {
                return false;
            };
            if e.0 == t {
                self.clear_entry(t, h);
                return false;
            }
            e.2 += 1;
            self.counters.blocked_attempts += 1;
            true
        }

        fn remove_consumer(&mut self, c: u32, closing: bool) -> RemovedHashes {
            let mut out = RemovedHashes::default();
            if self.cleared.remove(&c).is_none() {
                return out;
            }
            for (&h, &(o, _, b)) in &self.entries {
                if o == c {
                    out.hashes.push(h);
                    out.unblocked.push(b > 0 && !closing);
                }
            }
            for h in &out.hashes {
                self.entries.remove(h);
            }
            self.counters.unblocked += out.unblocked.iter().filter(|&&u| u).count() as u64;
            out
        }

        fn stats(&self, c: u32) -> ConsumerDrainingStats {
            let Some(&cleared) = self.cleared.get(&c) else {
                return ConsumerDrainingStats::default();
            };
            let mine = self.entries.values().filter(|e| e.0 == c);
            ConsumerDrainingStats {
                draining_hashes_count: mine.clone().count() as u32,
                draining_hashes_cleared_total: cleared,
                draining_hashes_unacked_messages: mine.map(|e| u64::from(e.1)).sum(),
            }
        }
    }

    /// The layout's own invariants: index ↔ pages, rank prefixes, value counts, slots.
    fn check_layout(d: &DrainingHashes) {
        let mut total = 0;
        for (p, page) in d.pages.iter().enumerate() {
            assert_eq!(usize::from(d.index[usize::from(page.hi)]), p);
            let mut copy = page.clone();
            copy.recount();
            assert_eq!(copy.before, page.before);
            let present: u32 = page.bits.iter().map(|w| w.count_ones()).sum();
            assert_eq!(present as usize, page.vals.len());
            assert!(!page.vals.is_empty());
            total += page.vals.len();
        }
        let indexed = d.index.iter().filter(|&&p| p != NO_PAGE).count();
        assert_eq!(indexed, d.pages.len());
        assert_eq!(total, d.len());
        let live_slots = d.consumers.values().filter(|r| r.slot != NO_SLOT).count();
        assert_eq!(live_slots + d.free_slots.len(), d.slot_owner.len());
    }

    fn check(d: &DrainingHashes, m: &Model, consumers: u32) {
        check_layout(d);
        assert_eq!(d.len(), m.entries.len());
        let got: Vec<(u32, u32, u32, u64)> = d
            .entries(None)
            .iter()
            .map(|e| (e.hash, e.owner, e.unacked, e.blocked_attempts))
            .collect();
        let want: Vec<(u32, u32, u32, u64)> = m
            .entries
            .iter()
            .map(|(&h, &(o, r, b))| (h, o, r, b))
            .collect();
        assert_eq!(got, want);
        for c in 0..consumers {
            assert_eq!(d.consumer_stats(c), m.stats(c), "consumer {c}");
            let mine: Vec<u32> = d.entries(Some(c)).iter().map(|e| e.hash).collect();
            let want: Vec<u32> = m
                .entries
                .iter()
                .filter(|e| e.1 .0 == c)
                .map(|e| *e.0)
                .collect();
            assert_eq!(mine, want);
        }
        assert_eq!(d.counters(), m.counters);
        assert_eq!(d.consumers_stats().len(), m.cleared.len());
    }

    #[test]
    fn randomised_against_model() {
        // What the runs went through, so the test cannot pass by never reaching a case.
        let (mut seen, mut peak) = (DrainingCounters::default(), 0);
        for seed in 0..60u64 {
            let mut rng = Rng(seed);
            // Few hashes (collisions, reuse) or many (many pages); a spread of consumers.
            let span = [8u64, 300, 65_536][seed as usize % 3];
            let consumers = 1 + rng.below(6) as u32;
            let mut d = DrainingHashes::new();
            let mut m = Model::default();
            let hash = |r: &mut Rng| -> u32 {
                match r.below(20) {
                    0 => 0,
                    1 => 65_536 + r.below(10) as u32,
                    2 => 65_535,
                    _ => 1 + r.below(span.min(65_535)) as u32,
                }
            };
            for step in 0..3000 {
                let c = rng.below(u64::from(consumers)) as u32;
                // Alternate phases: growing (many bulk adds) and mixed.
                let growing = (step / 500) % 2 == 0;
                let op = if growing && rng.below(3) == 0 {
                    30
                } else {
                    rng.below(100)
                };
                match op {
                    0..=29 => {
                        let h = hash(&mut rng);
                        let ok = d.add_entry(c, h).is_ok();
                        assert_eq!(ok, m.add(c, h), "seed {seed} step {step}");
                    }
                    30..=34 => {
                        let n = rng.below(if growing { 400 } else { 12 });
                        let hs: Vec<u32> = (0..n)
                            .map(|_| match rng.below(100) {
                                0 => 0,
                                _ => 1 + rng.below(span.min(65_535)) as u32,
                            })
                            .collect();
                        let valid = hs.iter().all(|&h| {
                            (1..=65535).contains(&h) && m.entries.get(&h).is_none_or(|e| e.0 == c)
                        });
                        assert_eq!(d.add_entries(c, &hs).is_ok(), valid);
                        if valid {
                            for &h in &hs {
                                assert!(m.add(c, h));
                            }
                        }
                    }
                    35..=59 => {
                        let h = hash(&mut rng);
                        let closing = rng.below(4) == 0;
                        match d.reduce_ref(c, h, closing) {
                            Ok(u) => assert_eq!(u, m.reduce(c, h, closing)),
                            Err(_) => assert!(h == 0 || h > 65535),
                        }
                    }
                    60..=64 => {
                        let hs: Vec<u32> = (0..rng.below(12)).map(|_| hash(&mut rng)).collect();
                        let closing = rng.below(2) == 0;
                        match d.reduce_refs(c, &hs, closing) {
                            Ok(got) => {
                                let want: Vec<u32> = hs
                                    .iter()
                                    .copied()
                                    .filter(|&h| m.reduce(c, h, closing))
                                    .collect();
                                assert_eq!(got, want);
                            }
                            Err(_) => assert!(hs.iter().any(|&h| h == 0 || h > 65535)),
                        }
                    }
                    65..=84 => {
                        let h = hash(&mut rng);
                        match d.should_block(c, h) {
                            Ok(b) => assert_eq!(b, m.block(c, h)),
                            Err(_) => assert!(h == 0 || h > 65535),
                        }
                    }
                    85..=92 => {
                        let n = rng.below(20) as usize;
                        let ts: Vec<u32> = (0..n)
                            .map(|_| rng.below(u64::from(consumers)) as u32)
                            .collect();
                        let hs: Vec<u32> = (0..n).map(|_| hash(&mut rng)).collect();
                        match d.should_block_many(&ts, &hs) {
                            Ok(got) => {
                                let want: Vec<bool> =
                                    ts.iter().zip(&hs).map(|(&t, &h)| m.block(t, h)).collect();
                                assert_eq!(got, want);
                            }
                            Err(_) => assert!(hs.iter().any(|&h| h == 0 || h > 65535)),
                        }
                    }
                    93..=97 => {
                        let closing = rng.below(2) == 0;
                        assert_eq!(d.remove_consumer(c, closing), m.remove_consumer(c, closing));
                    }
                    _ => {
                        if rng.below(10) == 0 {
                            d.clear();
                            m.entries.clear();
                            m.cleared.clear();
                        }
                    }
                }
                if step % 50 == 0 {
                    check(&d, &m, consumers);
                }
                peak = peak.max(d.len());
            }
            check(&d, &m, consumers);
            let c = d.counters();
            seen.blocked_attempts += c.blocked_attempts;
            seen.unblocked += c.unblocked;
            seen.cleared += c.cleared;
            seen.stale_reductions += c.stale_reductions;
        }
        assert!(
            seen.blocked_attempts > 1000 && seen.unblocked > 100,
            "{seen:?}"
        );
        assert!(
            seen.cleared > 1000 && seen.stale_reductions > 100,
            "{seen:?}"
        );
        assert!(peak > 500, "peak {peak}");
    }
}
