//! Stuck-consumer isolation (beyond Pulsar, opt-in): a hung consumer's keys stop filling the
//! replay queue.
//!
//! In Pulsar a consumer that stops acking keeps its keys' entries in the replay queue, read after
//! read, until the queue reaches the look-ahead limit and reads stop for everyone (PIP-474's
//! "global blackout"; the classic dispatcher grows it until the broker runs out of memory).
//! Here the caller's policy marks such a consumer stuck ([`DispatchCore::set_stuck`]); from then
//! on every entry of a slot it owns that cannot be sent is *spilled*: dropped from memory, its
//! slot marked, the span of spilled positions kept (two positions). Other consumers' entries keep
//! the replay queue and the look-ahead to themselves. A marked slot spills everything of it,
//! whoever owns it later, so that nothing of the slot overtakes what was spilled.
//!
//! When the consumer recovers (or leaves and its slots move), the caller takes the span
//! ([`DispatchCore::take_reread`]), reads those entries again from its log and hands them back
//! ([`DispatchCore::add_reread`]): each one that nothing accounts for (not acknowledged, not in
//! flight, not queued, not held by a delayed-delivery tracker, not a read waiting to dispatch) was
//! spilled, and goes back to the replay queue, in position order, before the slot's newer entries.
//! Nothing is lost and nothing acknowledged is sent again; memory is O(1) per spill.

use super::*;

/// Words of the spilled-slot bitmap.
const WORDS: usize = SLOTS / 64;

/// What is spilled.
#[derive(Debug, Clone)]
pub(super) struct Spill {
    /// Bit per slot: its entries are spilled until a re-read brings them back.
    slots: Box<[u64]>,
    /// The span of positions spilled and not handed out for re-reading yet.
    span: Option<(Position, Position)>,
    /// The span handed out by `take_reread` and not brought back yet.
    reading: Option<(Position, Position)>,
    /// Entries spilled, in total.
    spilled: u64,
    /// Entries brought back by re-reads, in total.
    brought_back: u64,
}

impl Spill {
    fn new() -> Self {
        Self {
            slots: vec![0; WORDS].into_boxed_slice(),
            span: None,
            reading: None,
            spilled: 0,
            brought_back: 0,
        }
    }

    /// Forgets what is spilled (the dispatcher released everything read), totals kept.
    pub(super) fn forget(&mut self) {
        self.slots.fill(0);
        self.span = None;
        self.reading = None;
    }

    /// The lowest position spilled and not brought back (to re-read or being re-read).
    #[inline]
    fn lowest(&self) -> Option<Position> {
        match (self.span, self.reading) {
            (Some(a), Some(b)) => Some(a.0.min(b.0)),
            (a, b) => a.or(b).map(|(lo, _)| lo),
        }
    }

    #[inline]
    fn has(&self, slot: u16) -> bool {
        self.slots[usize::from(slot) / 64] >> (slot % 64) & 1 == 1
    }

    fn set_slots(&self) -> impl Iterator<Item = u16> + '_ {
        self.slots.iter().enumerate().flat_map(|(w, &bits)| {
            (0..64u16)
                .filter(move |b| bits >> b & 1 == 1)
                .map(move |b| (w as u16) * 64 + b)
        })
    }
}

/// Stuck-consumer isolation's figures.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IsolationFigures {
    /// Consumers marked stuck.
    pub stuck: u64,
    /// Slots whose entries are spilled.
    pub spilled_slots: u64,
    /// The spilled span waiting to be re-read (or being re-read).
    pub span: Option<(Position, Position)>,
    /// Entries spilled, in total.
    pub spilled: u64,
    /// Entries brought back by re-reads, in total.
    pub brought_back: u64,
}

fn widen(span: Option<(Position, Position)>, p: Position) -> (Position, Position) {
    match span {
        Some((lo, hi)) => (lo.min(p), hi.max(p)),
        None => (p, p),
    }
}

