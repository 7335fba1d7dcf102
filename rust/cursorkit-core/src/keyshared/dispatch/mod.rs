//! `DispatchCore`: a Key_Shared subscription's per-entry dispatch loop and its ack bookkeeping.
//!
//! One read at a time (columns of positions and sticky-key slots) goes in; per-consumer position
//! columns come out. In between, every rule of a Key_Shared dispatcher runs here: the replay queue
//! first and in position order, a new entry waiting behind an earlier message of its slot, the
//! owner table (slot → consumer, refreshed from the selector on each membership change), permits,
//! PIP-379's draining gate or PIP-282's last-sent restriction, and what each consumer has in flight
//! (one window per ledger indexed by position, about 4 bytes a message). Acks (single, bulk, from
//! any consumer), nacks, redelivery and consumer removal update the same state and the cursor in
//! one call.
//!
//! The cursor may also be acknowledged outside the core at any moment (a skip, TTL, a shared
//! cursor), even for a message a consumer holds: a position coming back to the replay queue is
//! checked against the cursor then, and again as it is about to be sent, so an acknowledged
//! position is never sent again. Redelivery counts follow Pulsar's tracker: nacks and redelivery
//! raise them, a leaver's messages do not, an ack drops one, the last consumer leaving clears all.
//!
//! The selector stays outside: the caller hands the owner table over with [`DispatchCore::set_owners`]
//! and the ranges a change moved with [`DispatchCore::register_moved`]. Look-ahead limits and pausing
//! are policy and stay with the caller too; [`DispatchCore::permits_total`] and
//! [`DispatchCore::replay_len`] are what they need.
//!
//! A Rust broker drives it like this:
//!
//! ```
//! use cursorkit_core::{
//!     AutoSplitSelector, Cursor, DispatchCore, DispatchMode, Position, StickyKeySelector,
//! };
//! let mut cursor = Cursor::new(Position::new(1, -1).unwrap(), false);
//! let mut selector = AutoSplitSelector::new(65536).unwrap();
//! let mut core = DispatchCore::new(DispatchMode::Draining);
//!
//! // Consumers: the selector owns the slot ranges, the core the dispatch state.
//! for (id, name) in [(1, "a"), (2, "b")] {
//!     let impact = selector.add_consumer(id, name, &[]).unwrap();
//!     core.add_consumer(id, 10, &cursor).unwrap();
//!     core.set_owners_from(selector.table()).unwrap();
//!     core.register_moved(&impact.removed, id).unwrap();
//! }
//!
//! // One read: entries 1:0..1:3 with their slots.
//! let ledgers = [1, 1, 1, 1];
//! let entries = [0, 1, 2, 3];
//! let slots = [7, 40000, 7, 40000];
//! core.add_read(&ledgers, &entries, &slots, &cursor).unwrap();
//! let out = core.dispatch(&cursor).unwrap();
//! assert_eq!(out.len(), 2);
//! let sent: usize = out.iter().map(|d| d.entries.len()).sum();
//! assert_eq!(sent, 4);
//!
//! // Acks from each consumer reach the cursor; mark-delete moves.
//! for d in &out {
//!     core.ack(d.consumer, &d.ledgers, &d.entries, &mut cursor).unwrap();
//! }
//! assert_eq!(cursor.mark_delete(), Position::new(1, 3).unwrap());
//! ```

mod inflight;
mod last_sent;
mod replay;

use std::collections::BTreeMap;

use crate::ackstate::position::{check_entries, check_entry};
use crate::bits::set_bits;
use crate::error::{CoreError, Result};
use crate::keyshared::draining::DrainingHashes;
use crate::keyshared::selector::{HashRange, SlotTable};
use crate::mem::FastMap;
use crate::{Cursor, Position, RangeSet};

use inflight::{InFlight, SlotsOf};
use last_sent::LastSent;
use replay::ReplayQueue;

/// The slot space: sticky-key hash slots are `1..SLOTS` (Pulsar's `DEFAULT_RANGE_SIZE`).
pub const SLOTS: usize = 1 << 16;

/// A table value for a slot nobody owns.
const NOBODY: u32 = u32::MAX;

/// The ordering rule of a Key_Shared subscription.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DispatchMode {
    /// PIP-379 (Pulsar 4.x): a moved hash stays with its previous owner while it has it unacked.
    Draining,
    /// PIP-282 (Pulsar 3.3): a joiner gets positions up to the last sent position at its join.
    LastSent,
    /// `allowOutOfOrderDelivery`: the selector and permits only.
    OutOfOrder,
}

