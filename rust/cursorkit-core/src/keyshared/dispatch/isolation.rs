//! Stuck-consumer isolation (beyond Pulsar, opt-in): a hung consumer's keys stop filling the
//! replay queue.
//!
//! In Pulsar a consumer that stops acking keeps its keys' entries in the replay queue, read after
//! read, until the queue reaches the look-ahead limit and reads stop for everyone (PIP-474's
//! "global blackout"; the classic dispatcher grows it until the broker runs out of memory).
//! Here the caller's policy marks such a consumer stuck ([`DispatchCore::set_stuck`]); from then
//! on every entry of a slot it owns that cannot be sent is *spilled*: dropped from memory, its
//! slot marked with the span of its spilled positions (two positions per slot). Other consumers'
//! entries keep the replay queue and the look-ahead to themselves. A marked slot spills every
//! entry of it not older than its spilled ones, whoever owns it later, so that nothing of the
//! slot overtakes what was spilled.
//!
//! When the consumer recovers (or leaves and its slots move), the caller takes the span to read
//! again ([`DispatchCore::take_reread`]): the union of the marked slots' spans whose owner is not
//! stuck (a span of stuck consumers' slots only is never handed out). It reads those entries from
//! its log, all of them or a first part, and hands them back ([`DispatchCore::add_reread`]): each
//! one of such a slot that nothing accounts for (not acknowledged, not in flight, not queued, not
//! held by a delayed-delivery tracker, not a read waiting to dispatch) was spilled, and goes back
//! to the replay queue, in position order, before the slot's newer entries. What was read is done
//! with: those slots' spans start after it (or end), so each spilled entry is read back once per
//! spill and a re-read costs the part of the span not read yet. Entries of slots still owned by a
//! stuck consumer stay spilled, untouched, until their owner recovers. Nothing is lost and nothing
//! acknowledged is sent again; memory is a bitmap and O(1) per spilled slot.

use super::*;

/// Words of the spilled-slot bitmap.
const WORDS: usize = SLOTS / 64;

/// What is spilled.
#[derive(Debug, Clone)]
pub(super) struct Spill {
    /// Bit per slot: it has entries spilled (its span is in `spans`).
    slots: Box<[u64]>,
    /// Per slot with entries spilled: the lowest and highest position of them not brought back
    /// (the lowest may be a lower bound: nothing of the slot below it is spilled).
    spans: FastMap<u16, (Position, Position)>,
    /// The span handed out by `take_reread` and not brought back yet.
    reading: Option<(Position, Position)>,
    /// Entries spilled, in total.
    spilled: u64,
    /// Entries brought back by re-reads, in total.
    brought_back: u64,
    /// Spilled entries re-reads found, in total.
    read_back: u64,
}

impl Spill {
    fn new() -> Self {
        Self {
            slots: vec![0; WORDS].into_boxed_slice(),
            spans: FastMap::default(),
            reading: None,
            spilled: 0,
            brought_back: 0,
            read_back: 0,
        }
    }

    /// Forgets what is spilled (the dispatcher released everything read), totals kept.
    pub(super) fn forget(&mut self) {
        self.slots.fill(0);
        self.spans = FastMap::default();
        self.reading = None;
    }

    #[inline]
    fn has(&self, slot: u16) -> bool {
        self.slots[usize::from(slot) / 64] >> (slot % 64) & 1 == 1
    }

    /// `slot`'s spilled span, if it has one.
    #[inline]
    fn span_of(&self, slot: u16) -> Option<(Position, Position)> {
        if self.has(slot) {
            self.spans.get(&slot).copied()
        } else {
            None
        }
    }

    fn unmark(&mut self, slot: u16) {
        self.slots[usize::from(slot) / 64] &= !(1 << (slot % 64));
        self.spans.remove(&slot);
    }

    /// Heap bytes held (the bitmap and the per-slot spans).
    pub(super) fn heap_bytes(&self) -> usize {
        WORDS * 8 + crate::mem::map_bytes(&self.spans)
    }
}

