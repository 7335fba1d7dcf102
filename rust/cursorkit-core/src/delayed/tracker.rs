//! `InMemoryTracker`: the rules of Pulsar's `InMemoryDelayedDeliveryTracker` over a [`DelayQueue`].
//!
//! The core has no clock: every rule that depends on time takes `now` (ms) from the caller.
//!
//! * `cutoff(now)` is `now` in strict mode and `now + tick` otherwise. An add whose `deliver_at` is
//!   negative or at most the cutoff is refused (the dispatcher delivers it at once) and clears the
//!   fixed-delay flag.
//! * Stored times are rounded to a precision of `2^bits` ms, `bits = floor(log2(tick))`, fixed at
//!   construction: down in the default mode, **up** (saturating) in strict mode, so a message is
//!   never released early. The default mode releases a head only when its whole rounding cell is
//!   due: `stored <= cutoff(now) - 2^bits + 1`.
//! * Fixed-delay detection: an add earlier than `highest - tick` clears the flag; with it set, at
//!   least `lookahead` indexes queued and nothing due, the dispatcher pauses all deliveries.
//! * A position is held once; a repeated add returns true (it is still delayed) and is counted.

use crate::ackstate::position::{check_entry, MAX_ENTRY_ID};
use crate::bits::{pack_bits, set_bits};
use crate::delayed::delay_queue::{DelayQueue, Popped};
use crate::error::{CoreError, Result};

/// `floor(log2(tick))` for `tick >= 1` (1 → 0, 8 → 3, 100 → 6, 500 → 8, 1000 → 9), else 0: the
/// rounding precision of stored delivery times is `2^bits` ms.
pub fn precision_bits(tick_ms: i64) -> u32 {
    if tick_ms >= 1 {
        63 - tick_ms.leading_zeros()
    } else {
        0
    }
}

/// What the tracker has done since it was created.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TrackerCounters {
    /// Positions newly stored.
    pub added: u64,
    /// Adds of a position already held (returned true, stored once).
    pub duplicates: u64,
    /// Adds refused because `deliver_at <= cutoff(now)` (delivered at once).
    pub rejected_due: u64,
    /// Adds refused because `deliver_at < 0`.
    pub rejected_negative: u64,
    /// Positions handed out by `get_scheduled`.
    pub delivered: u64,
}

/// Pulsar's in-memory delayed-delivery tracker, with an explicit `now` on every timed call.
///
/// ```
/// use cursorkit_core::InMemoryTracker;
/// let mut t = InMemoryTracker::new(1000, false, 50_000).unwrap();
/// assert!(!t.add(1, 0, 1_500, 1_000).unwrap()); // due within one tick: deliver now
/// assert!(t.add(1, 1, 10_000, 1_000).unwrap()); // stored as 9_728 (512 ms precision)
/// assert!(!t.has_message_available(8_000));
/// assert!(t.has_message_available(9_239)); // 9_728 + 511 <= 9_239 + 1_000
/// assert_eq!(t.get_scheduled(10, 9_239), vec![(1, 1)]);
/// ```
#[derive(Debug, Clone)]
pub struct InMemoryTracker {
    queue: DelayQueue,
    tick_ms: i64,
    precision_bits: u32,
    strict: bool,
    lookahead: i64,
    highest: i64,
    fixed_delay: bool,
    counters: TrackerCounters,
    scratch: Popped,
}

impl InMemoryTracker {
    /// A tracker with Pulsar's `delayedDeliveryTickTimeMillis` (`tick_ms`, default 1000),
    /// `isDelayedDeliveryDeliverAtTimeStrict` (`strict`) and
    /// `delayedDeliveryFixedDelayDetectionLookahead` (`lookahead`, default 50000; 0 disables).
    /// A negative tick or lookahead is an `InvalidArgument`.
    pub fn new(tick_ms: i64, strict: bool, lookahead: i64) -> Result<Self> {
        check_non_negative(tick_ms, "tick_time_ms")?;
        check_non_negative(lookahead, "fixed_delay_lookahead")?;
        Ok(Self {
            queue: DelayQueue::new(),
            tick_ms,
            precision_bits: precision_bits(tick_ms),
            strict,
            lookahead,
            highest: 0,
            fixed_delay: true,
            counters: TrackerCounters::default(),
            scratch: Popped::new(),
        })
    }

