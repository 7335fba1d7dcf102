//! Key-ordered negative acks (beyond Pulsar, opt-in): a nack keeps its key's order.
//!
//! In Pulsar a nacked message comes back after later messages of its key were delivered and
//! acknowledged (PIP-493, open). Here, with [`DispatchCore::set_key_ordered_nacks`]:
//!
//! - a nacked message goes to the replay queue, and every later message of its slot in flight is
//!   taken back with it (requeued behind it, redelivery count unchanged): the slot's messages go
//!   out again in position order, and the replay queue holds the slot's new reads behind them;
//! - an ack that overtakes an earlier message of its slot the same consumer has not answered yet
//!   (the client may be holding a nack back: its nack delay) is *parked*, not applied: when the
//!   earlier message is acked the parked acks follow in order; when it is nacked, they are dropped
//!   and their messages taken back, since the consumer handled them before its retry;
//! - a consumer's answer (ack or nack) to a copy taken back from it is dropped, and the slot is
//!   not sent to that consumer again until every such copy is answered: a consumer handling its
//!   messages in order has then no stale copy of the slot left to answer for a new one (a client
//!   also drops a message arriving while its ack of the same id is still pending);
//! - the slot is held for that consumer while it has a parked ack or an unanswered taken-back copy
//!   of it ([`BlockReason::KeyOrder`]); `redeliver` (the client dropped what it had) and a
//!   consumer leaving release its holds.
//!
//! So each key's accepted acks come from deliveries made in position order, for consumers that
//! answer their messages in the order received (whatever their ack grouping or nack delay). The
//! state is per message in flight (per slot, a short list in position order: a key's messages go
//! out and are mostly acked in order, so a send appends and an ack takes the front) and per hold;
//! off, none of it exists and every path costs one branch.

use std::collections::VecDeque;

use super::*;

/// A message in flight, as key order sees it.
#[derive(Debug, Clone, Copy)]
struct Flight {
    position: Position,
    seat: usize,
    /// Its ack came and waits for an earlier message of the slot.
    parked: bool,
    /// Scratch of one bulk ack call: accepted in it.
    accepting: bool,
}

/// One slot's messages in flight, in position order.
type SlotFlight = VecDeque<Flight>;

/// The index of `p` in `list`, or where it would go.
#[inline]
fn find(list: &SlotFlight, p: Position) -> std::result::Result<usize, usize> {
    match list.front() {
        Some(f) if f.position == p => Ok(0),
        _ => list.binary_search_by(|f| f.position.cmp(&p)),
    }
}

/// A slot's list emptied with more room than this gives it back.
const SHRINK_AT: usize = 64;

/// The state of key-ordered nacks.
#[derive(Debug, Clone)]
pub(super) struct KeyOrder {
    /// Slot → 1 + the index of its list in `lists` (0: nothing in flight). 256 KiB: a send or an
    /// ack reads one word here, then its list.
    list_of: Box<[u32]>,
    /// The lists in use, densely; emptied ones wait in `free` with their room (no allocation per
    /// message).
    lists: Vec<SlotFlight>,
    free: Vec<u32>,
    /// Copies taken back from a seat whose answer is still to come: (seat, position) → slot.
    stale: FastMap<(usize, Position), u16>,
    /// Per (seat, slot): parked acks plus unanswered taken-back copies (the slot is held there).
    holds: FastMap<(usize, u16), u32>,
    parked: u64,
    taken_back: u64,
    stale_answers: u64,
    parked_dropped: u64,
    /// Messages in the lists.
    tracked: u64,
}

/// Key-ordered nacks' figures.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KeyOrderFigures {
    /// Acks waiting for an earlier message of their key.
    pub parked_acks: u64,
    /// (consumer, key) pairs held.
    pub held_keys: u64,
    /// Copies taken back whose consumer has not answered them yet.
    pub unanswered_copies: u64,
    /// Messages taken back behind a nacked one of their key, in total.
    pub taken_back: u64,
    /// Answers to taken-back copies dropped, in total.
    pub stale_answers: u64,
    /// Parked acks dropped because the earlier message was nacked, in total.
    pub parked_dropped: u64,
    /// Messages in flight key order tracks (every message in flight).
    pub tracked: u64,
}

impl KeyOrder {
    fn new() -> Self {
        Self {
            list_of: vec![0; SLOTS].into_boxed_slice(),
            lists: Vec::new(),
            free: Vec::new(),
            stale: FastMap::default(),
            holds: FastMap::default(),
            parked: 0,
            taken_back: 0,
            stale_answers: 0,
            parked_dropped: 0,
            tracked: 0,
        }
    }

