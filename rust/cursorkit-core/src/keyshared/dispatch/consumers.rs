//! `DispatchCore`'s consumers: joining and leaving (what a leaver held goes back to replay), permits
//! and the slot owners a selector hands in.

use super::*;

impl DispatchCore {
    /// Registers consumer `id` with `permits`. In last-sent mode a joiner while messages are
    /// outstanding is limited to the last sent position (PIP-282). Refresh the owner table and
    /// register the moved ranges after it.
    pub fn add_consumer(&mut self, id: u32, permits: u64, cursor: &Cursor) -> Result<()> {
        if self.seat_of.contains_key(&id) {
            return Err(CoreError::InvalidArgument(format!(
                "consumer {id} is already registered"
            )));
        }
        let seat = match self.seats.iter().position(Option::is_none) {
            Some(free) => free,
            None => {
                self.seats.push(None);
                self.out_index.push(usize::MAX);
                self.seats.len() - 1
            }
        };
        self.seats[seat] = Some(Seat {
            id,
            permits,
            delivered: 0,
            joined_last_sent: None,
            progress: 0,
            stuck: false,
        });
        self.seat_of.insert(id, seat);
        self.permits += u128::from(permits);
        let md = cursor.mark_delete();
        if self.mode == DispatchMode::LastSent
            && self.seat_of.len() > 1
            && self.highest_read.is_some_and(|r| r > md)
        {
            let lsp = self.last_sent.current(cursor);
            self.state(seat).joined_last_sent = Some(lsp);
            if lsp > md {
                self.last_sent.joined.insert(id, lsp);
            }
        }
        Ok(())
    }

    /// Unregisters consumer `id`: its unacked messages go to the replay queue, their redelivery
    /// counts unchanged, and those the cursor has acknowledged meanwhile are dropped (as Pulsar).
    /// With nobody left, everything read is released, the redelivery counts are cleared and
    /// [`take_rewind`](Self::take_rewind) says where to read again. Returns the positions it held,
    /// in order. Refresh the owner table and register the moved ranges after it.
    pub fn remove_consumer(&mut self, id: u32, cursor: &Cursor) -> Result<Vec<Position>> {
        let seat = self.seat(id)?;
        let state = self.seats[seat].take().expect("registered seat");
        self.seat_of.remove(&id);
        if state.stuck {
            self.stuck_count -= 1;
        }
        self.permits -= u128::from(state.permits);
        for o in self.owners.iter_mut() {
            if *o as usize == seat {
                *o = NOBODY;
            }
        }
        let returned = self.inflight.remove_seat(seat);
        for &(p, s) in &returned {
            self.key_released(p, s);
        }
        self.key_order_release_seat(seat, &returned);
        if self.seat_of.is_empty() {
            self.drop_everything_read(cursor.mark_delete());
        } else {
            for &(p, s) in &returned {
                // Pulsar does not count a leaver's messages as redelivered.
                self.requeue(p, s, cursor)?;
            }
        }
        self.draining.remove_consumer(id, true);
        self.last_sent.joined.remove(&id);
        if self.seat_of.len() <= 1 {
            self.last_sent.joined.clear();
        }
        if self.seat_of.is_empty() {
            self.last_sent.reset();
            self.draining.clear();
        }
        Ok(returned.into_iter().map(|(p, _)| p).collect())
    }

    /// Replaces the owner table: `owners[slot]` is the consumer id owning `slot` (`-1`: nobody);
    /// slots beyond the column belong to nobody.
    pub fn set_owners(&mut self, owners: &[i64]) -> Result<()> {
        if owners.len() > SLOTS {
            return Err(CoreError::InvalidArgument(format!(
                "an owner table has at most {SLOTS} slots, got {}",
                owners.len()
            )));
        }
        let mut table = vec![NOBODY; SLOTS];
        let mut last: (i64, u32) = (-1, NOBODY);
        for (slot, &id) in owners.iter().enumerate() {
            if id != last.0 {
                let seat = if id < 0 {
                    NOBODY
                } else {
                    let id32 = u32::try_from(id).map_err(|_| unknown(u32::MAX))?;
                    self.seat(id32)? as u32
                };
                last = (id, seat);
            }
            table[slot] = last.1;
        }
        self.owners = table.into_boxed_slice();
        Ok(())
    }

