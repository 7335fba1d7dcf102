//! `DispatchCore`'s entries in: reads, re-reads for the replay queue, and the entries a
//! delayed-delivery tracker holds and hands back.

use super::*;

impl DispatchCore {
    /// Records how many messages entries hold (a batch's `num_messages_in_batch`; 1 otherwise):
    /// sending one takes that many of its consumer's permits. Positions not given count as 1.
    /// Checked whole before anything changes.
    pub fn set_batch_sizes(
        &mut self,
        ledgers: &[i64],
        entries: &[i64],
        messages: &[i64],
    ) -> Result<()> {
        check_entries(ledgers, entries)?;
        check_batch_sizes(messages, ledgers.len())?;
        for ((&l, &e), &m) in ledgers.iter().zip(entries).zip(messages) {
            let p = Position::new(l, e)?;
            if m > 1 {
                self.batch_sizes.insert(p, m as u32);
            } else {
                self.batch_sizes.remove(&p);
            }
        }
        Ok(())
    }

    /// Drops the batch sizes of acknowledged positions once the map has doubled since the last
    /// prune (amortised O(1) per entry).
    pub(super) fn prune_batch_sizes(&mut self, cursor: &Cursor) -> Result<()> {
        if self.batch_sizes.len() < self.batch_sizes_pruned_at {
            return Ok(());
        }
        let mut keep = FastMap::default();
        for (&p, &m) in &self.batch_sizes {
            if !cursor.is_acked(p.ledger_id, p.entry_id)? {
                keep.insert(p, m);
            }
        }
        self.batch_sizes = keep;
        self.batch_sizes_pruned_at = (2 * self.batch_sizes.len()).max(1024);
        Ok(())
    }

    /// New entries of one read, in read order. With nobody connected they are released at once (the
    /// broker reads them again after [`take_rewind`](Self::take_rewind)). Everything is checked
    /// first: on error nothing changes.
    pub fn add_read(
        &mut self,
        ledgers: &[i64],
        entries: &[i64],
        slots: &[i64],
        cursor: &Cursor,
    ) -> Result<()> {
        let Some((positions, slots)) = self.accept(ledgers, entries, slots, cursor)? else {
            return Ok(());
        };
        self.push_read(positions, slots, cursor);
        Ok(())
    }

    /// Queues a read's accepted entries for the next dispatch.
    fn push_read(&mut self, positions: Vec<Position>, slots: Vec<u16>, cursor: &Cursor) {
        self.incoming.push(Read {
            positions,
            slots,
            mutations: cursor.mutations(),
        });
    }

    /// Entries to redeliver (re-read for the replay queue, or delayed messages now due). Checked
    /// first: on error nothing changes.
    pub fn add_replay(
        &mut self,
        ledgers: &[i64],
        entries: &[i64],
        slots: &[i64],
        cursor: &Cursor,
    ) -> Result<()> {
        let Some((positions, slots)) = self.accept(ledgers, entries, slots, cursor)? else {
            return Ok(());
        };
        for (&p, &s) in positions.iter().zip(&slots) {
            self.requeue(p, s, cursor)?;
        }
        Ok(())
    }

    /// Checks the columns of entries coming in (nothing changes on error) and notes the read.
    /// None when there is nothing to keep: an empty read, or one made while nobody is connected
    /// (released at once; the broker reads it again after [`take_rewind`](Self::take_rewind)).
    /// Positions a delayed-delivery tracker took from a read, with their slots: they wait there
    /// and come back through [`release_delayed`](Self::release_delayed) when due. Checked first.
    pub fn hold_delayed(&mut self, ledgers: &[i64], entries: &[i64], slots: &[i64]) -> Result<()> {
        check_positions(ledgers, entries)?;
        same_len(ledgers.len(), slots.len(), "positions and slots")?;
        check_slots(slots)?; // every slot first: a bad one changes nothing
        self.hold(0..ledgers.len(), ledgers, entries, slots);
        Ok(())
    }

    /// Notes the entries at `indexes` (checked columns) as held by the tracker, by runs of one
    /// ledger; returns how many. Inlined into both callers (its loop runs per held entry).
    #[inline(always)]
    fn hold(
        &mut self,
        indexes: impl Iterator<Item = usize>,
        ledgers: &[i64],
        entries: &[i64],
        slots: &[i64],
    ) -> usize {
        let mut held = 0;
        let mut run: Vec<(u32, u16)> = Vec::new();
        let mut run_ledger = None;
        for i in indexes {
            if run_ledger != Some(ledgers[i]) {
                if let Some(l) = run_ledger {
                    self.delayed_slots.insert_run(l, &run);
                }
                run.clear();
                run_ledger = Some(ledgers[i]);
            }
            run.push((entries[i] as u32, slots[i] as u16));
            held += 1;
        }
        if let Some(l) = run_ledger {
            self.delayed_slots.insert_run(l, &run);
        }
        held
    }

