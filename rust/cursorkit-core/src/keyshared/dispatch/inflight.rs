//! What every consumer has in flight (sent, not acknowledged), indexed by position.
//!
//! Messages are sent, and mostly acknowledged, in position order, so each ledger keeps a window
//! of cells from its oldest in-flight entry to its newest: one `u32` per entry holding the seat of
//! the consumer it went to and its slot. A send, an ack, a nack or "who holds this?" is one array
//! access; a consumer's unacknowledged list (a leave, a redeliver) is a scan of the window, paid
//! per leave, not per event. The window's front moves on as it empties.
//!
//! Memory is bounded by what is in flight, not by how far apart ids are: a window spans at most
//! [`DENSITY`] cells per message it holds (or [`MIN_SPAN`]); an entry that would stretch it past
//! that (a long-stuck message, a crafted position) goes to a side map instead, and when the
//! newest entries need room the oldest held ones move there. Seats past what a cell can name
//! (65,534 consumers) are kept in the side map too.

use crate::ackstate::position::Position;
use crate::mem::{map_bytes, FastMap};

/// Cells a window may span per message it holds.
const DENSITY: usize = 16;

/// Cells a window may always span (16 KiB).
const MIN_SPAN: usize = 4096;

/// The largest seat a cell names (`seat + 1` fills the upper 16 bits; 0 is a free cell).
const MAX_CELL_SEAT: usize = 0xFFFE;

#[inline]
fn cell(seat: usize, slot: u16) -> u32 {
    ((seat as u32 + 1) << 16) | u32::from(slot)
}

#[inline]
fn uncell(c: u32) -> (usize, u16) {
    ((c >> 16) as usize - 1, c as u16)
}

#[inline]
fn at(ledger_id: i64, entry: u32) -> Position {
    Position {
        ledger_id,
        entry_id: i64::from(entry),
    }
}

/// One ledger's in-flight entries.
#[derive(Debug, Clone, Default)]
struct Lane {
    /// Entry of `cells[head]`.
    base: u32,
    /// The window is `cells[head..]`; cells before `head` are spent (dropped in bulk, so that a
    /// front that moves on one entry at a time costs no shifting).
    cells: Vec<u32>,
    head: usize,
    /// Non-free cells.
    live: usize,
    /// Entries outside the window: entry → (seat, slot).
    far: FastMap<u32, (usize, u16)>,
}

/// Spent cells at the front dropped at once (and only when they are half the vector).
const SPENT: usize = 1024;

impl Lane {
    fn is_empty(&self) -> bool {
        self.live == 0 && self.far.is_empty()
    }

    #[inline]
    fn span_limit(live: usize) -> usize {
        MIN_SPAN.max(DENSITY * live)
    }

    /// Cells in the window.
    #[inline]
    fn width(&self) -> usize {
        self.cells.len() - self.head
    }

    /// The index in `cells` of `e`, if the window covers it.
    #[inline]
    fn index(&self, e: u32) -> Option<usize> {
        let i = e.checked_sub(self.base)? as usize;
        (i < self.width()).then_some(self.head + i)
    }

    #[inline]
    fn get(&self, e: u32) -> Option<(usize, u16)> {
        if let Some(i) = self.index(e) {
            let c = self.cells[i];
            if c != 0 {
                return Some(uncell(c));
            }
        }
        if self.far.is_empty() {
            None
        } else {
            self.far.get(&e).copied()
        }
    }

    /// Moves the window's front on by one cell (its value, if any, is the caller's).
    #[inline]
    fn advance(&mut self) {
        self.head += 1;
        self.base += 1;
        if self.head == self.cells.len() {
            self.cells.clear();
            self.head = 0;
        } else if self.head >= SPENT && self.head * 2 >= self.cells.len() {
            self.cells.drain(..self.head);
            self.head = 0;
        }
    }

    /// Moves the oldest cells to the side map until the window spans no more than `limit` cells
    /// from its base to `top` (exclusive).
    fn evict_until(&mut self, top: u64, limit: usize) {
        while self.width() > 0 && top - u64::from(self.base) > limit as u64 {
            let c = self.cells[self.head];
            if c != 0 {
                self.far.insert(self.base, uncell(c));
                self.live -= 1;
            }
            self.advance();
        }
    }