    /// `slot`'s list (empty when nothing of it is in flight).
    #[inline]
    fn list(&self, slot: u16) -> &SlotFlight {
        static EMPTY: SlotFlight = SlotFlight::new();
        match self.list_of[usize::from(slot)] {
            0 => &EMPTY,
            at => &self.lists[at as usize - 1],
        }
    }

    /// `slot`'s list, made (or taken from the free ones) if it has none.
    #[inline]
    fn list_mut(&mut self, slot: u16) -> &mut SlotFlight {
        let at = &mut self.list_of[usize::from(slot)];
        if *at == 0 {
            *at = match self.free.pop() {
                Some(i) => i,
                None => {
                    self.lists.push(SlotFlight::new());
                    self.lists.len() as u32
                }
            };
        }
        &mut self.lists[*at as usize - 1]
    }

    fn hold(&mut self, seat: usize, slot: u16) {
        *self.holds.entry((seat, slot)).or_insert(0) += 1;
    }

    fn unhold(&mut self, seat: usize, slot: u16) {
        if let Some(n) = self.holds.get_mut(&(seat, slot)) {
            *n -= 1;
            if *n == 0 {
                self.holds.remove(&(seat, slot));
            }
        }
    }

    /// Whether `slot` is held for `seat`.
    #[inline]
    pub(super) fn holds(&self, seat: usize, slot: u16) -> bool {
        !self.holds.is_empty() && self.holds.contains_key(&(seat, slot))
    }

    #[inline]
    pub(super) fn sent(&mut self, seat: usize, slot: u16, p: Position) {
        let f = Flight {
            position: p,
            seat,
            parked: false,
            accepting: false,
        };
        let list = self.list_mut(slot);
        let added = match list.back() {
            Some(last) if last.position >= p => match find(list, p) {
                Ok(i) => {
                    list[i] = f;
                    false
                }
                Err(i) => {
                    list.insert(i, f);
                    true
                }
            },
            _ => {
                list.push_back(f);
                true
            }
        };
        self.tracked += u64::from(added);
    }

    /// The index of `p` in its slot's list.
    #[inline]
    fn index(&self, slot: u16, p: Position) -> Option<usize> {
        find(self.list(slot), p).ok()
    }

    /// `p` left flight (its parked ack, if any, goes with it).
    fn gone(&mut self, slot: u16, p: Position) -> Option<Flight> {
        let at = self.list_of[usize::from(slot)];
        if at == 0 {
            return None;
        }
        let list = &mut self.lists[at as usize - 1];
        let i = find(list, p).ok()?;
        let f = list.remove(i)?;
        self.tracked -= 1;
        if list.is_empty() {
            if list.capacity() > SHRINK_AT {
                list.shrink_to(4); // a burst of one key's messages gone: its room too
            }
            self.list_of[usize::from(slot)] = 0;
            self.free.push(at);
        }
        if f.parked {
            self.parked -= 1;
            self.unhold(f.seat, slot);
        }
        Some(f)
    }

    /// Whether `seat` has a message of `slot` before index `i` in flight that it has not answered.
    fn waits_behind(&self, seat: usize, slot: u16, i: usize) -> bool {
        self.list(slot)
            .range(..i)
            .any(|f| f.seat == seat && !f.parked)
    }

    /// An answer from `seat` to a copy of `p` taken back from it: dropped, true.
    fn answered_stale(&mut self, seat: usize, p: Position) -> bool {
        if self.stale.is_empty() {
            return false;
        }
        match self.stale.remove(&(seat, p)) {
            Some(slot) => {
                self.unhold(seat, slot);
                self.stale_answers += 1;
                true
            }
            None => false,
        }
    }

    /// Forgets what `seat` owes and holds (it left, or dropped what it had).
    fn release_seat(&mut self, seat: usize) {
        self.stale.retain(|&(s, _), _| s != seat);
        self.holds.retain(|&(s, _), _| s != seat);
    }
}