    /// One read of which a delayed-delivery tracker took the entries whose bit is set in `held`
    /// (bit `b` of word `k` is entry `64k + b`): those wait as [`hold_delayed`](Self::hold_delayed)
    /// keeps them, the others go on as [`add_read`](Self::add_read) reads them, with no column
    /// of either side built first. Checked first: on error nothing changes. While nobody is
    /// connected nothing is held (the read is released, as `add_read` releases it).
    pub fn add_read_split(
        &mut self,
        ledgers: &[i64],
        entries: &[i64],
        slots: &[i64],
        held: &[u64],
        cursor: &Cursor,
    ) -> Result<()> {
        let n = ledgers.len();
        check_positions(ledgers, entries)?;
        same_len(n, slots.len(), "positions and slots")?;
        check_slots(slots)?;
        let stray = held.len() != n.div_ceil(64)
            || (!n.is_multiple_of(64) && held.last().is_some_and(|&w| w >> (n % 64) != 0));
        if stray {
            return Err(CoreError::InvalidArgument(format!(
                "the held words do not cover exactly {n} entries"
            )));
        }
        if n == 0 {
            return Ok(());
        }
        if self.released(cursor) {
            return Ok(());
        }
        let position = |i: usize| Position {
            ledger_id: ledgers[i],
            entry_id: entries[i],
        };
        let kept = self.hold(set_bits(held), ledgers, entries, slots);
        let mut rest: Vec<u64> = held.iter().map(|w| !w).collect();
        if let Some(last) = rest.last_mut().filter(|_| !n.is_multiple_of(64)) {
            *last &= (1u64 << (n % 64)) - 1;
        }
        let mut positions = Vec::with_capacity(n - kept);
        let mut read_slots = Vec::with_capacity(n - kept);
        for i in set_bits(&rest) {
            positions.push(position(i));
            read_slots.push(slots[i] as u16);
        }
        if positions.is_empty() {
            return Ok(());
        }
        self.note_read(&positions);
        self.push_read(positions, read_slots, cursor);
        Ok(())
    }

    /// Due positions a tracker hands back: those it took from a read here join the replay queue
    /// (they are older than anything read since); others are not this dispatcher's and are
    /// ignored. Returns how many were queued.
    pub fn release_delayed(
        &mut self,
        ledgers: &[i64],
        entries: &[i64],
        cursor: &Cursor,
    ) -> Result<usize> {
        let positions = positions_of(ledgers, entries)?;
        let mut ls = Vec::new();
        let mut es = Vec::new();
        let mut ss = Vec::new();
        for p in positions {
            if let Some(slot) = self.delayed_slots.remove(p) {
                ls.push(p.ledger_id);
                es.push(p.entry_id);
                ss.push(i64::from(slot));
            }
        }
        let n = ls.len();
        if n > 0 {
            self.add_replay(&ls, &es, &ss, cursor)?;
        }
        Ok(n)
    }

    /// Entries waiting for a dispatch: the replay queue and the reads not yet dispatched.
    pub fn waiting(&self) -> usize {
        self.replay.len()
            + self
                .incoming
                .iter()
                .map(|r| r.positions.len())
                .sum::<usize>()
    }

    /// Positions a delayed-delivery tracker holds for this dispatcher.
    pub fn delayed_held(&self) -> usize {
        self.delayed_slots.len()
    }

    fn accept(
        &mut self,
        ledgers: &[i64],
        entries: &[i64],
        slots: &[i64],
        cursor: &Cursor,
    ) -> Result<Option<(Vec<Position>, Vec<u16>)>> {
        let positions = positions_of(ledgers, entries)?;
        same_len(positions.len(), slots.len(), "positions and slots")?;
        let slots = slots_of(slots)?;
        if positions.is_empty() {
            return Ok(None);
        }
        if self.released(cursor) {
            return Ok(None);
        }
        self.note_read(&positions);
        Ok(Some((positions, slots)))
    }

    /// True, with everything read dropped (the broker reads again from the rewind position),
    /// when nobody is connected to take a read.
    fn released(&mut self, cursor: &Cursor) -> bool {
        if self.seat_of.is_empty() {
            self.drop_everything_read(cursor.mark_delete());
            return true;
        }
        false
    }

    fn note_read(&mut self, positions: &[Position]) {
        if let Some(top) = positions.iter().max().copied() {
            if self.highest_read.is_none_or(|h| top > h) {
                self.highest_read = Some(top);
            }
        }
    }

    /// Queues a new entry that could not be sent (unacked when read, so only mark-delete is
    /// checked here; the send from replay checks the cursor again).
    pub(super) fn queue_replay(&mut self, pos: Position, slot: u16, md: Position) {
        if self.replay.contains(pos) {
            return;
        }
        if pos <= md {
            self.dropped_acked += 1;
            return;
        }
        self.replay.insert(pos, slot);
    }

    /// Queues a position coming back (a leaver's, a nack, a redeliver, a re-read) unless the cursor
    /// has acknowledged it, which drops it and its redelivery count. Returns whether it is queued.
    pub(super) fn requeue(&mut self, pos: Position, slot: u16, cursor: &Cursor) -> Result<bool> {
        if cursor.is_acked(pos.ledger_id, pos.entry_id)? && !self.replay.contains(pos) {
            self.drop_acked(pos);
            return Ok(false);
        }
        self.replay.insert(pos, slot); // one search: false (kept as it was) when queued already
        Ok(true)
    }

    /// Forgets `pos`, which the cursor has acknowledged: out of the replay queue, its redelivery
    /// count dropped, counted in [`replay_dropped_acked`](Self::replay_dropped_acked).
    pub(super) fn drop_acked(&mut self, pos: Position) {
        self.replay.remove(pos);
        if !self.redeliveries.is_empty() {
            self.redeliveries.remove(&pos);
        }
        self.dropped_acked += 1;
    }

    pub(super) fn drop_everything_read(&mut self, md: Position) {
        self.replay.clear();
        self.incoming.clear();
        // Pulsar clears its redelivery tracker once no consumer is left (a journaled one stays).
        self.redeliveries.nobody_left();
        if let Some(spill) = self.spill.as_mut() {
            spill.forget(); // everything read is read again after the rewind
        }
        self.highest_read = None;
        self.rewind = Some(md);
    }

    /// Where to read again after (mark-delete when the last consumer left), once; None otherwise.
    pub fn take_rewind(&mut self) -> Option<Position> {
        self.rewind.take()
    }
}