/// Why a slot was held back at the last dispatch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockReason {
    /// No consumer owns the slot.
    NoConsumer,
    /// Its owner has no permits.
    NoPermits,
    /// The slot drains on another consumer (PIP-379).
    Draining,
    /// The owner joined recently and the position lies beyond its limit (PIP-282).
    RecentlyJoined,
    /// An earlier message of the slot waits in the replay queue.
    ReplayOrder,
}

/// A slot held back: why, on whom, and the first position held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Blocked {
    /// The reason.
    pub reason: BlockReason,
    /// The target consumer.
    pub consumer: Option<u32>,
    /// For [`BlockReason::Draining`]: the consumer the slot drains on.
    pub owner: Option<u32>,
    /// The first position held back.
    pub position: Position,
}

/// One consumer's share of a dispatch: positions as columns, in send order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Delivery {
    /// The consumer id.
    pub consumer: u32,
    /// Ledger ids.
    pub ledgers: Vec<i64>,
    /// Entry ids.
    pub entries: Vec<i64>,
}

/// A whole dispatch in four flat columns (no allocation per consumer): delivery `i` is consumer
/// `consumers[i]` with positions `ends[i - 1]..ends[i]` (from 0 for the first) of `ledgers`/`entries`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Dispatched {
    /// Consumer ids, in the order each was first sent to.
    pub consumers: Vec<u32>,
    /// Where each consumer's positions end in the columns.
    pub ends: Vec<usize>,
    /// Ledger ids, grouped by consumer, each group in send order.
    pub ledgers: Vec<i64>,
    /// Entry ids, alike.
    pub entries: Vec<i64>,
}

impl Dispatched {
    /// Deliveries (consumers sent to).
    pub fn len(&self) -> usize {
        self.consumers.len()
    }

    /// Whether nothing was sent.
    pub fn is_empty(&self) -> bool {
        self.consumers.is_empty()
    }

    /// Each delivery as `(consumer, ledger ids, entry ids)`.
    pub fn iter(&self) -> impl Iterator<Item = (u32, &[i64], &[i64])> {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        self.consumers
            .iter()
            .zip(starts.zip(self.ends.iter().copied()))
            .map(|(&c, (a, b))| (c, &self.ledgers[a..b], &self.entries[a..b]))
    }

    /// One [`Delivery`] per consumer.
    pub fn into_deliveries(self) -> Vec<Delivery> {
        self.iter()
            .map(|(consumer, l, e)| Delivery {
                consumer,
                ledgers: l.to_vec(),
                entries: e.to_vec(),
            })
            .collect()
    }
}

/// What an ack call did, as Pulsar accepts acks: every well-formed ack reaches the cursor.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AckOutcome {
    /// Positions pending on the acking consumer.
    pub acked: u64,
    /// Positions pending on another consumer (removed there).
    pub from_other_consumer: u64,
    /// Positions pending on nobody (never sent, or waiting in replay): acked on the cursor.
    pub not_pending: u64,
    /// Positions the cursor had acknowledged already.
    pub duplicates: u64,
    /// Draining slots the acks unblocked.
    pub unblocked: u64,
}

/// Why each slot was first held back in the current dispatch: a flat index per slot, so noting a
/// reason is one array read however long the replay queue is.
#[derive(Debug, Clone)]
struct BlockedSlots {
    /// Slot → 1 + index in `reasons`, or 0.
    at: Box<[u32]>,
    reasons: Vec<(u16, Blocked)>,
}

impl Default for BlockedSlots {
    fn default() -> Self {
        Self {
            at: vec![0; SLOTS].into_boxed_slice(),
            reasons: Vec::new(),
        }
    }
}

impl BlockedSlots {
    #[inline]
    fn note(&mut self, slot: u16, b: Blocked) {
        let at = &mut self.at[usize::from(slot)];
        if *at == 0 {
            self.reasons.push((slot, b));
            *at = self.reasons.len() as u32;
        }
    }

    fn clear(&mut self) {
        for (slot, _) in self.reasons.drain(..) {
            self.at[usize::from(slot)] = 0;
        }
    }