impl DispatchCore {
    /// Beyond Pulsar (opt-in): key-ordered negative acks (see the module `key_order`): a nack
    /// takes back the later messages of its key in flight, acks overtaking an earlier unanswered
    /// message of their key wait for it, and each key's accepted acks come from deliveries in
    /// position order. Refused in out-of-order mode (which promises no order). Turning it on
    /// counts what is in flight; turning it off is refused while acks are parked.
    pub fn set_key_ordered_nacks(&mut self, on: bool) -> Result<()> {
        if !on {
            if self.key_order.as_ref().is_some_and(|k| k.parked > 0) {
                return Err(CoreError::InvalidArgument(
                    "key-ordered nacks cannot be turned off while acks are parked".into(),
                ));
            }
            self.key_order = None;
            return Ok(());
        }
        if self.mode == DispatchMode::OutOfOrder {
            return Err(CoreError::InvalidArgument(
                "key-ordered nacks need an ordered mode (draining or last-sent), not out-of-order"
                    .into(),
            ));
        }
        if self.key_order.is_none() {
            let mut ko = KeyOrder::new();
            for seat in 0..self.seats.len() {
                for (p, slot) in self.inflight.of_seat(seat) {
                    ko.sent(seat, slot, p);
                }
            }
            self.key_order = Some(Box::new(ko));
        }
        Ok(())
    }

    /// Whether key-ordered nacks are on.
    pub fn key_ordered_nacks(&self) -> bool {
        self.key_order.is_some()
    }

    /// Key-ordered nacks' figures (all zero when off).
    pub fn key_order_figures(&self) -> KeyOrderFigures {
        let Some(ko) = &self.key_order else {
            return KeyOrderFigures::default();
        };
        KeyOrderFigures {
            parked_acks: ko.parked,
            held_keys: ko.holds.len() as u64,
            unanswered_copies: ko.stale.len() as u64,
            taken_back: ko.taken_back,
            stale_answers: ko.stale_answers,
            parked_dropped: ko.parked_dropped,
            tracked: ko.tracked,
        }
    }

    /// An ack with key order on: a stale copy's answer is dropped, an ack overtaking an earlier
    /// unanswered message of its slot is parked, an accepted one releases the parked acks behind it.
    /// Off, Pulsar's rules alone (`ack_at`).
    #[inline(always)]
    pub(super) fn ack_in_key_order(
        &mut self,
        seat: usize,
        p: Position,
        cursor: &mut Cursor,
        out: &mut AckOutcome,
    ) -> Result<()> {
        let Some(ko) = self.key_order.as_mut() else {
            return self.ack_at(seat, p, cursor, out);
        };
        if ko.answered_stale(seat, p) {
            out.stale += 1;
            return Ok(());
        }
        let Some((holder, slot)) = self.inflight.get(p) else {
            return self.ack_at(seat, p, cursor, out);
        };
        if let Some(i) = ko.index(slot, p) {
            if i > 0 {
                if ko.list(slot)[i].parked {
                    out.duplicates += 1; // acked again while it waits
                    return Ok(());
                }
                if ko.waits_behind(holder, slot, i) {
                    if let Some(f) = ko.list_mut(slot).get_mut(i) {
                        f.parked = true;
                    }
                    ko.parked += 1;
                    ko.hold(holder, slot);
                    out.parked += 1;
                    return Ok(());
                }
            }
        }
        self.ack_at(seat, p, cursor, out)?;
        if let Some(ko) = self.key_order.as_mut() {
            ko.gone(slot, p);
        }
        self.release_parked(holder, slot, p, cursor, out)
    }

    /// Many acks with key order on: those that wait for nothing (in flight, not a stale copy's
    /// answer, every earlier message of their slot on their consumer acked in this call or parked)
    /// go through the bulk path at once; the rest one by one, after them.
    pub(super) fn ack_bulk_in_key_order(
        &mut self,
        seat: usize,
        ledgers: &[i64],
        entries: &[i64],
        cursor: &mut Cursor,
        out: &mut AckOutcome,
    ) -> Result<()> {
        let Some(ko) = self.key_order.as_mut() else {
            return self.ack_bulk(seat, ledgers, entries, cursor, out);
        };
        let n = ledgers.len();
        let (mut ls, mut es) = (Vec::with_capacity(n), Vec::with_capacity(n));
        let mut fast: Vec<(usize, u16, Position)> = Vec::with_capacity(n);
        let mut slow = Vec::new();
        for p in each_position(ledgers, entries) {
            let stale = !ko.stale.is_empty() && ko.stale.contains_key(&(seat, p));
            let (holder, slot) = match self.inflight.get(p) {
                Some(held) if !stale => held,
                _ => {
                    slow.push(p);
                    continue;
                }
            };
            let list = ko.list(slot);
            let clean = match find(list, p) {
                Ok(i) => {
                    let ok = !list[i].parked
                        && !list[i].accepting
                        && list
                            .range(..i)
                            .all(|f| f.seat != holder || f.parked || f.accepting);
                    if ok {
                        ko.list_mut(slot)[i].accepting = true;
                    }
                    ok
                }
                Err(_) => true,
            };
            if clean {
                ls.push(p.ledger_id);
                es.push(p.entry_id);
                fast.push((holder, slot, p));
            } else {
                slow.push(p);
            }
        }
        if fast.is_empty() {
            return slow
                .into_iter()
                .try_for_each(|p| self.ack_in_key_order(seat, p, cursor, out));
        }
        if let Err(e) = self.ack_bulk(seat, &ls, &es, cursor, out) {
            if let Some(ko) = self.key_order.as_mut() {
                for &(_, slot, p) in &fast {
                    let list = ko.list_mut(slot);
                    if let Ok(i) = find(list, p) {
                        list[i].accepting = false;
                    }
                }
            }
            return Err(e);
        }
        if let Some(ko) = self.key_order.as_mut() {
            for &(_, slot, p) in &fast {
                ko.gone(slot, p);
            }
        }
        for &(holder, slot, p) in &fast {
            self.release_parked(holder, slot, p, cursor, out)?;
        }
        slow.into_iter()
            .try_for_each(|p| self.ack_in_key_order(seat, p, cursor, out))
    }