    /// [`set_owners`](Self::set_owners) from a selector's table (its consumer ids are ours; an
    /// id the selector holds and this core does not owns nothing here).
    pub fn set_owners_from(&mut self, table: &SlotTable) -> Result<()> {
        let mut col = Vec::with_capacity(SLOTS);
        for slot in 0..SLOTS as u64 {
            col.push(table.select(slot).map_or(-1, i64::from));
        }
        for o in col.iter_mut() {
            if *o >= 0 && !self.seat_of.contains_key(&(*o as u32)) {
                *o = -1;
            }
        }
        self.set_owners(&col)
    }

    /// Updates the owner table with the ranges a membership change gave each consumer (a
    /// selector's exact impact): cheaper than [`set_owners`](Self::set_owners) when the selector's
    /// slots are `0..65536` and a leaver's slots all went somewhere or to nobody (its slots were
    /// cleared by [`remove_consumer`](Self::remove_consumer)).
    pub fn assign(&mut self, added: &[(u32, Vec<HashRange>)]) -> Result<()> {
        for (id, _) in added {
            self.seat(*id)?;
        }
        for (id, ranges) in added {
            let seat = self.seat(*id)? as u32;
            for &(start, end) in ranges {
                let (start, end) = (start as usize, (end as usize).min(SLOTS - 1));
                if start <= end {
                    self.owners[start..=end].fill(seat);
                }
            }
        }
        Ok(())
    }

    /// PIP-379: ranges a membership change took from each previous owner (`skip`: the consumer that
    /// joined or left) start draining there for every message of theirs it has unacked. Then hashes
    /// that came back to the consumer they drain on are released at once. Call after
    /// [`set_owners`](Self::set_owners).
    pub fn register_moved(&mut self, removed: &[(u32, Vec<HashRange>)], skip: u32) -> Result<()> {
        if self.mode != DispatchMode::Draining {
            return Ok(());
        }
        // The owners whose ranges moved (by seat), then one pass over what is in flight.
        let mut watched: Vec<Vec<usize>> = Vec::new();
        for (k, (owner, ranges)) in removed.iter().enumerate() {
            if *owner == skip || ranges.is_empty() {
                continue;
            }
            let Some(&seat) = self.seat_of.get(owner) else {
                continue;
            };
            if watched.len() <= seat {
                watched.resize(seat + 1, Vec::new());
            }
            watched[seat].push(k);
        }
        if watched.is_empty() {
            return self.release_returned();
        }
        let mut moved: Vec<BTreeMap<u32, u32>> = vec![BTreeMap::new(); removed.len()];
        self.inflight.for_each(|seat, slot| {
            let h = u32::from(slot);
            for &k in watched.get(seat).map_or(&[][..], Vec::as_slice) {
                let ranges = &removed[k].1;
                let i = ranges.partition_point(|r| r.0 <= h);
                if i > 0 && h <= ranges[i - 1].1 {
                    *moved[k].entry(h).or_insert(0) += 1;
                }
            }
        });
        for (k, hashes) in moved.into_iter().enumerate() {
            let owner = removed[k].0;
            for (h, n) in hashes {
                // A hash draining already counts every pending message of it: counting again would
                // leak a reference when a hash moves away, back and away again.
                if self.draining.owner(h)?.is_none() {
                    for _ in 0..n {
                        self.draining.add_entry(owner, h)?;
                    }
                }
            }
        }
        self.release_returned()
    }

    /// Releases draining hashes whose slot now belongs to the consumer they drain on (Pulsar 4.x
    /// does it at once, firing the unblock if the hash held someone back).
    fn release_returned(&mut self) -> Result<()> {
        if self.draining.is_empty() {
            return Ok(());
        }
        for e in self.draining.entries(None) {
            let seat = self.owners[e.hash as usize];
            let now = self
                .seats
                .get(seat as usize)
                .and_then(Option::as_ref)
                .map(|s| s.id);
            if now == Some(e.owner) {
                self.draining.should_block(e.owner, e.hash)?;
                if e.blocked_attempts > 0 {
                    self.unblocked += 1;
                }
            }
        }
        Ok(())
    }

    /// A flow request: `n` more messages may go to consumer `id`.
    pub fn add_permits(&mut self, id: u32, n: u64) -> Result<()> {
        let seat = self.seat(id)?;
        let s = self.state(seat);
        s.progress += 1;
        let before = s.permits;
        s.permits = before.saturating_add(n);
        let added = s.permits - before;
        self.permits += u128::from(added);
        Ok(())
    }

    /// Permits available over all consumers (O(1): kept as they change).
    pub fn permits_total(&self) -> u64 {
        u64::try_from(self.permits).unwrap_or(u64::MAX)
    }
}