    /// Adds `e` for `seat` with `slot`; returns what it replaced (nothing, for a caller that only
    /// adds what is not in flight).
    #[inline]
    fn insert(&mut self, e: u32, seat: usize, slot: u16) -> Option<(usize, u16)> {
        // The usual case first: just past the window's end (a send in read order), nothing far.
        let off = e.wrapping_sub(self.base) as usize;
        let width = self.width();
        if off >= width
            && width > 0
            && off < Self::span_limit(self.live + 1)
            && seat <= MAX_CELL_SEAT
            && self.far.is_empty()
            && e >= self.base
        {
            self.cells.extend(std::iter::repeat_n(0, off - width));
            self.cells.push(cell(seat, slot));
            self.live += 1;
            return None;
        }
        self.insert_elsewhere(e, seat, slot)
    }

    /// Adds a run of entries for `seat` (`(entry, slot)`, strictly ascending, every one past the
    /// window's end) in one stretch of the window, when the run fits the usual case: nothing
    /// far, the seat nameable in a cell, the span within the limit. False (nothing changed)
    /// otherwise, and the caller adds them one by one.
    fn append_run(&mut self, run: &[(u32, u16)], seat: usize) -> bool {
        let (Some(&(first, _)), Some(&(last, _))) = (run.first(), run.last()) else {
            return true;
        };
        if seat > MAX_CELL_SEAT || !self.far.is_empty() || !run.windows(2).all(|w| w[0].0 < w[1].0)
        {
            return false;
        }
        let width = self.width();
        let base = if width == 0 { first } else { self.base };
        let top = u64::from(base) + width as u64; // first entry past the window
        if u64::from(first) < top {
            return false;
        }
        let span = u64::from(last) + 1 - u64::from(base); // first >= base: no underflow
        if span > Self::span_limit(self.live + run.len()) as u64 {
            return false;
        }
        if width == 0 {
            self.cells.clear();
            self.head = 0;
            self.base = base;
        }
        let head = self.head;
        self.cells.resize(head + span as usize, 0);
        for &(e, slot) in run {
            if let Some(c) = self.cells.get_mut(head + (e - base) as usize) {
                *c = cell(seat, slot);
            }
        }
        self.live += run.len();
        true
    }

    /// [`insert`](Self::insert) of anything else: before, inside or far past the window.
    fn insert_elsewhere(&mut self, e: u32, seat: usize, slot: u16) -> Option<(usize, u16)> {
        if seat > MAX_CELL_SEAT || (!self.far.is_empty() && self.far.contains_key(&e)) {
            return self.far.insert(e, (seat, slot));
        }
        if self.width() == 0 {
            self.cells.clear();
            self.head = 0;
            self.base = e;
        }
        let top = u64::from(self.base) + self.width() as u64; // first entry past the window
        if u64::from(e) >= top {
            let need = u64::from(e) + 1;
            let limit = Self::span_limit(self.live + 1);
            if need - u64::from(self.base) > limit as u64 {
                self.evict_until(need, limit);
                self.trim();
                if self.width() == 0 {
                    self.cells.clear();
                    self.head = 0;
                    self.base = e;
                }
            }
            let top = u64::from(self.base) + self.width() as u64;
            self.cells
                .resize(self.cells.len() + (u64::from(e) - top) as usize, 0);
            self.cells.push(cell(seat, slot));
        } else if let Some(i) = self.index(e) {
            let old = std::mem::replace(&mut self.cells[i], cell(seat, slot));
            if old != 0 {
                return Some(uncell(old));
            }
        } else {
            // Before the window (a redelivery of an old message).
            if top - u64::from(e) > Self::span_limit(self.live + 1) as u64 {
                return self.far.insert(e, (seat, slot));
            }
            let need = (self.base - e) as usize;
            if self.head < need {
                // Room in front: what is needed and a quarter of the window more.
                let pad = need + self.width() / 4;
                let mut cells = vec![0; pad];
                cells.extend_from_slice(&self.cells[self.head..]);
                self.cells = cells;
                self.head = pad;
            }
            self.head -= need;
            self.cells[self.head..self.head + need].fill(0);
            self.cells[self.head] = cell(seat, slot);
            self.base = e;
        }
        self.live += 1;
        None
    }

