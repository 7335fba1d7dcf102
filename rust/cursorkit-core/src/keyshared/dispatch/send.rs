//! `DispatchCore`'s dispatch: the replay queue first, in position order, then the reads, each entry
//! to the consumer its slot names when the ordering mode lets it go.

use super::*;

impl DispatchCore {
    /// Sends what can be sent: the replay queue first, in position order, then the reads in order.
    pub fn dispatch(&mut self, cursor: &Cursor) -> Result<Vec<Delivery>> {
        Ok(self.dispatch_packed(cursor)?.into_deliveries())
    }

    /// [`DispatchCore::dispatch`] as flat columns: what a binding turns into its own objects.
    pub fn dispatch_packed(&mut self, cursor: &Cursor) -> Result<Dispatched> {
        self.blocked.clear();
        self.last_sent.forget_joined(cursor.mark_delete());
        self.prune_batch_sizes(cursor)?;
        let mut out: Vec<u32> = Vec::new();
        self.sent.clear();
        let routed = self.route(cursor, &mut out);
        let packed = self.pack(out); // resets the per-dispatch scratch, whatever happened
        routed?;
        if self.mode == DispatchMode::LastSent && !packed.is_empty() {
            self.last_sent.advance(cursor)?;
        }
        Ok(packed)
    }

    /// The replay queue, then the reads: each entry sent (into `sent`, its consumer in `out`),
    /// queued for replay or dropped.
    fn route(&mut self, cursor: &Cursor, out: &mut Vec<u32>) -> Result<()> {
        let md = cursor.mark_delete();
        if !self.replay.is_empty() {
            // Every queued entry is tried in order (each held one's reason is recorded); sent ones
            // leave the queue. The cursor may have acknowledged an entry at any time since it was
            // queued (a skip, TTL, an ack on a shared cursor, even while a consumer held it): it is
            // checked as it would be sent, and dropped, as Pulsar drops deleted entries it reads
            // back for replay.
            let queued = self.replay.to_vec();
            let isolating = self.spill.is_some();
            for (pos, slot) in queued {
                if isolating && self.spilling(slot, pos) {
                    self.spill_entry(pos, slot, cursor)?; // behind what its slot spilled
                    continue;
                }
                if let Some(seat) = self.target(pos, slot, true)? {
                    if cursor.is_acked(pos.ledger_id, pos.entry_id)? {
                        self.drop_acked(pos);
                        continue;
                    }
                    self.replay.remove(pos);
                    self.send(seat, pos, slot, out, cursor)?;
                } else if isolating && self.owner_stuck(slot) {
                    self.spill_entry(pos, slot, cursor)?;
                }
            }
        }
        let reads = std::mem::take(&mut self.incoming);
        let isolating = self.spill.is_some();
        for read in reads {
            let recheck = read.mutations != cursor.mutations();
            for (&pos, &slot) in read.positions.iter().zip(&read.slots) {
                if recheck && cursor.is_acked(pos.ledger_id, pos.entry_id)? {
                    // Acknowledged since the read (an ack of a never-sent entry, a skip): dropped.
                    self.dropped_acked += 1;
                    continue;
                }
                if isolating && self.spilling(slot, pos) {
                    self.block(slot, BlockReason::Spilled, None, None, pos);
                    self.spill_entry(pos, slot, cursor)?;
                    continue;
                }
                if self.replay.has_slot(slot) {
                    self.block(slot, BlockReason::ReplayOrder, None, None, pos);
                    if isolating && self.owner_stuck(slot) {
                        self.spill_entry(pos, slot, cursor)?;
                    } else {
                        self.queue_replay(pos, slot, md);
                    }
                    continue;
                }
                match self.target(pos, slot, false)? {
                    Some(seat) => self.send(seat, pos, slot, out, cursor)?,
                    None if isolating && self.owner_stuck(slot) => {
                        self.spill_entry(pos, slot, cursor)?;
                    }
                    None => self.queue_replay(pos, slot, md),
                }
            }
        }
        Ok(())
    }