    /// The tick (ms).
    pub fn tick_ms(&self) -> i64 {
        self.tick_ms
    }

    /// Whether delivery times are strict (never early, cutoff = now).
    pub fn strict(&self) -> bool {
        self.strict
    }

    /// The fixed-delay detection lookahead (0: disabled).
    pub fn lookahead(&self) -> i64 {
        self.lookahead
    }

    /// Bits of rounding applied to stored delivery times (fixed at construction).
    pub fn precision_bits(&self) -> u32 {
        self.precision_bits
    }

    /// The rounding precision of stored delivery times, `2^bits` ms.
    pub fn precision_ms(&self) -> i64 {
        1 << self.precision_bits
    }

    /// The highest `deliver_at` accepted since the tracker was last empty (0 when empty).
    pub fn highest_delivery_time(&self) -> i64 {
        self.highest
    }

    /// Whether every accepted message so far looked like it had the same fixed delay.
    pub fn fixed_delay(&self) -> bool {
        self.fixed_delay
    }

    /// The counters.
    pub fn counters(&self) -> TrackerCounters {
        self.counters
    }

    /// Changes the tick (a topic policy update); the rounding precision stays as constructed.
    pub fn reset_tick_time(&mut self, tick_ms: i64) -> Result<()> {
        check_non_negative(tick_ms, "tick_time_ms")?;
        self.tick_ms = tick_ms;
        Ok(())
    }

    /// Adds at or before this time are refused: `now` (strict) or `now + tick`.
    pub fn cutoff(&self, now: i64) -> i64 {
        if self.strict {
            now
        } else {
            now.saturating_add(self.tick_ms)
        }
    }

    /// Stored times at or before this are due: `now` (strict) or `cutoff(now) - 2^bits + 1`.
    pub fn threshold(&self, now: i64) -> i64 {
        if self.strict {
            now
        } else {
            self.cutoff(now)
                .saturating_sub(self.precision_ms())
                .saturating_add(1)
        }
    }

    /// The stored form of an accepted `deliver_at` (`>= 0`): rounded down, or up when strict.
    pub fn stored_time(&self, at: i64) -> i64 {
        let mask = self.precision_ms() - 1;
        if self.strict {
            at.checked_add(mask).map_or(i64::MAX, |v| v & !mask)
        } else {
            at & !mask
        }
    }

    /// Tracks one message; false means "deliver it now" (`deliver_at` negative or due).
    ///
    /// An invalid position is an error and changes nothing. A position already held returns true
    /// without being stored twice.
    pub fn add(&mut self, ledger: i64, entry: i64, at: i64, now: i64) -> Result<bool> {
        let entry = check_entry(ledger, entry)?;
        if self.refuse(at, now) {
            return Ok(false);
        }
        self.queue.check_room(1, std::iter::once(ledger))?;
        self.accept(ledger, entry, at);
        Ok(true)
    }

    /// Tracks many messages (equal-length columns) in order; returns how many were newly stored.
    pub fn add_many(
        &mut self,
        ledgers: &[i64],
        entries: &[i64],
        ats: &[i64],
        now: i64,
    ) -> Result<u64> {
        let before = self.counters.added;
        self.add_many_with(ledgers, entries, ats, now, |_| {})?;
        Ok(self.counters.added - before)
    }