    /// Takes `e` out of flight, if it is and (with `only`) that seat holds it; returns its seat
    /// and slot.
    #[inline(always)]
    fn take(&mut self, e: u32, only: Option<usize>) -> Option<(usize, u16)> {
        if let Some(i) = self.index(e) {
            let c = self.cells[i];
            if c != 0 {
                let held = uncell(c);
                if only.is_some_and(|seat| seat != held.0) {
                    return None;
                }
                self.cells[i] = 0;
                self.live -= 1;
                if i == self.head || i + 1 == self.cells.len() {
                    self.trim();
                }
                return Some(held);
            }
        }
        if self.far.is_empty() {
            return None;
        }
        match self.far.get(&e) {
            Some(&(seat, _)) if only.is_none_or(|s| s == seat) => self.far.remove(&e),
            _ => None,
        }
    }

    /// Drops free cells at both ends.
    fn trim(&mut self) {
        if self.live == 0 {
            self.cells.clear();
            self.head = 0;
            return;
        }
        while self.cells[self.head] == 0 {
            self.advance(); // a live cell lies ahead, so the window does not empty
        }
        while self.cells.last() == Some(&0) {
            self.cells.pop();
        }
    }

    /// Up to `left` in-flight entries of `seat` with their slots, ascending. The caller knows
    /// the seat's exact count, so the scan stops once `left` are found.
    fn of_seat(&self, seat: usize, left: usize, out: &mut Vec<(u32, u16)>) {
        let start = out.len();
        for (i, &c) in self.cells[self.head..].iter().enumerate() {
            if c != 0 && uncell(c).0 == seat {
                out.push((self.base + i as u32, c as u16));
                if out.len() - start == left {
                    return; // the rest of the seat's entries: none (not in the side map either)
                }
            }
        }
        if !self.far.is_empty() {
            let before = out.len();
            out.extend(
                self.far
                    .iter()
                    .filter(|(_, &(s, _))| s == seat)
                    .map(|(&e, &(_, slot))| (e, slot)),
            );
            if out.len() > before {
                out[start..].sort_unstable_by_key(|&(e, _)| e);
            }
        }
    }

    fn memory_usage(&self) -> usize {
        self.cells.capacity() * size_of::<u32>() + map_bytes(&self.far)
    }
}

/// Every in-flight message of a subscription: position → (seat, slot), with a count per seat.
#[derive(Debug, Clone, Default)]
pub(super) struct InFlight {
    /// Ledgers with an in-flight entry, ascending (a few at a time: ledgers roll over).
    lanes: Vec<(i64, Lane)>,
    /// The index in `lanes` used last (sends and acks stay in one ledger for long).
    last: usize,
    /// In-flight messages per seat.
    counts: Vec<u64>,
    len: u64,
}

impl InFlight {
    /// The index of `ledger` in `lanes`: the last one used, else a binary search.
    #[inline]
    fn find(&self, ledger: i64) -> std::result::Result<usize, usize> {
        match self.lanes.get(self.last) {
            Some((l, _)) if *l == ledger => Ok(self.last),
            _ => self.lanes.binary_search_by_key(&ledger, |(l, _)| *l),
        }
    }

    /// Messages in flight.
    pub(super) fn len(&self) -> u64 {
        self.len
    }

    /// Messages in flight on `seat`.
    pub(super) fn count(&self, seat: usize) -> u64 {
        self.counts.get(seat).copied().unwrap_or(0)
    }

    /// Who holds `p`: its seat and slot.
    #[inline]
    pub(super) fn get(&self, p: Position) -> Option<(usize, u16)> {
        let i = self.find(p.ledger_id).ok()?;
        self.lanes[i].1.get(p.entry_id as u32)
    }

    /// Notes `p` (a checked position) as sent to `seat` with `slot` (replacing its holder, if any).
    #[inline]
    pub(super) fn insert(&mut self, p: Position, seat: usize, slot: u16) {
        let i = match self.find(p.ledger_id) {
            Ok(i) => i,
            Err(i) => {
                self.lanes.insert(i, (p.ledger_id, Lane::default()));
                i
            }
        };
        self.last = i;
        if self.counts.len() <= seat {
            self.counts.resize(seat + 1, 0);
        }
        self.counts[seat] += 1;
        match self.lanes[i].1.insert(p.entry_id as u32, seat, slot) {
            Some((old, _)) => self.counts[old] -= 1,
            None => self.len += 1,
        }
    }

