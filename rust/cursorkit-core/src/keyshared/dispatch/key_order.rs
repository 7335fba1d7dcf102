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
//! state is per message in flight (a tree by slot and position) and per hold; off, none of it
//! exists and every path costs one branch.

use super::*;

/// A message in flight, as key order sees it.
#[derive(Debug, Clone, Copy)]
struct Flight {
    seat: usize,
    /// Its ack came and waits for an earlier message of the slot.
    parked: bool,
}

/// The state of key-ordered nacks.
#[derive(Debug, Clone, Default)]
pub(super) struct KeyOrder {
    /// In flight by slot, then position.
    flight: BTreeMap<(u16, Position), Flight>,
    /// Copies taken back from a seat whose answer is still to come: (seat, position) → slot.
    stale: FastMap<(usize, Position), u16>,
    /// Per (seat, slot): parked acks plus unanswered taken-back copies (the slot is held there).
    holds: FastMap<(usize, u16), u32>,
    parked: u64,
    taken_back: u64,
    stale_answers: u64,
    parked_dropped: u64,
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
}

const LOWEST: Position = Position {
    ledger_id: i64::MIN,
    entry_id: i64::MIN,
};

impl KeyOrder {
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
        self.flight.insert(
            (slot, p),
            Flight {
                seat,
                parked: false,
            },
        );
    }

    /// `p` left flight (its parked ack, if any, goes with it).
    fn gone(&mut self, slot: u16, p: Position) -> Option<Flight> {
        let f = self.flight.remove(&(slot, p))?;
        if f.parked {
            self.parked -= 1;
            self.unhold(f.seat, slot);
        }
        Some(f)
    }

    /// Whether `seat` has an earlier message of `slot` in flight that it has not answered.
    fn waits_behind(&self, seat: usize, slot: u16, p: Position) -> bool {
        self.flight
            .range((slot, LOWEST)..(slot, p))
            .any(|(_, f)| f.seat == seat && !f.parked)
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
            let mut ko = KeyOrder::default();
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
        }
    }

    /// An ack with key order on: a stale copy's answer is dropped, an ack overtaking an earlier
    /// unanswered message of its slot is parked, an accepted one releases the parked acks behind it.
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
        match ko.flight.get(&(slot, p)).copied() {
            Some(f) if f.parked => {
                out.duplicates += 1; // acked again while it waits
                return Ok(());
            }
            Some(_) if ko.waits_behind(holder, slot, p) => {
                if let Some(f) = ko.flight.get_mut(&(slot, p)) {
                    f.parked = true;
                }
                ko.parked += 1;
                ko.hold(holder, slot);
                out.parked += 1;
                return Ok(());
            }
            _ => {}
        }
        self.ack_at(seat, p, cursor, out)?;
        if let Some(ko) = self.key_order.as_mut() {
            ko.flight.remove(&(slot, p));
        }
        self.release_parked(holder, slot, p, cursor, out)
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
        let mut ready = Vec::new();
        let after = ko
            .flight
            .range((slot, p)..)
            .take_while(|((s, _), _)| *s == slot);
        for (&(_, q), f) in after {
            if q == p || f.seat != seat {
                continue;
            }
            if !f.parked {
                break;
            }
            ready.push(q);
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
        let mut later: Vec<(u16, Position, Flight)> = Vec::new();
        for (&slot, &first) in firsts {
            later.extend(
                ko.flight
                    .range((slot, first)..)
                    .take_while(|((s, _), _)| *s == slot)
                    .filter(|((_, q), _)| *q > first)
                    .map(|(&(s, q), &f)| (s, q, f)),
            );
        }
        for (slot, q, f) in later {
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