    /// Like [`InMemoryTracker::add_many`], returning per message whether the tracker holds it
    /// (newly stored or already held: true) or it must be delivered now (false).
    pub fn add_many_mask(
        &mut self,
        ledgers: &[i64],
        entries: &[i64],
        ats: &[i64],
        now: i64,
    ) -> Result<Vec<bool>> {
        let mut mask = vec![false; ledgers.len()];
        self.add_many_with(ledgers, entries, ats, now, |i| mask[i] = true)?;
        Ok(mask)
    }

    /// [`add_many_mask`](Self::add_many_mask) as bit words (bit `b` of word `k` is message
    /// `64k + b`, set when the tracker holds it) and how many are set: what a dispatcher splits a
    /// read by, with no flag per message built.
    pub fn add_many_words(
        &mut self,
        ledgers: &[i64],
        entries: &[i64],
        ats: &[i64],
        now: i64,
    ) -> Result<(Vec<u64>, usize)> {
        self.add_many_with(ledgers, entries, ats, now, |_| {})
    }

    /// The batch form of [`add`](Self::add): the refused messages are counted in bulk and the
    /// kept ones gathered first, so a read where only some messages are delayed (a random share
    /// of them, typically) pays no mispredicted branch per message. `held(i)` is told each kept
    /// index, in order. The outcome is the one-by-one outcome: refusals only ever clear the
    /// fixed-delay flag and add to counters, and the kept messages go in in their order.
    fn add_many_with(
        &mut self,
        ledgers: &[i64],
        entries: &[i64],
        ats: &[i64],
        now: i64,
        mut held: impl FnMut(usize),
    ) -> Result<(Vec<u64>, usize)> {
        check_columns(ledgers, entries, ats)?;
        let cutoff = self.cutoff(now);
        // Which messages are kept, 64 to a word, computed without a branch per message.
        let (words, n_kept) = pack_bits(ats, |&at| at >= 0 && at > cutoff);
        self.queue
            .check_room(n_kept, set_bits(&words).map(|i| ledgers[i]))?;
        let refused = (ats.len() - n_kept) as u64;
        if refused > 0 {
            let negative = ats.iter().filter(|&&at| at < 0).count() as u64;
            self.counters.rejected_negative += negative;
            self.counters.rejected_due += refused - negative;
            self.fixed_delay = false;
        }
        for i in set_bits(&words) {
            self.accept(ledgers[i], entries[i] as u32, ats[i]);
            held(i);
        }
        Ok((words, n_kept))
    }

    /// Applies the refusal rule (counting it); true when the message is to be delivered now.
    #[inline]
    fn refuse(&mut self, at: i64, now: i64) -> bool {
        if at < 0 {
            self.counters.rejected_negative += 1;
        } else if at <= self.cutoff(now) {
            self.counters.rejected_due += 1;
        } else {
            return false;
        }
        self.fixed_delay = false;
        true
    }

    /// Stores an accepted message and runs the fixed-delay check on its original time.
    #[inline]
    fn accept(&mut self, ledger: i64, entry: u32, at: i64) {
        if self.queue.insert(self.stored_time(at), ledger, entry) {
            self.counters.added += 1;
        } else {
            self.counters.duplicates += 1;
        }
        if at < self.highest - self.tick_ms {
            self.fixed_delay = false;
        }
        self.highest = self.highest.max(at);
    }

    /// Whether the head is due at `now` (its stored time is at most `threshold(now)`).
    pub fn has_message_available(&mut self, now: i64) -> bool {
        let threshold = self.threshold(now);
        self.queue.peek().is_some_and(|(t, _, _)| t <= threshold)
    }