    /// Applies the parked acks of `seat` in `slot` after `p`, up to its next unanswered message.
    fn release_parked(
        &mut self,
        seat: usize,
        slot: u16,
        p: Position,
        cursor: &mut Cursor,
        out: &mut AckOutcome,
    ) -> Result<()> {
        let Some(ko) = self.key_order.as_mut() else {
            return Ok(());
        };
        if ko.parked == 0 {
            return Ok(());
        }
        let list = ko.list(slot);
        let mut ready = Vec::new();
        for f in list.range(find(list, p).unwrap_or_else(|i| i)..) {
            if f.position == p || f.seat != seat {
                continue;
            }
            if !f.parked {
                break;
            }
            ready.push(f.position);
        }
        for q in ready {
            if let Some(ko) = self.key_order.as_mut() {
                ko.gone(slot, q);
            }
            self.ack_at(seat, q, cursor, out)?;
        }
        Ok(())
    }

    /// With key order on, a nack's bookkeeping: `p` (of `slot`, taken from `seat`) left flight.
    #[inline]
    pub(super) fn nacked_in_key_order(&mut self, slot: u16, p: Position) {
        if let Some(ko) = self.key_order.as_mut() {
            ko.gone(slot, p);
        }
    }

    /// With key order on, a nack of `p` that `seat` does not hold: the answer to a copy taken
    /// back from it, dropped (true), or not.
    #[inline]
    pub(super) fn stale_nack(&mut self, seat: usize, p: Position) -> bool {
        self.key_order
            .as_mut()
            .is_some_and(|ko| ko.answered_stale(seat, p))
    }

    /// Takes back every message of each slot in flight after the first position nacked in it
    /// (`firsts`: slot → first nacked position): requeued with their counts unchanged; a parked
    /// ack among them is dropped, the other copies are owed an answer by their consumer.
    pub(super) fn take_back_after(
        &mut self,
        firsts: &BTreeMap<u16, Position>,
        cursor: &Cursor,
    ) -> Result<()> {
        let Some(ko) = self.key_order.as_mut() else {
            return Ok(());
        };
        let mut later: Vec<(u16, Flight)> = Vec::new();
        for (&slot, &first) in firsts {
            let list = ko.list(slot);
            let from = match find(list, first) {
                Ok(i) => i + 1,
                Err(i) => i,
            };
            later.extend(list.range(from..).map(|&f| (slot, f)));
        }
        for (slot, f) in later {
            let q = f.position;
            if let Some(ko) = self.key_order.as_mut() {
                ko.gone(slot, q);
                ko.taken_back += 1;
                if f.parked {
                    ko.parked_dropped += 1;
                } else {
                    ko.stale.insert((f.seat, q), slot);
                    ko.hold(f.seat, slot);
                }
            }
            if self.inflight.remove(q).is_none() {
                continue;
            }
            self.key_released(q, slot);
            if self.mode == DispatchMode::Draining && !self.draining.is_empty() {
                let id = self.occupant(f.seat)?.id;
                if self.draining.reduce_ref(id, u32::from(slot), false)? {
                    self.unblocked += 1;
                }
            }
            self.requeue(q, slot, cursor)?;
        }
        Ok(())
    }

    /// With key order on, `seat` left or dropped what it had: its messages' entries, owed answers
    /// and holds are forgotten.
    pub(super) fn key_order_release_seat(&mut self, seat: usize, returned: &[(Position, u16)]) {
        if let Some(ko) = self.key_order.as_mut() {
            for &(p, slot) in returned {
                ko.gone(slot, p);
            }
            ko.release_seat(seat);
        }
    }
}