    /// Notes a run of one ledger's entries (`(entry, slot)`, checked ids) as sent to `seat`: in
    /// one stretch when they are ascending past what the ledger holds, else one by one.
    pub(super) fn insert_run(&mut self, ledger_id: i64, run: &[(u32, u16)], seat: usize) {
        let i = match self.find(ledger_id) {
            Ok(i) => i,
            Err(i) => {
                self.lanes.insert(i, (ledger_id, Lane::default()));
                i
            }
        };
        self.last = i;
        if self.lanes[i].1.append_run(run, seat) {
            if self.counts.len() <= seat {
                self.counts.resize(seat + 1, 0);
            }
            self.counts[seat] += run.len() as u64;
            self.len += run.len() as u64;
            return;
        }
        for &(e, slot) in run {
            self.insert(
                Position {
                    ledger_id,
                    entry_id: i64::from(e),
                },
                seat,
                slot,
            );
        }
    }

    /// Takes `p` out of flight; returns its seat and slot if it was in flight.
    #[inline]
    pub(super) fn remove(&mut self, p: Position) -> Option<(usize, u16)> {
        self.take(p, None)
    }

    /// Takes `p` out of flight if `seat` holds it; returns its slot.
    #[inline]
    pub(super) fn remove_of(&mut self, seat: usize, p: Position) -> Option<u16> {
        self.take(p, Some(seat)).map(|(_, slot)| slot)
    }

    #[inline(always)]
    fn take(&mut self, p: Position, only: Option<usize>) -> Option<(usize, u16)> {
        let i = self.find(p.ledger_id).ok()?;
        self.last = i;
        let lane = &mut self.lanes[i].1;
        let got = lane.take(p.entry_id as u32, only)?;
        if lane.is_empty() {
            self.lanes.remove(i);
            self.last = 0;
        }
        self.counts[got.0] -= 1;
        self.len -= 1;
        Some(got)
    }

    /// Takes every position of `seat` out of flight; returns them with their slots, ascending.
    pub(super) fn remove_seat(&mut self, seat: usize) -> Vec<(Position, u16)> {
        let out = self.of_seat(seat);
        for &(p, _) in &out {
            self.remove(p);
        }
        out
    }

    /// `seat`'s in-flight positions with their slots, ascending (the scan stops once the seat's
    /// count is found).
    pub(super) fn of_seat(&self, seat: usize) -> Vec<(Position, u16)> {
        let want = self.count(seat) as usize;
        let mut out = Vec::with_capacity(want);
        let mut entries = Vec::new();
        for (ledger_id, lane) in &self.lanes {
            if out.len() == want {
                break;
            }
            entries.clear();
            lane.of_seat(seat, want - out.len(), &mut entries);
            out.extend(entries.iter().map(|&(e, slot)| (at(*ledger_id, e), slot)));
        }
        out
    }

    /// Calls `f(seat, slot)` for every message in flight (in no particular order).
    pub(super) fn for_each(&self, mut f: impl FnMut(usize, u16)) {
        for (_, lane) in &self.lanes {
            for &c in &lane.cells[lane.head..] {
                if c != 0 {
                    let (seat, slot) = uncell(c);
                    f(seat, slot);
                }
            }
            for &(seat, slot) in lane.far.values() {
                f(seat, slot);
            }
        }
    }

    /// Approximate heap bytes.
    pub(super) fn memory_usage(&self) -> usize {
        self.lanes.capacity() * size_of::<(i64, Lane)>()
            + self.counts.capacity() * size_of::<u64>()
            + self
                .lanes
                .iter()
                .map(|(_, lane)| lane.memory_usage())
                .sum::<usize>()
    }
}

/// Positions with their slots and nothing else (what a delayed-delivery tracker holds for the
/// dispatcher): the same windows, one seat.
#[derive(Debug, Clone, Default)]
pub(super) struct SlotsOf(InFlight);

impl SlotsOf {
    pub(super) fn len(&self) -> usize {
        self.0.len() as usize
    }