    /// Pops up to `max` due messages in time order and returns them sorted by (ledger, entry).
    /// When the tracker is left empty, the fixed-delay state starts over.
    pub fn get_scheduled(&mut self, max: usize, now: i64) -> Vec<(i64, i64)> {
        let threshold = self.threshold(now);
        let mut popped = std::mem::take(&mut self.scratch);
        popped.clear();
        let n = self.queue.pop_due(threshold, max, &mut popped);
        self.counters.delivered += n as u64;
        let mut out: Vec<(i64, i64)> = popped
            .ledgers
            .iter()
            .copied()
            .zip(popped.entries.iter().copied())
            .collect();
        out.sort_unstable();
        if popped.at.capacity() > 4096 {
            popped = Popped::new();
        }
        self.scratch = popped;
        if self.queue.is_empty() {
            self.highest = 0;
            self.fixed_delay = true;
        }
        out
    }

    /// The stored delivery time of the head, if any.
    pub fn next_delivery_time(&mut self) -> Option<i64> {
        self.queue.peek().map(|(t, _, _)| t)
    }

    /// Pulsar's pause rule: `lookahead > 0`, every message had the same fixed delay, at least
    /// `lookahead` are held and none is due.
    pub fn should_pause_all_deliveries(&mut self, now: i64) -> bool {
        self.lookahead > 0
            && self.fixed_delay
            && self.queue.len() >= self.lookahead as u64
            && !self.has_message_available(now)
    }

    /// Number of distinct positions held.
    pub fn len(&self) -> u64 {
        self.queue.len()
    }

    /// True when nothing is held.
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// Exact heap bytes of the index (Pulsar's `getBufferMemoryUsage`).
    pub fn buffer_memory_usage(&self) -> usize {
        self.queue.memory_usage() + self.scratch.at.capacity() * 24
    }

    /// Whether the position is held.
    pub fn contains(&self, ledger: i64, entry: i64) -> bool {
        self.queue.contains(ledger, entry)
    }

    /// Forgets every message (and releases the memory); the fixed-delay state starts over.
    pub fn clear(&mut self) {
        self.queue.clear();
        self.scratch = Popped::new();
        self.highest = 0;
        self.fixed_delay = true;
    }
}

fn check_non_negative(v: i64, what: &str) -> Result<()> {
    if v < 0 {
        return Err(CoreError::InvalidArgument(format!(
            "{what} must be >= 0, got {v}"
        )));
    }
    Ok(())
}

