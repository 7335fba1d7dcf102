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
//! The type and its shared parts are here; its methods live by what they do: `consumers.rs`
//! (membership, permits, owners), `entries.rs` (reads, replay, delayed entries), `send.rs` (the
//! dispatch), `acks.rs` (acks, nacks, redelivery), `state.rs` (figures); the replay queue, what is
//! in flight and the last-sent positions are `replay.rs`, `inflight.rs` and `last_sent.rs`.
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

mod acks;
mod consumers;
mod entries;
mod inflight;
mod isolation;
mod key_order;
mod last_sent;
mod replay;
mod send;
mod state;

use std::collections::BTreeMap;

use crate::ackstate::batch::check_batch_sizes;
use crate::ackstate::cursor::Cursor;
use crate::ackstate::dispatch_counts::DispatchCounts;
use crate::ackstate::position::Position;
use crate::ackstate::position::{check_entries, check_entry};
use crate::ackstate::rangeset::RangeSet;
use crate::bits::set_bits;
use crate::error::{CoreError, Result};
use crate::keyshared::draining::DrainingHashes;
use crate::keyshared::selector::{HashRange, SlotTable};
use crate::mem::FastMap;

use inflight::{InFlight, SlotsOf};
pub use isolation::IsolationFigures;
use isolation::Spill;
use key_order::KeyOrder;
pub use key_order::KeyOrderFigures;
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
    /// The slot has `max_unacked_per_key` messages unacknowledged (beyond Pulsar: opt-in).
    KeyUnackedLimit,
    /// Key-ordered nacks (beyond Pulsar: opt-in): the consumer has yet to answer an earlier
    /// message of the slot (an ack of a later one waits for it) or copies taken back from it.
    KeyOrder,
    /// Stuck-consumer isolation (beyond Pulsar: opt-in): the slot's entries are spilled (dropped
    /// from memory, to be read again) until its consumer recovers and they are re-read.
    Spilled,
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
    /// Key-ordered nacks: acks waiting for an earlier message of their key (not applied yet).
    pub parked: u64,
    /// Key-ordered nacks: answers to copies taken back from the consumer (dropped).
    pub stale: u64,
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
    /// Acks and flows from it so far (what a stuck-consumer policy watches).
    progress: u64,
    /// Marked stuck: entries of its slots are spilled.
    stuck: bool,
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
    /// Acks and flows from it so far: a policy deciding it is stuck watches this stand still.
    pub progress: u64,
    /// Marked stuck ([`DispatchCore::set_stuck`]).
    pub stuck: bool,
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
    redeliveries: DispatchCounts,
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
    /// Entries holding more than one message (batches): position → messages. A send takes that
    /// many permits (permits count messages, as the client's FLOW does); others take one.
    batch_sizes: FastMap<Position, u32>,
    /// `batch_sizes` may hold this many before acknowledged positions are pruned from it.
    batch_sizes_pruned_at: usize,
    /// Beyond Pulsar: at most this many unacknowledged messages per slot (0: no cap).
    max_unacked_per_key: u64,
    /// With the cap on: unacknowledged messages per slot (empty when off).
    key_unacked: Vec<u64>,
    /// With the cap on: the weight each batch entry in flight was counted with (others count 1).
    key_weights: FastMap<Position, u64>,
    /// Beyond Pulsar: key-ordered nacks' state (None: off, as Pulsar).
    key_order: Option<Box<KeyOrder>>,
    /// Beyond Pulsar: stuck-consumer isolation's spill (None: nothing ever marked stuck).
    spill: Option<Box<Spill>>,
    /// Consumers marked stuck.
    stuck_count: usize,
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
    Ok(each_position(ledgers, entries).collect())
}

/// The positions of two columns, pair by pair (the caller checked them).
#[inline]
fn each_position<'a>(
    ledgers: &'a [i64],
    entries: &'a [i64],
) -> impl Iterator<Item = Position> + 'a {
    ledgers
        .iter()
        .zip(entries)
        .map(|(&ledger_id, &entry_id)| Position {
            ledger_id,
            entry_id,
        })
}

/// Every slot checked to be in `1..=65535` (one branch-free pass; the culprit found only then).
fn check_slots(slots: &[i64]) -> Result<()> {
    if slots.iter().all(|&s| (s.wrapping_sub(1) as u64) < 65535) {
        return Ok(());
    }
    slots.iter().try_for_each(|&s| check_slot(s).map(|_| ()))
}

/// The slots of a read as `u16`, every one checked to be in `1..=65535` first.
fn slots_of(slots: &[i64]) -> Result<Vec<u16>> {
    check_slots(slots)?;
    Ok(slots.iter().map(|&s| s as u16).collect())
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
            redeliveries: DispatchCounts::default(),
            rewind: None,
            highest_read: None,
            last_sent: LastSent::default(),
            out_index: Vec::new(),
            sent: Vec::new(),
            permits: 0,
            delayed_slots: SlotsOf::default(),
            inflight: InFlight::default(),
            batch_sizes: FastMap::default(),
            batch_sizes_pruned_at: 1024,
            max_unacked_per_key: 0,
            key_unacked: Vec::new(),
            key_weights: FastMap::default(),
            key_order: None,
            spill: None,
            stuck_count: 0,
        }
    }

    /// Beyond Pulsar (opt-in): a slot with `cap` messages sent and not acknowledged is held —
    /// nothing more of it is sent to anyone ([`BlockReason::KeyUnackedLimit`]) until acks or
    /// nacks bring it below. Keys are counted by their sticky-key hash slot: keys sharing a slot
    /// share the cap. A batch counts as its messages; one still goes when the slot has none out.
    /// 0 turns the cap off. Messages already in flight are counted when it is turned on.
    pub fn set_max_unacked_per_key(&mut self, cap: u64) {
        self.max_unacked_per_key = cap;
        if cap == 0 {
            self.key_unacked = Vec::new();
            self.key_weights = FastMap::default();
            return;
        }
        if self.key_unacked.is_empty() {
            let mut counts = vec![0u64; SLOTS];
            for seat in 0..self.seats.len() {
                for (p, slot) in self.inflight.of_seat(seat) {
                    let weight = self.batch_sizes.get(&p).map_or(1, |&m| u64::from(m));
                    counts[usize::from(slot)] += weight;
                    if weight > 1 {
                        self.key_weights.insert(p, weight);
                    }
                }
            }
            self.key_unacked = counts;
        }
    }

    /// The per-key cap (0: none).
    pub fn max_unacked_per_key(&self) -> u64 {
        self.max_unacked_per_key
    }

    /// Messages of `slot` sent and not acknowledged (counted only while the cap is on).
    pub fn key_unacked(&self, slot: u16) -> u64 {
        self.key_unacked
            .get(usize::from(slot))
            .copied()
            .unwrap_or(0)
    }

    /// A position of `slot` left flight (acked, nacked, its consumer gone): the cap's count drops.
    #[inline]
    fn key_released(&mut self, p: Position, slot: u16) {
        if self.key_unacked.is_empty() {
            return;
        }
        let weight = if self.key_weights.is_empty() {
            1
        } else {
            self.key_weights.remove(&p).unwrap_or(1)
        };
        let count = &mut self.key_unacked[usize::from(slot)];
        *count = count.saturating_sub(weight);
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
}