    /// Takes `p` out; returns its slot.
    #[inline]
    pub(super) fn remove(&mut self, p: Position) -> Option<u16> {
        self.0.remove_of(0, p)
    }

    /// Whether `p` is held.
    pub(super) fn contains(&self, p: Position) -> bool {
        self.0.get(p).is_some()
    }

    /// Notes a run of one ledger's entries (`(entry, slot)`, checked ids), replacing what they had.
    pub(super) fn insert_run(&mut self, ledger_id: i64, run: &[(u32, u16)]) {
        self.0.insert_run(ledger_id, run, 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn p(l: i64, e: i64) -> Position {
        Position {
            ledger_id: l,
            entry_id: e,
        }
    }

    #[test]
    fn sends_and_acks_in_order_keep_a_small_window() {
        let mut f = InFlight::default();
        for e in 0..10_000 {
            f.insert(p(1, e), (e % 7) as usize, (e % 100 + 1) as u16);
            if e >= 100 {
                assert_eq!(
                    f.remove(p(1, e - 100)),
                    Some((((e - 100) % 7) as usize, ((e - 100) % 100 + 1) as u16))
                );
            }
        }
        assert_eq!(f.len(), 100);
        assert!(
            f.memory_usage() < 4 * 2 * SPENT + 1024,
            "{}",
            f.memory_usage()
        );
        assert_eq!(f.of_seat(3).len() as u64, f.count(3));
    }

    #[test]
    fn a_stuck_message_does_not_stretch_the_window() {
        let mut f = InFlight::default();
        f.insert(p(1, 0), 9, 1);
        for e in 1..2_000_000 {
            f.insert(p(1, e), 1, 2);
            assert_eq!(f.remove(p(1, e)), Some((1, 2)));
        }
        assert_eq!(f.get(p(1, 0)), Some((9, 1)));
        assert!(f.memory_usage() < 64 * 1024, "{}", f.memory_usage());
        assert_eq!(f.remove_seat(9), vec![(p(1, 0), 1)]);
        assert_eq!(f.len(), 0);
    }

    #[test]
    fn far_ids_and_many_seats_use_the_side_map() {
        let mut f = InFlight::default();
        f.insert(p(1, 5), 1, 3);
        f.insert(p(1, u32::MAX as i64), 1, 4);
        f.insert(p(1, 0), 70_000, 5);
        assert_eq!(f.get(p(1, 0)), Some((70_000, 5)));
        assert_eq!(f.of_seat(1), vec![(p(1, 5), 3), (p(1, u32::MAX as i64), 4)]);
        // A count per seat (70,001 of them here), a few cells and a small map.
        assert!(f.memory_usage() < 70_001 * 8 + 4096, "{}", f.memory_usage());
        assert_eq!(f.remove(p(1, u32::MAX as i64)), Some((1, 4)));
        assert_eq!(f.count(70_000), 1);
    }

    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    /// Random sends (mostly ascending, some far back or far ahead), runs of sends, acks, leaves,
    /// against a map. Every other seed is tame (nothing far, no seat past a cell), so that runs
    /// take their one-stretch path as well as the one-by-one one.
    #[test]
    fn randomised_against_a_map() {
        for seed in 1..40u64 {
            let tame = seed % 2 == 0;
            let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
            let mut f = InFlight::default();
            let mut m: BTreeMap<Position, (usize, u16)> = BTreeMap::new();
            let mut next = [0i64; 3];
            let mut peak = 0;
            for _ in 0..20_000 {
                let l = 1 + rng.below(3) as i64;
                match rng.below(10) {
                    0 if rng.below(3) == 0 => {
                        // A run: mostly ascending past what is held, sometimes starting behind,
                        // sometimes out of order, sometimes far apart or for a seat past a cell.
                        let mut e = match rng.below(6) {
                            0 => next[l as usize - 1] - rng.below(5_000) as i64,
                            _ => next[l as usize - 1] + 1,
                        }
                        .max(0);
                        let seat = if !tame && rng.below(20) == 0 {
                            70_000
                        } else {
                            rng.below(8) as usize
                        };
                        let mut run = Vec::new();
                        for _ in 0..1 + rng.below(40) {
                            e += match rng.below(30) {
                                0 => -(rng.below(5) as i64),
                                1 if !tame => 100_000,
                                _ => 1 + rng.below(4) as i64,
                            };
                            let e = e.clamp(0, u32::MAX as i64) as u32;
                            run.push((e, 1 + rng.below(65_535) as u16));
                        }
                        run.sort_by_key(|&(e, _)| e);
                        run.dedup_by_key(|&mut (e, _)| e);
                        // As for a single insert: only what is not in flight is sent.
                        run.retain(|&(e, _)| !m.contains_key(&p(l, i64::from(e))));
                        if rng.below(8) == 0 {
                            run.reverse();
                        }
                        f.insert_run(l, &run, seat);
                        for &(e, slot) in &run {
                            m.insert(p(l, i64::from(e)), (seat, slot));
                            next[l as usize - 1] = next[l as usize - 1].max(i64::from(e));
                        }
                    }
                    0..=4 => {
                        let e = match rng.below(20) {
                            0 if !tame => rng.below(u32::MAX as u64 + 1) as i64,
                            1 if !tame => next[l as usize - 1] - rng.below(50_000) as i64,
                            _ => {
                                next[l as usize - 1] += 1 + rng.below(3) as i64;
                                next[l as usize - 1]
                            }
                        }
                        .clamp(0, u32::MAX as i64);
                        let pos = p(l, e);
                        if m.contains_key(&pos) {
                            continue;
                        }
                        let seat = if !tame && rng.below(50) == 0 {
                            70_000
                        } else {
                            rng.below(8) as usize
                        };
                        let slot = 1 + rng.below(65_535) as u16;
                        f.insert(pos, seat, slot);
                        m.insert(pos, (seat, slot));
                    }
                    5..=7 => {
                        let pos = match m.keys().nth(rng.below(m.len() as u64 + 1) as usize) {
                            Some(&pos) if rng.below(4) != 0 => pos,
                            _ => p(l, rng.below(next[l as usize - 1] as u64 + 2) as i64),
                        };
                        if rng.below(2) == 0 {
                            assert_eq!(f.remove(pos), m.remove(&pos));
                        } else {
                            // Only if this seat holds it (a nack of someone else's is skipped).
                            let seat = match rng.below(3) {
                                0 => 70_000,
                                _ => rng.below(8) as usize,
                            };
                            let want = match m.get(&pos) {
                                Some(&(s, slot)) if s == seat => {
                                    m.remove(&pos);
                                    Some(slot)
                                }
                                _ => None,
                            };
                            assert_eq!(f.remove_of(seat, pos), want);
                        }
                    }
                    8 => {
                        let pos = p(l, rng.below(next[l as usize - 1] as u64 + 2) as i64);
                        assert_eq!(f.get(pos), m.get(&pos).copied());
                    }
                    _ => {
                        let seat = rng.below(9) as usize;
                        let seat = if seat == 8 { 70_000 } else { seat };
                        let want: Vec<(Position, u16)> = m
                            .iter()
                            .filter(|(_, &(s, _))| s == seat)
                            .map(|(&pos, &(_, slot))| (pos, slot))
                            .collect();
                        assert_eq!(f.of_seat(seat), want);
                        let mut all = Vec::new();
                        f.for_each(|s, slot| all.push((s, slot)));
                        all.sort_unstable();
                        let mut model: Vec<(usize, u16)> = m.values().copied().collect();
                        model.sort_unstable();
                        assert_eq!(all, model);
                        if rng.below(4) == 0 {
                            assert_eq!(f.remove_seat(seat), want);
                            m.retain(|_, &mut (s, _)| s != seat);
                        }
                    }
                }
                assert_eq!(f.len(), m.len() as u64);
                peak = peak.max(m.len());
            }
            for seat in [0usize, 3, 7, 70_000] {
                let n = m.values().filter(|&&(s, _)| s == seat).count() as u64;
                assert_eq!(f.count(seat), n);
            }
            // Bounded by the most ever held (DENSITY cells each, MIN_SPAN per lane, the map beside)
            // and the seats (a count each).
            let bound =
                3 * (2 * MIN_SPAN * 4 + 64) + peak * (2 * DENSITY * 4 + 64) + 70_001 * 8 + 4096;
            assert!(f.memory_usage() <= bound, "{} > {bound}", f.memory_usage());
        }
    }
}