    /// Groups the positions sent by consumer (a counting sort: two passes, no allocation per
    /// consumer), resets the per-dispatch scratch and counts each consumer's deliveries.
    fn pack(&mut self, consumers: Vec<u32>) -> Dispatched {
        if consumers.is_empty() {
            self.sent.clear();
            return Dispatched::default();
        }
        let mut ends = vec![0usize; consumers.len()];
        for &(at, _) in &self.sent {
            ends[at as usize] += 1;
        }
        let mut next = Vec::with_capacity(consumers.len());
        let mut total = 0;
        for (&id, end) in consumers.iter().zip(ends.iter_mut()) {
            let seat = self.seat_of[&id];
            self.out_index[seat] = usize::MAX;
            self.state(seat).delivered += *end as u64;
            next.push(total);
            total += *end;
            *end = total;
        }
        let (mut ledgers, mut entries) = (vec![0i64; total], vec![0i64; total]);
        for &(at, pos) in &self.sent {
            let i = &mut next[at as usize];
            ledgers[*i] = pos.ledger_id;
            entries[*i] = pos.entry_id;
            *i += 1;
        }
        self.sent.clear();
        Dispatched {
            consumers,
            ends,
            ledgers,
            entries,
        }
    }

    #[inline]
    fn block(
        &mut self,
        slot: u16,
        reason: BlockReason,
        consumer: Option<u32>,
        owner: Option<u32>,
        position: Position,
    ) {
        self.blocked.note(
            slot,
            Blocked {
                reason,
                consumer,
                owner,
                position,
            },
        );
    }

    /// The seat `slot` may go to now, or None (the reason is recorded).
    #[inline]
    fn target(&mut self, pos: Position, slot: u16, replay: bool) -> Result<Option<usize>> {
        let seat = self.owners[usize::from(slot)];
        let Some(state) = self.seats.get(seat as usize).and_then(Option::as_ref) else {
            self.block(slot, BlockReason::NoConsumer, None, None, pos);
            return Ok(None);
        };
        let id = state.id;
        if state.permits == 0 {
            self.block(slot, BlockReason::NoPermits, Some(id), None, pos);
            return Ok(None);
        }
        if self.max_unacked_per_key != 0
            && self.key_unacked[usize::from(slot)] >= self.max_unacked_per_key
        {
            self.block(slot, BlockReason::KeyUnackedLimit, Some(id), None, pos);
            return Ok(None);
        }
        if self
            .key_order
            .as_ref()
            .is_some_and(|ko| ko.holds(seat as usize, slot))
        {
            self.block(slot, BlockReason::KeyOrder, Some(id), None, pos);
            return Ok(None);
        }
        match self.mode {
            DispatchMode::Draining => {
                if !self.draining.is_empty() && self.draining.should_block(id, u32::from(slot))? {
                    let owner = self.draining.owner(u32::from(slot))?;
                    self.block(slot, BlockReason::Draining, Some(id), owner, pos);
                    return Ok(None);
                }
            }
            DispatchMode::LastSent => {
                if let Some(limit) = self.last_sent.limit(id, replay) {
                    if pos > limit {
                        self.block(slot, BlockReason::RecentlyJoined, Some(id), None, pos);
                        return Ok(None);
                    }
                }
            }
            DispatchMode::OutOfOrder => {}
        }
        Ok(Some(seat as usize))
    }

    #[inline]
    fn send(
        &mut self,
        seat: usize,
        pos: Position,
        slot: u16,
        out: &mut Vec<u32>,
        cursor: &Cursor,
    ) -> Result<()> {
        let weight = self.batch_sizes.get(&pos).map_or(1, |&m| u64::from(m));
        let state = self.seats[seat].as_mut().expect("registered seat");
        // A batch larger than the permits left still goes (Pulsar's permits may go below zero;
        // here they stop at zero).
        let taken = weight.min(state.permits);
        state.permits -= taken;
        self.permits -= u128::from(taken);
        let id = state.id;
        self.inflight.insert(pos, seat, slot);
        if let Some(ko) = self.key_order.as_mut() {
            ko.sent(seat, slot, pos);
        }
        if !self.key_unacked.is_empty() {
            self.key_unacked[usize::from(slot)] += weight;
            if weight > 1 {
                self.key_weights.insert(pos, weight);
            }
        }
        let mut at = self.out_index[seat];
        if at == usize::MAX {
            at = out.len();
            self.out_index[seat] = at;
            out.push(id);
        }
        self.sent.push((at as u32, pos));
        if self.mode == DispatchMode::LastSent {
            self.last_sent.on_send(pos, cursor)?;
        }
        Ok(())
    }
}
