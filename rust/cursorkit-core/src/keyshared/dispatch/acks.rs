//! `DispatchCore`'s acks and nacks: an ack takes the message out of flight wherever it is and on
//! the cursor; a nack or a redeliver sends it back to the replay queue, counted.

use super::*;

impl DispatchCore {
    /// Individual acks from consumer `id`, as Pulsar accepts them: a position pending on another
    /// consumer is removed there, one pending on nobody is acked on the cursor (and leaves the
    /// replay queue), a duplicate changes nothing. Every position is checked first, against the
    /// cursor too: if the cursor would refuse one (an entry beyond a known ledger end), the call
    /// changes nothing.
    pub fn ack(
        &mut self,
        id: u32,
        ledgers: &[i64],
        entries: &[i64],
        cursor: &mut Cursor,
    ) -> Result<AckOutcome> {
        let seat = self.seat(id)?;
        check_positions(ledgers, entries)?;
        // The cursor vouches for every position first: a call it would refuse changes nothing.
        cursor.check_ackable(ledgers, entries)?;
        self.state(seat).progress += 1;
        let mut out = AckOutcome::default();
        let r = if ledgers.len() <= FEW_ACKS {
            // A consumer's grouped acks: one by one beats building bulk bitmaps (with key order
            // on, each may wait for, or release, others of its key).
            each_position(ledgers, entries)
                .try_for_each(|p| self.ack_in_key_order(seat, p, cursor, &mut out))
        } else if self.key_order.is_some() {
            self.ack_bulk_in_key_order(seat, ledgers, entries, cursor, &mut out)
        } else {
            self.ack_bulk(seat, ledgers, entries, cursor, &mut out)
        };
        self.last_sent.forget_joined(cursor.mark_delete());
        r.map(|()| out)
    }

    /// One ack (the per-call path): the same rules as [`ack`](Self::ack), without its columns.
    pub fn ack_one(
        &mut self,
        id: u32,
        ledger: i64,
        entry: i64,
        cursor: &mut Cursor,
    ) -> Result<AckOutcome> {
        let seat = self.seat(id)?;
        check_entry(ledger, entry)?;
        self.state(seat).progress += 1;
        let p = Position {
            ledger_id: ledger,
            entry_id: entry,
        };
        let mut out = AckOutcome::default();
        let r = self.ack_in_key_order(seat, p, cursor, &mut out); // Pulsar's rules when off
        self.last_sent.forget_joined(cursor.mark_delete());
        r.map(|()| out)
    }

    /// Acks `p` (a checked position) for the acking `seat`: in flight on it or on another consumer
    /// (taken out there, its draining reference released), or on nobody (acked on the cursor, out
    /// of the replay queue), or acknowledged already (a duplicate).
    #[inline(always)]
    pub(super) fn ack_at(
        &mut self,
        seat: usize,
        p: Position,
        cursor: &mut Cursor,
        out: &mut AckOutcome,
    ) -> Result<()> {
        match self.inflight.remove(p) {
            Some((holder, slot)) => {
                if let Err(e) = cursor.ack(p.ledger_id, p.entry_id) {
                    // Refused by the cursor: the message stays in flight where it was.
                    self.inflight.insert(p, holder, slot);
                    return Err(e);
                }
                self.key_released(p, slot);
                self.acked_in_flight(seat, holder, slot, out)?;
            }
            None => {
                if cursor.is_acked(p.ledger_id, p.entry_id)? {
                    out.duplicates += 1;
                    if self.replay.contains(p) {
                        // Acked on the cursor directly while it waited: never sent now.
                        self.drop_acked(p);
                    }
                    return Ok(());
                }
                cursor.ack(p.ledger_id, p.entry_id)?;
                out.not_pending += 1;
                self.replay.remove(p);
            }
        }
        if !self.redeliveries.is_empty() {
            self.redeliveries.remove(&p);
        }
        Ok(())
    }

    /// Counts an acked message that was in flight on `holder` (with `slot`) and releases its
    /// draining reference.
    #[inline]
    fn acked_in_flight(
        &mut self,
        seat: usize,
        holder: usize,
        slot: u16,
        out: &mut AckOutcome,
    ) -> Result<()> {
        if holder == seat {
            out.acked += 1;
        } else {
            out.from_other_consumer += 1;
        }
        if self.mode == DispatchMode::Draining && !self.draining.is_empty() {
            let hid = self.occupant(holder)?.id;
            if self.draining.reduce_ref(hid, u32::from(slot), false)? {
                self.unblocked += 1;
                out.unblocked += 1;
            }
        }
        Ok(())
    }