/// Stuck-consumer isolation's figures.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IsolationFigures {
    /// Consumers marked stuck.
    pub stuck: u64,
    /// Slots whose entries are spilled.
    pub spilled_slots: u64,
    /// The positions spanned by what is spilled (first, last), to read again in parts.
    pub span: Option<(Position, Position)>,
    /// Entries spilled, in total.
    pub spilled: u64,
    /// Entries brought back by re-reads, in total.
    pub brought_back: u64,
    /// Spilled entries re-reads found, in total: at most one per spill (`spilled`).
    pub read_back: u64,
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
    /// spilled and `pos` is not older than every one of them (an older one, brought back by a
    /// re-read or come back otherwise, goes first).
    #[inline]
    pub(super) fn spilling(&self, slot: u16, pos: Position) -> bool {
        self.spill
            .as_ref()
            .and_then(|s| s.span_of(slot))
            .is_some_and(|(lo, _)| pos >= lo)
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
        let span = spill.spans.get(&slot).copied();
        spill.spans.insert(slot, widen(span, pos));
        spill.spilled += 1;
        Ok(())
    }

    /// The span of positions to read again for spilled entries that can come back now: the
    /// union of the spans of the spilled slots whose owner is not stuck (or that nobody owns),
    /// `(first, last)`, inclusive. Read the entries from `first` on — all of the span, or a first
    /// part of it — and hand them to [`add_reread`](Self::add_reread) before the next dispatch.
    /// None when nothing can come back now (every spilled slot's owner is stuck). A span handed
    /// out and not brought back yet is handed out again, as it was.
    pub fn take_reread(&mut self) -> Option<(Position, Position)> {
        let spill = self.spill.as_ref()?;
        if spill.reading.is_some() {
            return spill.reading;
        }
        let mut span: Option<(Position, Position)> = None;
        for (&slot, &(lo, hi)) in &spill.spans {
            if !self.owner_stuck(slot) {
                span = Some(widen(Some(widen(span, lo)), hi));
            }
        }
        let span = span?;
        self.spill.as_mut()?.reading = Some(span);
        Some(span)
    }

    /// Entries read again for the span [`take_reread`](Self::take_reread) handed out (ledger,
    /// entry and slot columns, in any order): every entry of the log from its first position
    /// through `read_to` (None: through its last; entries outside are ignored). Those of a slot
    /// whose owner is not stuck that nothing accounts for were spilled: they join the replay
    /// queue, in position order, at most `limit` of them (None: no limit). What was read is done
    /// with: the next span handed out starts after it (or at the first entry past the budget), so
    /// each spilled entry is read back once per spill and the replay queue stays bounded while a
    /// long backlog comes back; a slot with nothing left spilled stops spilling. Entries of slots
    /// whose owner is stuck stay spilled. Returns how many came back. Checked first: on error
    /// nothing changes.
    pub fn add_reread(
        &mut self,
        ledgers: &[i64],
        entries: &[i64],
        slots: &[i64],
        limit: Option<usize>,
        read_to: Option<Position>,
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
        if let Some(to) = read_to {
            check_entry(to.ledger_id, to.entry_id)?;
            if to < lo {
                return Err(CoreError::InvalidArgument(format!(
                    "read_to {to} is before the span handed out, which starts at {lo}"
                )));
            }
        }
        let end = read_to.map_or(hi, |to| to.min(hi));
        let mut span: Vec<(Position, u16)> = positions
            .into_iter()
            .zip(slots)
            .filter(|&(p, _)| lo <= p && p <= end)
            .collect();
        span.sort_unstable();
        let waiting: FastMap<Position, ()> = self
            .incoming
            .iter()
            .flat_map(|r| r.positions.iter().map(|&p| (p, ())))
            .collect();
        let mut back = 0;
        let mut rest: Option<Position> = None;
        for (p, slot) in span {
            // Only a slot whose whole span was handed out (its owner not stuck) brings back.
            let Some((from, to)) = self.spill.as_ref().and_then(|s| s.span_of(slot)) else {
                continue; // nothing of the slot is spilled
            };
            if p < from || p > to || from < lo || self.owner_stuck(slot) {
                continue;
            }
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
            if limit.is_some_and(|l| back >= l) {
                rest = Some(p); // the budget is spent: from here on, the next re-read's
                break;
            }
            self.replay.insert(p, slot);
            back += 1;
        }
        // Everything before `done` is done with, for each slot that could bring back.
        let done = rest.unwrap_or(Position {
            ledger_id: end.ledger_id,
            entry_id: end.entry_id + 1,
        });
        let finished: Vec<(u16, (Position, Position))> = match self.spill.as_ref() {
            Some(spill) => spill
                .spans
                .iter()
                .filter(|&(&slot, &(from, _))| from >= lo && !self.owner_stuck(slot))
                .map(|(&slot, &span)| (slot, span))
                .collect(),
            None => Vec::new(),
        };
        if let Some(spill) = self.spill.as_mut() {
            for (slot, (from, to)) in finished {
                if to < done {
                    spill.unmark(slot);
                } else {
                    spill.spans.insert(slot, (from.max(done), to));
                }
            }
            spill.reading = None;
            spill.brought_back += back as u64;
            spill.read_back += back as u64;
        }
        Ok(back)
    }

    /// Stuck-consumer isolation's figures.
    pub fn isolation_figures(&self) -> IsolationFigures {
        let Some(spill) = &self.spill else {
            return IsolationFigures::default();
        };
        let span = spill
            .spans
            .values()
            .fold(None, |acc, &(lo, hi)| Some(widen(Some(widen(acc, lo)), hi)));
        IsolationFigures {
            stuck: self.stuck_count as u64,
            spilled_slots: spill.spans.len() as u64,
            span,
            spilled: spill.spilled,
            brought_back: spill.brought_back,
            read_back: spill.read_back,
        }
    }

    /// Heap bytes stuck-consumer isolation holds (0 before anyone was marked stuck).
    pub fn isolation_memory(&self) -> usize {
        self.spill.as_ref().map_or(0, |s| s.heap_bytes())
    }
}