impl DispatchCore {
    /// Beyond Pulsar: marks consumer `id` stuck (or no longer): while stuck, entries of the slots
    /// it owns that cannot be sent are spilled instead of queued (see the module `isolation`).
    /// The policy — no acks for a while with messages unacknowledged, permits at 0 — is the
    /// caller's; [`ConsumerFigures::progress`] is what it watches.
    pub fn set_stuck(&mut self, id: u32, stuck: bool) -> Result<()> {
        let seat = self.seat(id)?;
        let s = self.state(seat);
        if s.stuck == stuck {
            return Ok(());
        }
        s.stuck = stuck;
        if stuck {
            self.stuck_count += 1;
            if self.spill.is_none() {
                self.spill = Some(Box::new(Spill::new()));
            }
        } else {
            self.stuck_count -= 1;
        }
        Ok(())
    }

    /// Whether consumer `id` is marked stuck.
    pub fn is_stuck(&self, id: u32) -> Result<bool> {
        Ok(self.occupant(self.seat(id)?)?.stuck)
    }

    /// Whether `pos` of `slot` must spill behind what its slot spilled: the slot has entries
    /// spilled and `pos` is not older than every spilled entry (an older one, brought back by a
    /// re-read or come back otherwise, goes first).
    #[inline]
    pub(super) fn spilling(&self, slot: u16, pos: Position) -> bool {
        self.spill
            .as_ref()
            .is_some_and(|s| s.has(slot) && s.lowest().is_some_and(|lo| pos >= lo))
    }

    /// Whether `slot`'s owner is marked stuck.
    #[inline]
    pub(super) fn owner_stuck(&self, slot: u16) -> bool {
        self.stuck_count > 0
            && self
                .seats
                .get(self.owners[usize::from(slot)] as usize)
                .and_then(Option::as_ref)
                .is_some_and(|s| s.stuck)
    }

    /// Drops `pos` (of `slot`) from memory, out of the replay queue too: its slot spills from now
    /// on. An entry the cursor acknowledged meanwhile is dropped as such instead.
    pub(super) fn spill_entry(&mut self, pos: Position, slot: u16, cursor: &Cursor) -> Result<()> {
        if cursor.is_acked(pos.ledger_id, pos.entry_id)? {
            self.drop_acked(pos);
            return Ok(());
        }
        self.replay.remove(pos);
        let spill = self.spill.get_or_insert_with(|| Box::new(Spill::new()));
        spill.slots[usize::from(slot) / 64] |= 1 << (slot % 64);
        spill.span = Some(widen(spill.span, pos));
        spill.spilled += 1;
        Ok(())
    }

    /// The span of positions to read again for the spilled entries, when some spilled slot's
    /// owner is no longer stuck (or nobody owns it): `(first, last)`, inclusive. Read every
    /// entry of it and hand them to [`add_reread`](Self::add_reread) before the next dispatch.
    /// None when there is nothing to re-read now, or a re-read is under way.
    pub fn take_reread(&mut self) -> Option<(Position, Position)> {
        let ready = {
            let spill = self.spill.as_ref()?;
            if spill.span.is_none() || spill.reading.is_some() {
                return None;
            }
            spill.set_slots().any(|slot| !self.owner_stuck(slot))
        };
        if !ready {
            return None;
        }
        let spill = self.spill.as_mut()?;
        spill.reading = spill.span.take();
        spill.reading
    }