    fn sorted(&self) -> Vec<(u16, Blocked)> {
        let mut out = self.reasons.clone();
        out.sort_unstable_by_key(|(s, _)| *s);
        out
    }
}

/// One consumer's state.
#[derive(Debug, Clone)]
struct Seat {
    id: u32,
    permits: u64,
    delivered: u64,
    joined_last_sent: Option<Position>,
}

/// A read waiting for dispatch.
#[derive(Debug, Clone)]
struct Read {
    positions: Vec<Position>,
    slots: Vec<u16>,
    /// The cursor's mutation count at the read: when it moved, an entry may have been acked since.
    mutations: u64,
}

/// Per-consumer figures for stats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConsumerFigures {
    /// Permits left.
    pub permits: u64,
    /// Messages sent and not acknowledged.
    pub unacked: u64,
    /// Messages sent in total.
    pub delivered: u64,
    /// PIP-282: the last sent position when it joined (if it joined with messages outstanding).
    pub joined_last_sent: Option<Position>,
}

/// The dispatch state of one Key_Shared subscription (see the module docs).
#[derive(Debug, Clone)]
pub struct DispatchCore {
    mode: DispatchMode,
    /// Slot → seat index, or [`NOBODY`].
    owners: Box<[u32]>,
    seats: Vec<Option<Seat>>,
    seat_of: FastMap<u32, usize>,
    draining: DrainingHashes,
    replay: ReplayQueue,
    incoming: Vec<Read>,
    blocked: BlockedSlots,
    unblocked: u64,
    dropped_acked: u64,
    /// Redelivery counts (Pulsar's redelivery tracker), only of positions pending or in replay.
    redeliveries: FastMap<Position, u32>,
    rewind: Option<Position>,
    highest_read: Option<Position>,
    last_sent: LastSent,
    /// Per-dispatch scratch: seat → index in the output, or `usize::MAX`.
    out_index: Vec<usize>,
    /// Per-dispatch scratch: each position sent, with its consumer's index in the output.
    sent: Vec<(u32, Position)>,
    /// Permits over every seat, kept as they change (a read check must not walk the consumers).
    permits: u128,
    /// Positions a delayed-delivery tracker holds, with their slots, until they come back due.
    delayed_slots: SlotsOf,
    /// Every message in flight: position → consumer seat and slot (an ack, a nack or "who
    /// holds it?" is one lookup).
    inflight: InFlight,
}

/// Acks at most this many go one by one (bulk set-up costs more than it saves).
const FEW_ACKS: usize = 32;

/// Checks a slot: `1..SLOTS` (0 is Pulsar's "no hash").
#[inline]
fn check_slot(slot: i64) -> Result<u16> {
    match u16::try_from(slot) {
        Ok(s) if s != 0 => Ok(s),
        _ => Err(CoreError::InvalidArgument(format!(
            "slot {slot} is outside 1..=65535 (a sticky-key hash slot)"
        ))),
    }
}

fn same_len(a: usize, b: usize, what: &str) -> Result<()> {
    if a == b {
        Ok(())
    } else {
        Err(CoreError::InvalidArgument(format!(
            "{what} differ in length: {a} and {b}"
        )))
    }
}

/// Position columns of equal length, every id valid: checked before anything changes.
fn check_positions(ledgers: &[i64], entries: &[i64]) -> Result<()> {
    same_len(ledgers.len(), entries.len(), "ledger and entry columns")?;
    check_entries(ledgers, entries)
}

fn positions_of(ledgers: &[i64], entries: &[i64]) -> Result<Vec<Position>> {
    check_positions(ledgers, entries)?;
    Ok(ledgers
        .iter()
        .zip(entries)
        .map(|(&ledger_id, &entry_id)| Position {
            ledger_id,
            entry_id,
        })
        .collect())
}

/// Every slot checked to be in `1..=65535`.
fn check_slots(slots: &[i64]) -> Result<()> {
    if slots.iter().all(|&s| (s.wrapping_sub(1) as u64) < 65535) {
        return Ok(());
    }
    slots.iter().try_for_each(|&s| check_slot(s).map(|_| ()))
}

/// The slots of a read as `u16`, every one checked to be in `1..=65535` first.
fn slots_of(slots: &[i64]) -> Result<Vec<u16>> {
    if slots.iter().all(|&s| (s.wrapping_sub(1) as u64) < 65535) {
        return Ok(slots.iter().map(|&s| s as u16).collect());
    }
    slots.iter().map(|&s| check_slot(s)).collect()
}