/// Equal lengths and valid positions (delivery times may be anything: negative ones are refused).
fn check_columns(ledgers: &[i64], entries: &[i64], ats: &[i64]) -> Result<()> {
    if ledgers.len() != entries.len() || entries.len() != ats.len() {
        return Err(CoreError::InvalidArgument(format!(
            "ledger_ids, entry_ids and deliver_at differ in length: {}, {} and {} values",
            ledgers.len(),
            entries.len(),
            ats.len()
        )));
    }
    let bad = ledgers.iter().zip(entries).fold(false, |acc, (&l, &e)| {
        acc | (l < 0) | !(0..=MAX_ENTRY_ID).contains(&e)
    });
    if bad {
        for (i, (&l, &e)) in ledgers.iter().zip(entries).enumerate() {
            check_entry(l, e).map_err(|err| match err {
                CoreError::InvalidPosition(m) => {
                    CoreError::InvalidPosition(format!("{m} (at index {i})"))
                }
                other => other,
            })?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tracker(tick: i64, strict: bool, lookahead: i64) -> InMemoryTracker {
        InMemoryTracker::new(tick, strict, lookahead).unwrap()
    }

    #[test]
    fn precision_table() {
        for (tick, bits) in [
            (-5, 0),
            (0, 0),
            (1, 0),
            (2, 1),
            (3, 1),
            (8, 3),
            (100, 6),
            (500, 8),
            (511, 8),
            (512, 9),
            (1000, 9),
            (i64::MAX, 62),
        ] {
            assert_eq!(precision_bits(tick), bits, "tick {tick}");
        }
    }

    #[test]
    fn rounding_down_and_strict_up() {
        let t = tracker(1000, false, 0);
        assert_eq!(t.stored_time(60_400), 59_904);
        assert_eq!(t.stored_time(61_440), 61_440);
        let s = tracker(1000, true, 0);
        assert_eq!(s.stored_time(60_400), 60_416);
        assert_eq!(s.stored_time(61_000), 61_440);
        assert_eq!(s.stored_time(61_440), 61_440);
        assert_eq!(s.stored_time(i64::MAX - 511), i64::MAX - 511);
        assert_eq!(s.stored_time(i64::MAX - 510), i64::MAX);
        assert_eq!(s.stored_time(i64::MAX), i64::MAX);
        let one = tracker(1, true, 0);
        assert_eq!(one.stored_time(12_345), 12_345);
    }

    #[test]
    fn precision_is_fixed_on_reset_tick_time() {
        let mut t = tracker(1000, false, 0);
        t.reset_tick_time(8).unwrap();
        assert_eq!((t.tick_ms(), t.precision_bits()), (8, 9));
        assert!(t.reset_tick_time(-1).is_err());
        assert_eq!(t.tick_ms(), 8);
        assert!(InMemoryTracker::new(-1, false, 0).is_err());
        assert!(InMemoryTracker::new(1, false, -1).is_err());
    }

    #[test]
    fn refuses_negative_and_due_and_counts() {
        let mut t = tracker(1000, false, 0);
        assert!(!t.add(1, 1, -1, 0).unwrap());
        assert!(!t.add(1, 2, 1_000, 0).unwrap()); // exactly at the cutoff
        assert!(t.add(1, 3, 1_001, 0).unwrap());
        assert!(t.add(1, 3, 5_000, 0).unwrap()); // duplicate: true, stored once
        let c = t.counters();
        assert_eq!(
            (c.rejected_negative, c.rejected_due, c.added, c.duplicates),
            (1, 1, 1, 1)
        );
        assert_eq!(t.len(), 1);
        assert!(!t.fixed_delay());
        let mut s = tracker(1000, true, 0);
        assert!(!s.add(1, 1, 50, 50).unwrap());
        assert!(s.add(1, 1, 51, 50).unwrap());
        assert!(t.add(-1, 0, 5_000, 0).is_err());
        assert!(t.add(1, MAX_ENTRY_ID + 1, 5_000, 0).is_err());
        assert_eq!(t.counters(), c);
    }

    #[test]
    fn default_threshold_waits_for_the_whole_cell() {
        let mut t = tracker(1000, false, 0);
        assert!(t.add(7, 0, 10_000, 0).unwrap()); // stored 9_728, cell 9_728..=10_239
        assert_eq!(t.next_delivery_time(), Some(9_728));
        assert_eq!(t.threshold(9_238), 9_727);
        assert!(!t.has_message_available(9_238));
        assert!(t.get_scheduled(10, 9_238).is_empty());
        assert!(t.has_message_available(9_239));
        assert_eq!(t.get_scheduled(10, 9_239), vec![(7, 0)]);
        assert_eq!(t.counters().delivered, 1);
    }

    #[test]
    fn strict_threshold_is_now_and_never_early() {
        let mut t = tracker(1000, true, 0);
        assert!(t.add(7, 0, 10_000, 0).unwrap()); // stored 10_240
        assert!(!t.has_message_available(10_000));
        assert!(!t.has_message_available(10_239));
        assert!(t.has_message_available(10_240));
        assert!(t.add(7, 1, i64::MAX, 0).unwrap());
        assert_eq!(t.get_scheduled(10, 10_240), vec![(7, 0)]);
        assert_eq!(t.next_delivery_time(), Some(i64::MAX));
        assert!(!t.has_message_available(i64::MAX - 1));
        assert_eq!(t.get_scheduled(10, i64::MAX), vec![(7, 1)]);
    }

    #[test]
    fn saturates_near_the_end_of_time() {
        let mut t = tracker(1000, false, 0);
        assert!(!t.add(1, 1, i64::MAX, i64::MAX - 5).unwrap()); // cutoff saturates at MAX
        assert!(t.add(1, 2, i64::MAX, i64::MAX - 1001).unwrap());
        assert!(t.has_message_available(i64::MAX - 5));
        assert_eq!(t.threshold(i64::MIN), i64::MIN + 1000 - 512 + 1);
    }

    #[test]
    fn scheduled_sorted_by_position_and_limited() {
        let mut t = tracker(1, false, 0);
        for (l, e, at) in [(5, 1, 100), (2, 9, 101), (2, 3, 102), (9, 0, 500)] {
            assert!(t.add(l, e, at, 0).unwrap());
        }
        assert_eq!(t.get_scheduled(2, 200), vec![(2, 9), (5, 1)]);
        assert_eq!(t.get_scheduled(0, 200), vec![]);
        assert_eq!(t.get_scheduled(100, 200), vec![(2, 3)]);
        assert_eq!(t.len(), 1);
    }

    #[test]
    fn fixed_delay_detection_and_pause() {
        let mut t = tracker(1000, false, 3);
        for (e, at) in [(0, 10_000), (1, 10_500), (2, 9_500)] {
            assert!(t.add(1, e, at, 0).unwrap());
        }
        // 9_500 is not below 10_500 - 1_000: still a fixed delay.
        assert!(t.fixed_delay());
        assert_eq!(t.highest_delivery_time(), 10_500);
        assert!(t.should_pause_all_deliveries(0));
        assert!(!t.should_pause_all_deliveries(9_000)); // something is due
        assert!(t.add(1, 3, 9_499, 0).unwrap()); // below 10_500 - 1_000
        assert!(!t.fixed_delay());
        assert!(!t.should_pause_all_deliveries(0));
        // Emptying the tracker starts over.
        assert_eq!(t.get_scheduled(100, 20_000).len(), 4);
        assert!(t.fixed_delay());
        assert_eq!(t.highest_delivery_time(), 0);
        // A refused add also clears the flag.
        assert!(!t.add(1, 9, 5, 0).unwrap());
        assert!(!t.fixed_delay());
        // Lookahead 0 never pauses; fewer than lookahead messages never pause.
        let mut off = tracker(1000, false, 0);
        assert!(off.add(1, 0, 10_000, 0).unwrap());
        assert!(!off.should_pause_all_deliveries(0));
        let mut few = tracker(1000, false, 2);
        assert!(few.add(1, 0, 10_000, 0).unwrap());
        assert!(!few.should_pause_all_deliveries(0));
        assert!(few.add(1, 1, 10_000, 0).unwrap());
        assert!(few.should_pause_all_deliveries(0));
    }

    #[test]
    fn duplicates_still_run_the_fixed_delay_check() {
        let mut t = tracker(10, false, 1);
        assert!(t.add(1, 0, 1_000, 0).unwrap());
        assert!(t.add(1, 1, 2_000, 0).unwrap());
        assert!(t.fixed_delay());
        assert!(t.add(1, 0, 1_500, 0).unwrap()); // duplicate, but 1_500 < 2_000 - 10
        assert!(!t.fixed_delay());
        assert_eq!(t.len(), 2);
    }

    #[test]
    fn bulk_mask_matches_single_adds() {
        let ledgers = [1, 1, 2, 2, 3, 1];
        let entries = [0, 1, 0, 0, 7, 0];
        let ats = [5_000, -3, 1_000, 9_000, 2_000, 6_000];
        let mut bulk = tracker(1000, false, 10);
        let mask = bulk.add_many_mask(&ledgers, &entries, &ats, 0).unwrap();
        assert_eq!(mask, vec![true, false, false, true, true, true]);
        let mut single = tracker(1000, false, 10);
        let one: Vec<bool> = (0..6)
            .map(|i| single.add(ledgers[i], entries[i], ats[i], 0).unwrap())
            .collect();
        assert_eq!(one, mask);
        assert_eq!(bulk.counters(), single.counters());
        assert_eq!(bulk.fixed_delay(), single.fixed_delay());
        assert_eq!(bulk.len(), 3);
        assert_eq!(bulk.add_many(&[4], &[0], &[7_000], 0).unwrap(), 1);
        assert!(bulk
            .add_many(&[4, -1], &[1, 0], &[7_000, 7_000], 0)
            .is_err());
        assert!(bulk.add_many(&[4], &[1, 2], &[7_000], 0).is_err());
        assert_eq!(bulk.len(), 4);
    }

    /// Random batches (duplicates, negative, due and future times, several ledgers) through
    /// `add_many_mask` and through one `add` each: the same masks, counters, fixed-delay state,
    /// and the same messages coming out in the same order.
    #[test]
    fn random_bulk_adds_match_single_adds() {
        let mut rng = crate::testing::Rng(0x9E37_79B9_7F4A_7C15);
        let mut next = move |n: u64| rng.below(n);
        for round in 0..200 {
            let (tick, strict) = (1 + next(50) as i64, round % 3 == 0);
            let mut bulk = tracker(tick, strict, 0);
            let mut single = tracker(tick, strict, 0);
            let mut now = 0;
            // Every other round reads like a broker: blocks of one ledger, entries ascending from
            // where that ledger's last read ended (sometimes from behind: a read again).
            let read_like = round % 2 == 1;
            let mut front = [0i64; 4];
            for _ in 0..1 + next(6) {
                let n = next(if read_like { 300 } else { 40 }) as usize;
                let (ledgers, entries): (Vec<i64>, Vec<i64>) = if read_like {
                    let mut l = 1 + next(3) as i64;
                    (0..n)
                        .map(|_| {
                            if next(50) == 0 {
                                l = 1 + next(3) as i64;
                                if next(3) == 0 {
                                    front[l as usize] -= next(20) as i64;
                                }
                            }
                            let f = &mut front[l as usize];
                            *f = (*f + 1 + next(2) as i64 - i64::from(next(40) == 0)).max(0);
                            (l, *f)
                        })
                        .unzip()
                } else {
                    (0..n)
                        .map(|_| (1 + next(3) as i64, next(60) as i64))
                        .unzip()
                };
                let ats: Vec<i64> = (0..n)
                    .map(|_| match next(10) {
                        0 => -1 - next(5) as i64,
                        1 | 2 => now + next(2 * tick as u64 + 1) as i64 - tick,
                        _ => now + next(5_000) as i64,
                    })
                    .collect();
                let mask = bulk.add_many_mask(&ledgers, &entries, &ats, now).unwrap();
                let one: Vec<bool> = (0..n)
                    .map(|i| single.add(ledgers[i], entries[i], ats[i], now).unwrap())
                    .collect();
                assert_eq!(mask, one, "round {round}");
                assert_eq!(bulk.counters(), single.counters(), "round {round}");
                assert_eq!(bulk.fixed_delay(), single.fixed_delay(), "round {round}");
                now += next(3_000) as i64;
                assert_eq!(bulk.get_scheduled(16, now), single.get_scheduled(16, now));
            }
            assert_eq!(bulk.len(), single.len());
            let far = i64::MAX / 2;
            assert_eq!(
                bulk.get_scheduled(usize::MAX, far),
                single.get_scheduled(usize::MAX, far)
            );
        }
    }

    #[test]
    fn clear_releases_and_resets() {
        let mut t = tracker(1000, false, 0);
        for e in 0..1000 {
            t.add(1, e, 10_000 + e, 0).unwrap();
        }
        let used = t.buffer_memory_usage();
        assert!(used > 1000 * 4); // three rounded times, one ledger: grouped, ~4 B an index
        t.clear();
        assert!(t.is_empty());
        assert!(t.buffer_memory_usage() < used / 10);
        assert_eq!(t.highest_delivery_time(), 0);
        assert!(t.fixed_delay());
        assert!(!t.contains(1, 0));
    }
}