    /// Entries read again for the span [`take_reread`](Self::take_reread) handed out (ledger,
    /// entry and slot columns, in any order; entries outside the span are ignored). Those nothing
    /// accounts for were spilled: they join the replay queue, in position order, unless their
    /// slot's owner is still stuck, and at most `limit` of them (None: no limit; the rest of the
    /// span stays spilled and is handed out again, so the replay queue stays bounded while a
    /// long backlog comes back). Once a span is brought back whole, the slots no stuck consumer
    /// owns stop spilling. Returns how many came back. Checked first: on error nothing changes.
    pub fn add_reread(
        &mut self,
        ledgers: &[i64],
        entries: &[i64],
        slots: &[i64],
        limit: Option<usize>,
        cursor: &Cursor,
    ) -> Result<usize> {
        let positions = positions_of(ledgers, entries)?;
        same_len(positions.len(), slots.len(), "positions and slots")?;
        let slots = slots_of(slots)?;
        let Some((lo, hi)) = self.spill.as_ref().and_then(|s| s.reading) else {
            return Err(CoreError::InvalidArgument(
                "no re-read under way: take_reread() hands out the span to read".into(),
            ));
        };
        let mut span: Vec<(Position, u16)> = positions
            .into_iter()
            .zip(slots)
            .filter(|&(p, _)| lo <= p && p <= hi)
            .collect();
        span.sort_unstable();
        let waiting: FastMap<Position, ()> = self
            .incoming
            .iter()
            .flat_map(|r| r.positions.iter().map(|&p| (p, ())))
            .collect();
        let mut back = 0;
        let mut rest: Option<Position> = None;
        let mut still: Vec<Position> = Vec::new();
        for (p, slot) in span {
            if cursor.is_acked(p.ledger_id, p.entry_id)? {
                if !self.redeliveries.is_empty() {
                    self.redeliveries.remove(&p); // spilled, then acknowledged (a skip): its count goes
                }
                continue;
            }
            let accounted = self.inflight.get(p).is_some()
                || self.replay.contains(p)
                || self.delayed_slots.contains(p)
                || waiting.contains_key(&p);
            if accounted {
                continue;
            }
            if self.owner_stuck(slot) {
                still.push(p); // its owner is still stuck: it stays spilled
                continue;
            }
            if limit.is_some_and(|l| back >= l) {
                rest = Some(p); // the budget is spent: from here on, the next re-read's
                break;
            }
            self.replay.insert(p, slot);
            back += 1;
        }
        let stuck_slots: Vec<u16> = match self.spill.as_ref() {
            Some(spill) => spill
                .set_slots()
                .filter(|&slot| self.owner_stuck(slot))
                .collect(),
            None => Vec::new(),
        };
        if let Some(spill) = self.spill.as_mut() {
            spill.reading = None;
            spill.brought_back += back as u64;
            if let Some(from) = rest {
                spill.span = Some(widen(Some(widen(spill.span, from)), hi));
            }
            // Slots stop spilling once nothing of theirs is left to read again (a spill since
            // the span was taken, or a rest past the budget, keeps every slot spilling).
            if spill.span.is_none() {
                spill.slots.fill(0);
                for slot in stuck_slots {
                    spill.slots[usize::from(slot) / 64] |= 1 << (slot % 64);
                }
            }
            for p in still {
                spill.span = Some(widen(spill.span, p));
            }
            if spill.span.is_none() && self.stuck_count == 0 && spill.slots.iter().all(|&w| w == 0)
            {
                let (spilled, brought_back) = (spill.spilled, spill.brought_back);
                // Nothing spilled and nobody stuck: the next spill starts afresh (totals kept).
                **spill = Spill::new();
                spill.spilled = spilled;
                spill.brought_back = brought_back;
            }
        }
        Ok(back)
    }

    /// Stuck-consumer isolation's figures.
    pub fn isolation_figures(&self) -> IsolationFigures {
        let Some(spill) = &self.spill else {
            return IsolationFigures::default();
        };
        let span = match (spill.span, spill.reading) {
            (Some(a), Some(b)) => Some((a.0.min(b.0), a.1.max(b.1))),
            (a, b) => a.or(b),
        };
        IsolationFigures {
            stuck: self.stuck_count as u64,
            spilled_slots: spill.slots.iter().map(|w| u64::from(w.count_ones())).sum(),
            span,
            spilled: spill.spilled,
            brought_back: spill.brought_back,
        }
    }
}