fn unknown(id: u32) -> CoreError {
    CoreError::UnknownConsumer(format!("consumer {id} is not registered"))
}

impl DispatchCore {
    /// An empty subscription in `mode`.
    pub fn new(mode: DispatchMode) -> Self {
        Self {
            mode,
            owners: vec![NOBODY; SLOTS].into_boxed_slice(),
            seats: Vec::new(),
            seat_of: FastMap::default(),
            draining: DrainingHashes::new(),
            replay: ReplayQueue::default(),
            incoming: Vec::new(),
            blocked: BlockedSlots::default(),
            unblocked: 0,
            dropped_acked: 0,
            redeliveries: FastMap::default(),
            rewind: None,
            highest_read: None,
            last_sent: LastSent::default(),
            out_index: Vec::new(),
            sent: Vec::new(),
            permits: 0,
            delayed_slots: SlotsOf::default(),
            inflight: InFlight::default(),
        }
    }

    /// The ordering mode.
    pub fn mode(&self) -> DispatchMode {
        self.mode
    }

    fn seat(&self, id: u32) -> Result<usize> {
        self.seat_of.get(&id).copied().ok_or_else(|| unknown(id))
    }

    /// The consumer in `seat` (a seat taken from `seat_of` or from what is in flight, both of
    /// which hold registered seats only; anything else is an internal error, never a panic).
    fn occupant(&self, seat: usize) -> Result<&Seat> {
        self.seats
            .get(seat)
            .and_then(Option::as_ref)
            .ok_or_else(|| CoreError::Internal(format!("seat {seat} holds no consumer")))
    }

    fn state(&mut self, seat: usize) -> &mut Seat {
        // Seats in `seat_of` are always occupied.
        self.seats[seat].as_mut().expect("registered seat")
    }

    /// Number of registered consumers.
    pub fn len(&self) -> usize {
        self.seat_of.len()
    }

    /// Whether no consumer is registered.
    pub fn is_empty(&self) -> bool {
        self.seat_of.is_empty()
    }

    // --- consumers ------------------------------------------------------------------------------

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
        self.permits -= u128::from(state.permits);
        for o in self.owners.iter_mut() {
            if *o as usize == seat {
                *o = NOBODY;
            }
        }
        let returned = self.inflight.remove_seat(seat);
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