    /// Acks of many checked positions: those in flight are taken out and acked on the cursor in one
    /// bulk call (on error they are in flight again), the rest one by one.
    pub(super) fn ack_bulk(
        &mut self,
        seat: usize,
        ledgers: &[i64],
        entries: &[i64],
        cursor: &mut Cursor,
        out: &mut AckOutcome,
    ) -> Result<()> {
        let mut ls = Vec::with_capacity(ledgers.len());
        let mut es = Vec::with_capacity(ledgers.len());
        let mut taken = Vec::with_capacity(ledgers.len());
        let mut rest = Vec::new();
        for p in each_position(ledgers, entries) {
            match self.inflight.remove(p) {
                Some(held) => {
                    ls.push(p.ledger_id);
                    es.push(p.entry_id);
                    taken.push(held);
                }
                None => rest.push(p), // pending nowhere, or repeated in this call
            }
        }
        if !taken.is_empty() {
            if let Err(e) = cursor.ack_many(&ls, &es) {
                for ((&ledger_id, &entry_id), &(holder, slot)) in ls.iter().zip(&es).zip(&taken) {
                    let p = Position {
                        ledger_id,
                        entry_id,
                    };
                    self.inflight.insert(p, holder, slot);
                }
                return Err(e);
            }
            for ((&ledger_id, &entry_id), &(holder, slot)) in ls.iter().zip(&es).zip(&taken) {
                let p = Position {
                    ledger_id,
                    entry_id,
                };
                self.key_released(p, slot);
                self.acked_in_flight(seat, holder, slot, out)?;
            }
            if !self.redeliveries.is_empty() {
                for (&ledger_id, &entry_id) in ls.iter().zip(&es) {
                    self.redeliveries.remove(&Position {
                        ledger_id,
                        entry_id,
                    });
                }
            }
        }
        rest.into_iter()
            .try_for_each(|p| self.ack_at(seat, p, cursor, out))
    }

    /// Negative acks from consumer `id`: positions pending on it go to the replay queue with their
    /// redelivery count raised (or, if the cursor has acknowledged them meanwhile, are dropped with
    /// their count, as Pulsar); others are skipped. Returns how many left the consumer.
    pub fn nack(
        &mut self,
        id: u32,
        ledgers: &[i64],
        entries: &[i64],
        cursor: &Cursor,
    ) -> Result<u64> {
        let seat = self.seat(id)?;
        check_positions(ledgers, entries)?; // every position first: a bad one changes nothing
        self.state(seat).progress += 1;
        let mut n = 0;
        let ordered = self.key_order.is_some();
        // Key order: the first position nacked per slot (later ones of the slot are taken back).
        let mut firsts: BTreeMap<u16, Position> = BTreeMap::new();
        for p in each_position(ledgers, entries) {
            let Some(slot) = self.inflight.remove_of(seat, p) else {
                if ordered {
                    self.stale_nack(seat, p); // a taken-back copy's answer: dropped
                }
                continue; // not in flight on this consumer: skipped, as Pulsar does
            };
            if ordered {
                self.nacked_in_key_order(slot, p);
                let first = firsts.entry(slot).or_insert(p);
                *first = (*first).min(p);
            }
            self.key_released(p, slot);
            if self.mode == DispatchMode::Draining
                && !self.draining.is_empty()
                && self.draining.reduce_ref(id, u32::from(slot), false)?
            {
                self.unblocked += 1;
            }
            if self.requeue(p, slot, cursor)? {
                self.redeliveries.raise(p);
            }
            n += 1;
        }
        if ordered {
            self.take_back_after(&firsts, cursor)?;
        }
        Ok(n)
    }

    /// Every unacked message of consumer `id` goes to replay (Pulsar's redeliver-unacknowledged),
    /// as [`nack`](Self::nack) sends them; returns them in order.
    pub fn redeliver(&mut self, id: u32, cursor: &Cursor) -> Result<Vec<Position>> {
        let held = self.unacked(id)?;
        let ls: Vec<i64> = held.iter().map(|p| p.ledger_id).collect();
        let es: Vec<i64> = held.iter().map(|p| p.entry_id).collect();
        self.nack(id, &ls, &es, cursor)?;
        // A client redelivering everything drops what it had: it owes no answers any more.
        let seat = self.seat(id)?;
        self.key_order_release_seat(seat, &[]);
        Ok(held)
    }
}