    // --- entries in -----------------------------------------------------------------------------

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
        self.incoming.push(Read {
            positions,
            slots,
            mutations: cursor.mutations(),
        });
        Ok(())
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
        for &slot in slots {
            check_slot(slot)?; // every slot first: a bad one changes nothing
        }
        for ((&ledger_id, &entry_id), &slot) in ledgers.iter().zip(entries).zip(slots) {
            let p = Position {
                ledger_id,
                entry_id,
            };
            self.delayed_slots.insert(p, slot as u16);
        }
        Ok(())
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
        if self.seat_of.is_empty() {
            self.drop_everything_read(cursor.mark_delete());
            return Ok(());
        }
        let position = |i: usize| Position {
            ledger_id: ledgers[i],
            entry_id: entries[i],
        };
        // The held entries go in by runs of one ledger.
        let mut kept = 0;
        let mut run: Vec<(u32, u16)> = Vec::new();
        let mut run_ledger = None;
        for i in set_bits(held) {
            if run_ledger != Some(ledgers[i]) {
                if let Some(l) = run_ledger {
                    self.delayed_slots.insert_run(l, &run);
                }
                run.clear();
                run_ledger = Some(ledgers[i]);
            }
            run.push((entries[i] as u32, slots[i] as u16));
            kept += 1;
        }
        if let Some(l) = run_ledger {
            self.delayed_slots.insert_run(l, &run);
        }
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
        self.incoming.push(Read {
            positions,
            slots: read_slots,
            mutations: cursor.mutations(),
        });
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
        if self.seat_of.is_empty() {
            self.drop_everything_read(cursor.mark_delete());
            return Ok(None);
        }
        self.note_read(&positions);
        Ok(Some((positions, slots)))
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
    fn queue_replay(&mut self, pos: Position, slot: u16, md: Position) {
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
    fn requeue(&mut self, pos: Position, slot: u16, cursor: &Cursor) -> Result<bool> {
        if cursor.is_acked(pos.ledger_id, pos.entry_id)? && !self.replay.contains(pos) {
            self.drop_acked(pos);
            return Ok(false);
        }
        self.replay.insert(pos, slot); // one search: false (kept as it was) when queued already
        Ok(true)
    }

    /// Forgets `pos`, which the cursor has acknowledged: out of the replay queue, its redelivery
    /// count dropped, counted in [`replay_dropped_acked`](Self::replay_dropped_acked).
    fn drop_acked(&mut self, pos: Position) {
        self.replay.remove(pos);
        if !self.redeliveries.is_empty() {
            self.redeliveries.remove(&pos);
        }
        self.dropped_acked += 1;
    }

    fn drop_everything_read(&mut self, md: Position) {
        self.replay.clear();
        self.incoming.clear();
        // Pulsar clears its redelivery tracker once no consumer is left.
        self.redeliveries.clear();
        self.highest_read = None;
        self.rewind = Some(md);
    }

    /// Where to read again after (mark-delete when the last consumer left), once; None otherwise.
    pub fn take_rewind(&mut self) -> Option<Position> {
        self.rewind.take()
    }

    // --- dispatch -------------------------------------------------------------------------------

    /// Sends what can be sent: the replay queue first, in position order, then the reads in order.
    pub fn dispatch(&mut self, cursor: &Cursor) -> Result<Vec<Delivery>> {
        Ok(self.dispatch_packed(cursor)?.into_deliveries())
    }

    /// [`DispatchCore::dispatch`] as flat columns: what a binding turns into its own objects.
    pub fn dispatch_packed(&mut self, cursor: &Cursor) -> Result<Dispatched> {
        self.blocked.clear();
        self.last_sent.forget_joined(cursor.mark_delete());
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
            for (pos, slot) in queued {
                if let Some(seat) = self.target(pos, slot, true)? {
                    if cursor.is_acked(pos.ledger_id, pos.entry_id)? {
                        self.drop_acked(pos);
                        continue;
                    }
                    self.replay.remove(pos);
                    self.send(seat, pos, slot, out, cursor)?;
                }
            }
        }
        let reads = std::mem::take(&mut self.incoming);
        for read in reads {
            let recheck = read.mutations != cursor.mutations();
            for (&pos, &slot) in read.positions.iter().zip(&read.slots) {
                if recheck && cursor.is_acked(pos.ledger_id, pos.entry_id)? {
                    // Acknowledged since the read (an ack of a never-sent entry, a skip): dropped.
                    self.dropped_acked += 1;
                    continue;
                }
                if self.replay.has_slot(slot) {
                    self.block(slot, BlockReason::ReplayOrder, None, None, pos);
                    self.queue_replay(pos, slot, md);
                    continue;
                }
                match self.target(pos, slot, false)? {
                    Some(seat) => self.send(seat, pos, slot, out, cursor)?,
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
        let state = self.seats[seat].as_mut().expect("registered seat");
        state.permits -= 1;
        self.permits -= 1;
        let id = state.id;
        self.inflight.insert(pos, seat, slot);
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

    // --- acks -----------------------------------------------------------------------------------

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
        let mut out = AckOutcome::default();
        let r = if ledgers.len() <= FEW_ACKS {
            // A consumer's grouped acks: one by one beats building bulk bitmaps.
            ledgers
                .iter()
                .zip(entries)
                .try_for_each(|(&ledger_id, &entry_id)| {
                    let p = Position {
                        ledger_id,
                        entry_id,
                    };
                    self.ack_at(seat, p, cursor, &mut out)
                })
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
        let p = Position {
            ledger_id: ledger,
            entry_id: entry,
        };
        let mut out = AckOutcome::default();
        let r = self.ack_at(seat, p, cursor, &mut out);
        self.last_sent.forget_joined(cursor.mark_delete());
        r.map(|()| out)
    }

    /// Acks `p` (a checked position) for the acking `seat`: in flight on it or on another consumer
    /// (taken out there, its draining reference released), or on nobody (acked on the cursor, out
    /// of the replay queue), or acknowledged already (a duplicate).
    #[inline(always)]
    fn ack_at(
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
    fn ack_bulk(
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
        for (&ledger_id, &entry_id) in ledgers.iter().zip(entries) {
            let p = Position {
                ledger_id,
                entry_id,
            };
            match self.inflight.remove(p) {
                Some(held) => {
                    ls.push(ledger_id);
                    es.push(entry_id);
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
            for &(holder, slot) in &taken {
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
        let mut n = 0;
        for (&ledger_id, &entry_id) in ledgers.iter().zip(entries) {
            let p = Position {
                ledger_id,
                entry_id,
            };
            let Some(slot) = self.inflight.remove_of(seat, p) else {
                continue; // not in flight on this consumer: skipped, as Pulsar does
            };
            if self.mode == DispatchMode::Draining
                && !self.draining.is_empty()
                && self.draining.reduce_ref(id, u32::from(slot), false)?
            {
                self.unblocked += 1;
            }
            if self.requeue(p, slot, cursor)? {
                *self.redeliveries.entry(p).or_insert(0) += 1;
            }
            n += 1;
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
        Ok(held)
    }

    // --- state ----------------------------------------------------------------------------------

    /// Consumer `id`'s unacked positions, in order.
    pub fn unacked(&self, id: u32) -> Result<Vec<Position>> {
        let seat = self.seat(id)?;
        Ok(self
            .inflight
            .of_seat(seat)
            .into_iter()
            .map(|(p, _)| p)
            .collect())
    }

    /// Consumer `id`'s figures.
    pub fn consumer_figures(&self, id: u32) -> Result<ConsumerFigures> {
        let seat = self.seat(id)?;
        let s = self.occupant(seat)?;
        Ok(ConsumerFigures {
            permits: s.permits,
            unacked: self.inflight.count(seat),
            delivered: s.delivered,
            joined_last_sent: s.joined_last_sent,
        })
    }

    /// The replay queue, in order.
    pub fn replay_positions(&self) -> Vec<Position> {
        self.replay.positions().map(|(p, _)| p).collect()
    }

    /// Replay queue length.
    pub fn replay_len(&self) -> usize {
        self.replay.len()
    }

    /// Why each slot was held back at the last dispatch.
    pub fn blocked(&self) -> Vec<(u16, Blocked)> {
        self.blocked.sorted()
    }

    /// Unblock events so far (acks, nacks and membership changes that released a blocked hash).
    pub fn unblocked_events(&self) -> u64 {
        self.unblocked
    }

    /// Positions dropped on their way to (or from) the replay queue because the cursor had
    /// acknowledged them.
    pub fn replay_dropped_acked(&self) -> u64 {
        self.dropped_acked
    }

    /// How many times `p` was nacked or redelivered (Pulsar's redelivery count: a leaver's messages
    /// are not counted; counts go with an ack and when the last consumer leaves).
    pub fn redelivery_count(&self, p: Position) -> u32 {
        self.redeliveries.get(&p).copied().unwrap_or(0)
    }

    /// Redelivery counts of many positions.
    pub fn redelivery_counts(&self, ledgers: &[i64], entries: &[i64]) -> Vec<u32> {
        if self.redeliveries.is_empty() {
            return vec![0; ledgers.len()];
        }
        ledgers
            .iter()
            .zip(entries)
            .map(|(&l, &e)| {
                self.redelivery_count(Position {
                    ledger_id: l,
                    entry_id: e,
                })
            })
            .collect()
    }

    /// Positions with a redelivery count held.
    pub fn redeliveries_tracked(&self) -> usize {
        self.redeliveries.len()
    }

    /// The draining hashes (PIP-379).
    pub fn draining(&self) -> &DrainingHashes {
        &self.draining
    }

    /// PIP-282: the last sent position (None before first use).
    pub fn last_sent_position(&self) -> Option<Position> {
        self.last_sent.last()
    }

    /// PIP-282: positions sent after the last sent position.
    pub fn individually_sent(&self) -> &RangeSet {
        self.last_sent.sent()
    }

    /// PIP-282: joined consumers still limited, with their limit.
    pub fn recently_joined(&self) -> Vec<(u32, Position)> {
        self.last_sent
            .joined
            .iter()
            .map(|(c, p)| (*c, *p))
            .collect()
    }

    /// The highest position read since the last release.
    pub fn highest_read(&self) -> Option<Position> {
        self.highest_read
    }

    /// Approximate heap bytes of what the consumers have in flight.
    pub fn pending_memory_usage(&self) -> usize {
        self.inflight.memory_usage()
    }

    /// Messages pending over all consumers.
    pub fn pending_total(&self) -> u64 {
        self.inflight.len()
    }
}
