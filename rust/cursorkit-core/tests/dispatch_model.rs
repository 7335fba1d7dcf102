//! Randomised model test of `DispatchCore`, the Key_Shared dispatch loop, in each of its modes.
//!
//! Random operations run against a model kept on the side: publish and read (ledgers `1..`, keys
//! mapped to slots by the selector's slot function), dispatch, acks of random subsets of what a
//! consumer holds (from the holder or another consumer, with duplicates, positions pending
//! elsewhere, never-sent positions and sometimes a position the cursor refuses mixed in), acks
//! on the cursor outside the core (a skip, TTL or another holder of the cursor: of waiting
//! positions, of positions a consumer holds, cumulative), nacks, redelivery, permits, and
//! consumers joining and leaving through an auto-split or consistent-hashing selector (a last
//! consumer leaving rewinds: the model reads again from the rewind position). The model holds
//! each consumer's permits and pending positions, the positions waiting in the core, the
//! acknowledged positions, redelivery counts (Pulsar's: raised by nacks and redelivers, not by a
//! leaver's messages; gone with an ack; cleared when the last consumer leaves) and the last
//! position of each key each consumer received.
//!
//! After every step: the core's unacked positions, permits and redelivery counts equal the
//! model's, and it tracks counts of pending or queued positions only; a position is pending on at
//! most one consumer and never delivered once acked, whichever way it came back; the replay queue
//! holds only waiting or acknowledged positions; per consumer, a key's deliveries increase unless
//! the position went back before; last-sent mode never sends a recently joined consumer beyond its
//! limit; draining mode never has a key unacked on two consumers and each draining hash counts
//! exactly its owner's unacked messages of it; ack outcomes match the model and add up. At the
//! end, consumers acking everything with plenty of permits drain the topic: every published
//! position is acked and mark-delete reaches the last one.
//!
//! `DISPATCH_MODEL_SEEDS=n` and `DISPATCH_MODEL_STEPS=n` make a longer soak;
//! `DISPATCH_MODEL_TRACE=1` prints the model before each step.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use cursorkit_core::{
    slot_consistent, slot_range, sticky_key_hash, AckOutcome, AutoSplitSelector,
    ConsistentHashingSelector, Cursor, DispatchCore, DispatchMode, Impact, Position, SlotTable,
    StickyKeySelector,
};

mod common;
use common::Rng;

thread_local! {
    /// What the current thread is running, printed when a check fails.
    static WHERE: RefCell<String> = const { RefCell::new(String::new()) };
}

/// Prints the run and step a failed check happened in.
struct Note;

impl Drop for Note {
    fn drop(&mut self) {
        if std::thread::panicking() {
            WHERE.with(|w| eprintln!("failed in {}", w.borrow()));
        }
    }
}

fn note(text: String) {
    WHERE.with(|w| *w.borrow_mut() = text);
}

fn pos(ledger: i64, entry: i64) -> Position {
    Position::new(ledger, entry).unwrap()
}

fn columns(positions: &[Position]) -> (Vec<i64>, Vec<i64>) {
    positions.iter().map(|p| (p.ledger_id, p.entry_id)).unzip()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    AutoSplit,
    Consistent,
}

enum Selector {
    Auto(AutoSplitSelector),
    Ring(ConsistentHashingSelector),
}

impl Selector {
    fn new(kind: Kind, rng: &mut Rng) -> Self {
        match kind {
            Kind::AutoSplit => Self::Auto(AutoSplitSelector::new(65536).unwrap()),
            Kind::Consistent => {
                let points = [1, 3, 20, 100][rng.below(4) as usize];
                Self::Ring(ConsistentHashingSelector::new(points).unwrap())
            }
        }
    }

    fn add(&mut self, id: u32, name: &str) -> Impact {
        match self {
            Self::Auto(s) => s.add_consumer(id, name, &[]),
            Self::Ring(s) => s.add_consumer(id, name, &[]),
        }
        .expect("selector add")
    }

    fn remove(&mut self, id: u32) -> Impact {
        match self {
            Self::Auto(s) => s.remove_consumer(id),
            Self::Ring(s) => s.remove_consumer(id),
        }
        .expect("selector remove")
    }

    fn table(&self) -> &SlotTable {
        match self {
            Self::Auto(s) => s.table(),
            Self::Ring(s) => s.table(),
        }
    }

    /// The sticky-key slot of a key, as this selector's Pulsar counterpart computes it.
    fn slot_of_key(&self, key: &[u8]) -> u16 {
        let h = sticky_key_hash(key);
        let slot = match self {
            Self::Auto(_) => slot_range(h, 65536),
            Self::Ring(_) => slot_consistent(h),
        };
        u16::try_from(slot).unwrap()
    }
}

/// The model of one consumer.
#[derive(Debug, Default)]
struct Seat {
    permits: u64,
    /// Sent and not acknowledged: position -> slot.
    pending: BTreeMap<Position, u16>,
}

/// How much a run exercised (so a run that silently did nothing fails).
#[derive(Debug, Default)]
struct Stats {
    delivered: u64,
    acked: u64,
    from_other: u64,
    not_pending: u64,
    duplicates: u64,
    unblocked: u64,
    nacked: u64,
    returned: u64,
    joins: u64,
    leaves: u64,
    rewinds: u64,
    failed_acks: u64,
    acked_elsewhere: u64,
    /// Positions a consumer held when the cursor acknowledged them directly.
    acked_held: u64,
    /// Of those, positions that came back (a leave, nack or redeliver) instead of being acked.
    acked_held_returned: u64,
    /// Dispatches with a recently joined consumer limited (last-sent mode).
    limited: u64,
    /// Steps with a hash draining (draining mode).
    draining: u64,
}

const MAX_CONSUMERS: usize = 8;

struct Run {
    mode: DispatchMode,
    rng: Rng,
    core: DispatchCore,
    cursor: Cursor,
    sel: Selector,
    /// The slots of the run's keys.
    slots: Vec<u16>,
    /// Every published entry in order, with its slot.
    published: Vec<(Position, u16)>,
    /// `published[..read_upto]` was handed to the core since the last rewind.
    read_upto: usize,
    ledger: i64,
    ledger_len: i64,
    seats: BTreeMap<u32, Seat>,
    next_id: u32,
    /// Acknowledged positions (the cursor's state over published positions).
    acked: HashSet<Position>,
    /// Read into the core and neither pending nor acknowledged (waiting to be sent).
    waiting: BTreeSet<Position>,
    /// Pending positions the cursor acknowledged directly (the consumer has not acked them).
    acked_held: HashSet<Position>,
    /// Positions that went back for redelivery (nacked, redelivered, or returned by a leaver):
    /// their order may change.
    went_back: HashSet<Position>,
    /// Redelivery counts under Pulsar's rule (see the module docs).
    counts: HashMap<Position, u32>,
    /// The highest position of each (consumer, slot) delivered so far.
    last_of_key: HashMap<(u32, u16), Position>,
    slot_of: HashMap<Position, u16>,
    stats: Stats,
}

impl Run {
    fn new(mode: DispatchMode, kind: Kind, seed: u64) -> Self {
        let mut rng = Rng(seed);
        let sel = Selector::new(kind, &mut rng);
        // A small set of keys; a few runs share slots between keys or use the edge slots.
        let n_keys = 2 + rng.below(10);
        let mut slots: Vec<u16> = (0..n_keys)
            .map(|i| sel.slot_of_key(format!("key-{seed}-{i}").as_bytes()))
            .collect();
        if rng.chance(1, 3) {
            slots.push(1);
            slots.push(65535);
        }
        if rng.chance(1, 3) {
            let s = slots[0];
            slots.push(s);
        }
        Self {
            mode,
            rng,
            core: DispatchCore::new(mode),
            cursor: Cursor::new(pos(1, -1), false),
            sel,
            slots,
            published: Vec::new(),
            read_upto: 0,
            ledger: 1,
            ledger_len: 0,
            seats: BTreeMap::new(),
            next_id: 1,
            acked: HashSet::new(),
            waiting: BTreeSet::new(),
            acked_held: HashSet::new(),
            went_back: HashSet::new(),
            counts: HashMap::new(),
            last_of_key: HashMap::new(),
            slot_of: HashMap::new(),
            stats: Stats::default(),
        }
    }

    fn ids(&self) -> Vec<u32> {
        self.seats.keys().copied().collect()
    }

    // --- operations -----------------------------------------------------------------------------

    /// Publishes a batch of entries (sometimes in a new ledger) and usually reads it.
    fn publish(&mut self) {
        if self.ledger_len > 0 && self.rng.chance(1, 8) {
            self.ledger += 1 + self.rng.below(2) as i64; // sometimes a ledger id is skipped
            self.ledger_len = 0;
        }
        let n = 1 + self.rng.below(8);
        for _ in 0..n {
            let p = pos(self.ledger, self.ledger_len);
            self.ledger_len += 1;
            let slot = self.rng.pick(&self.slots);
            self.published.push((p, slot));
            self.slot_of.insert(p, slot);
        }
        self.cursor
            .set_ledger_size(self.ledger, self.ledger_len as u64)
            .unwrap();
        if self.rng.chance(3, 4) {
            self.read(false);
        }
    }

    /// Hands what was published and not read yet to the core (skipping what the cursor acked, as
    /// a managed-ledger read does), in one to three reads. With nobody connected the broker does
    /// not read, except sometimes (the core releases it and asks for a rewind).
    fn read(&mut self, force: bool) {
        if self.read_upto == self.published.len() {
            return;
        }
        if self.seats.is_empty() && !force && !self.rng.chance(1, 3) {
            return;
        }
        let batch: Vec<(Position, u16)> = self.published[self.read_upto..]
            .iter()
            .filter(|(p, _)| !self.acked.contains(p))
            .copied()
            .collect();
        self.read_upto = self.published.len();
        let mut rest = &batch[..];
        while !rest.is_empty() {
            let n = if self.rng.chance(1, 2) {
                rest.len()
            } else {
                1 + self.rng.below(rest.len() as u64) as usize
            };
            let (chunk, tail) = rest.split_at(n);
            rest = tail;
            let ls: Vec<i64> = chunk.iter().map(|(p, _)| p.ledger_id).collect();
            let es: Vec<i64> = chunk.iter().map(|(p, _)| p.entry_id).collect();
            let ss: Vec<i64> = chunk.iter().map(|(_, s)| i64::from(*s)).collect();
            self.core.add_read(&ls, &es, &ss, &self.cursor).unwrap();
            if !self.seats.is_empty() {
                self.waiting.extend(chunk.iter().map(|(p, _)| *p));
            }
        }
    }

    fn dispatch(&mut self) {
        let md = self.cursor.mark_delete();
        // PIP-282: a recently joined consumer gets nothing beyond its limit while it is limited.
        let limits: HashMap<u32, Position> = if self.mode == DispatchMode::LastSent {
            self.core
                .recently_joined()
                .into_iter()
                .filter(|(_, l)| *l > md)
                .collect()
        } else {
            HashMap::new()
        };
        self.stats.limited += u64::from(!limits.is_empty());
        let out = self.core.dispatch(&self.cursor).unwrap();
        let mut seen = HashSet::new();
        for d in &out {
            let c = d.consumer;
            assert!(seen.insert(c), "consumer {c} appears twice in one dispatch");
            assert_eq!(d.ledgers.len(), d.entries.len());
            assert!(!d.entries.is_empty(), "empty delivery to {c}");
            let n = d.entries.len() as u64;
            let seat = self
                .seats
                .get(&c)
                .unwrap_or_else(|| panic!("delivery to unregistered consumer {c}"));
            assert!(
                n <= seat.permits,
                "consumer {c} got {n} messages with {} permits",
                seat.permits
            );
            for (&l, &e) in d.ledgers.iter().zip(&d.entries) {
                let p = pos(l, e);
                assert!(
                    !self.cursor.is_acked(l, e).unwrap() && !self.acked.contains(&p),
                    "{p:?} delivered to {c} after it was acked"
                );
                for (other, s) in &self.seats {
                    assert!(
                        !s.pending.contains_key(&p),
                        "{p:?} delivered to {c} while pending on {other}"
                    );
                }
                assert!(
                    self.waiting.remove(&p),
                    "{p:?} delivered to {c} but it was not waiting in the core"
                );
                if let Some(limit) = limits.get(&c) {
                    assert!(
                        p <= *limit,
                        "{p:?} delivered to recently joined {c} beyond its limit {limit:?}"
                    );
                }
                let slot = self.slot_of[&p];
                let last = self.last_of_key.entry((c, slot)).or_insert(p);
                if !self.went_back.contains(&p) {
                    assert!(
                        p >= *last,
                        "slot {slot}: {p:?} delivered to {c} after {last:?} (out of order)"
                    );
                }
                *last = (*last).max(p);
                self.seats.get_mut(&c).unwrap().pending.insert(p, slot);
            }
            self.seats.get_mut(&c).unwrap().permits -= n;
            self.stats.delivered += n;
        }
    }

    /// Acks a random subset of one consumer's messages, with positions pending elsewhere,
    /// duplicates, never-sent positions and sometimes a position the cursor refuses mixed in;
    /// from the holder or (sometimes) from another consumer.
    fn ack(&mut self) {
        if self.seats.is_empty() {
            return;
        }
        let ids = self.ids();
        let holder = self.rng.pick(&ids);
        let all = self.rng.chance(1, 4);
        let held: Vec<Position> = self.seats[&holder].pending.keys().copied().collect();
        let mut list: Vec<Position> = held
            .into_iter()
            .filter(|_| all || self.rng.chance(1, 2))
            .collect();
        if self.rng.chance(1, 4) {
            // Something pending on another consumer.
            let other = self.rng.pick(&ids);
            if let Some(p) = self.seats[&other].pending.keys().next_back() {
                list.push(*p);
            }
        }
        if !self.published.is_empty() {
            for _ in 0..self.rng.below(3) {
                // Any published position: acked already, waiting, unread, or pending somewhere.
                let i = self.rng.below(self.published.len() as u64) as usize;
                list.push(self.published[i].0);
            }
        }
        if !list.is_empty() && self.rng.chance(1, 5) {
            let p = self.rng.pick(&list);
            list.push(p); // a duplicate within the call
        }
        if self.rng.chance(1, 3) {
            self.rng.shuffle(&mut list);
        }
        let bad_at = if !self.published.is_empty() && self.rng.chance(1, 25) {
            // Beyond the current ledger's end (the cursor knows ledger sizes): refused.
            let at = self.rng.below(list.len() as u64 + 1) as usize;
            let bad = pos(self.ledger, self.ledger_len + self.rng.below(3) as i64);
            list.insert(at, bad);
            Some(at)
        } else {
            None
        };
        if list.is_empty() {
            return;
        }
        let acker = if self.rng.chance(1, 5) {
            self.rng.pick(&ids)
        } else {
            holder
        };
        let (ls, es) = columns(&list);
        let result = if list.len() == 1 && self.rng.chance(1, 2) {
            self.core.ack_one(acker, ls[0], es[0], &mut self.cursor)
        } else {
            self.core.ack(acker, &ls, &es, &mut self.cursor)
        };

        // The model: each position in order; a call with a refused one changes nothing.
        let mut expect = AckOutcome::default();
        let upto = if bad_at.is_some() { 0 } else { list.len() };
        for &p in &list[..upto] {
            if self
                .seats
                .get_mut(&acker)
                .unwrap()
                .pending
                .remove(&p)
                .is_some()
            {
                expect.acked += 1;
            } else if let Some(s) = self.seats.values_mut().find(|s| s.pending.contains_key(&p)) {
                s.pending.remove(&p);
                expect.from_other_consumer += 1;
            } else if self.acked.contains(&p) {
                expect.duplicates += 1;
                continue;
            } else {
                expect.not_pending += 1;
                self.waiting.remove(&p);
            }
            self.acked.insert(p);
            self.acked_held.remove(&p);
            self.counts.remove(&p);
        }
        match bad_at {
            Some(_) => {
                assert!(
                    result.is_err(),
                    "an ack beyond the ledger's end was accepted"
                );
                self.stats.failed_acks += 1;
            }
            None => {
                let out = result.unwrap();
                let total = out.acked + out.from_other_consumer + out.not_pending + out.duplicates;
                assert_eq!(total, list.len() as u64, "ack outcome {out:?} of {list:?}");
                assert_eq!(
                    (
                        out.acked,
                        out.from_other_consumer,
                        out.not_pending,
                        out.duplicates
                    ),
                    (
                        expect.acked,
                        expect.from_other_consumer,
                        expect.not_pending,
                        expect.duplicates
                    ),
                    "ack outcome of {list:?} from {acker}"
                );
                assert!(out.unblocked <= out.acked + out.from_other_consumer);
                if self.mode != DispatchMode::Draining {
                    assert_eq!(out.unblocked, 0);
                }
                self.stats.unblocked += out.unblocked;
            }
        }
        self.stats.acked += expect.acked;
        self.stats.from_other += expect.from_other_consumer;
        self.stats.not_pending += expect.not_pending;
        self.stats.duplicates += expect.duplicates;
        for &p in &list[..upto] {
            assert!(self.cursor.is_acked(p.ledger_id, p.entry_id).unwrap());
        }
    }

    /// Acks on the cursor outside the core (a skip, TTL, another holder of the cursor): of
    /// positions pending on nobody, of positions a consumer holds (it keeps them pending until it
    /// acks, leaves or nacks them), or of everything up to a position (a cumulative ack). The core
    /// must never send them again.
    fn ack_elsewhere(&mut self) {
        let roll = self.rng.below(8);
        if roll == 0 && !self.published.is_empty() {
            // Expiry: the cursor acks every published position up to one of them.
            let i = self.rng.below(self.published.len() as u64) as usize;
            let upto = self.published[i].0;
            self.cursor
                .ack_cumulative(upto.ledger_id, upto.entry_id)
                .unwrap();
            let below: Vec<Position> = self.published[..=i].iter().map(|(p, _)| *p).collect();
            for p in below {
                self.acked_directly(p);
            }
            self.stats.acked_elsewhere += 1;
            return;
        }
        let held = roll < 4;
        let candidates: Vec<Position> = if held {
            self.seats
                .values()
                .flat_map(|s| s.pending.keys().copied())
                .filter(|p| !self.acked.contains(p))
                .collect()
        } else {
            self.published
                .iter()
                .map(|(p, _)| *p)
                .filter(|p| {
                    !self.acked.contains(p)
                        && self.seats.values().all(|s| !s.pending.contains_key(p))
                })
                .collect()
        };
        if candidates.is_empty() {
            return;
        }
        for _ in 0..1 + self.rng.below(3) {
            let p = self.rng.pick(&candidates);
            self.cursor.ack(p.ledger_id, p.entry_id).unwrap();
            self.acked_directly(p);
        }
        self.stats.acked_elsewhere += 1;
    }

    /// The model of one position the cursor acknowledged outside the core.
    fn acked_directly(&mut self, p: Position) {
        if !self.acked.insert(p) {
            return;
        }
        if self.seats.values().any(|s| s.pending.contains_key(&p)) {
            self.acked_held.insert(p);
            self.stats.acked_held += 1;
        } else {
            // Waiting (or not read yet): the core drops it unsent; its count goes with it, when
            // the core next tries to send it.
            self.waiting.remove(&p);
            self.counts.remove(&p);
        }
    }

    /// Positions that left a consumer unacked. Those the cursor acknowledged are dropped with
    /// their count; the others wait again, their count raised by a nack or redeliver (`counted`)
    /// and left as it was for a leaver's.
    fn give_back(&mut self, positions: &[Position], counted: bool) {
        for &p in positions {
            self.went_back.insert(p);
            if self.acked_held.remove(&p) {
                self.counts.remove(&p);
                self.stats.acked_held_returned += 1;
                continue;
            }
            assert!(!self.acked.contains(&p), "{p:?} returned acked");
            if counted {
                *self.counts.entry(p).or_insert(0) += 1;
            }
            assert!(self.waiting.insert(p), "{p:?} returned twice");
        }
    }

    fn nack(&mut self) {
        if self.seats.is_empty() {
            return;
        }
        let ids = self.ids();
        let c = self.rng.pick(&ids);
        let mut list: Vec<Position> = self.seats[&c]
            .pending
            .keys()
            .copied()
            .filter(|_| self.rng.chance(1, 3))
            .collect();
        if !self.published.is_empty() && self.rng.chance(1, 3) {
            let i = self.rng.below(self.published.len() as u64) as usize;
            list.push(self.published[i].0);
        }
        if !list.is_empty() && self.rng.chance(1, 5) {
            let p = self.rng.pick(&list);
            list.push(p);
        }
        self.rng.shuffle(&mut list);
        let (ls, es) = columns(&list);
        let n = self.core.nack(c, &ls, &es, &self.cursor).unwrap();
        let mut gone = Vec::new();
        for p in &list {
            if self.seats.get_mut(&c).unwrap().pending.remove(p).is_some() {
                gone.push(*p);
            }
        }
        assert_eq!(n, gone.len() as u64, "nack count of {list:?} from {c}");
        self.stats.nacked += n;
        self.give_back(&gone, true);
    }

    fn redeliver(&mut self) {
        if self.seats.is_empty() {
            return;
        }
        let ids = self.ids();
        let c = self.rng.pick(&ids);
        let held = self.core.redeliver(c, &self.cursor).unwrap();
        let seat = self.seats.get_mut(&c).unwrap();
        let expect: Vec<Position> = std::mem::take(&mut seat.pending).into_keys().collect();
        assert_eq!(held, expect, "redeliver of {c}");
        self.stats.nacked += held.len() as u64;
        self.give_back(&held, true);
    }

    /// Flow: `n` permits to every consumer, or (`n == 0`) a few to one of them.
    fn permits(&mut self, n: u64) {
        let ids = self.ids();
        let (targets, k) = match n {
            0 if ids.is_empty() => return,
            0 => (vec![self.rng.pick(&ids)], self.rng.below(12)),
            _ => (ids, n),
        };
        for c in targets {
            self.core.add_permits(c, k).unwrap();
            self.seats.get_mut(&c).unwrap().permits += k;
        }
    }

    fn join(&mut self) {
        if self.seats.len() >= MAX_CONSUMERS {
            return;
        }
        let id = self.next_id;
        self.next_id += 1;
        // Names repeat, so consistent hashing hands out name indexes (and a rejoin its points).
        let name = format!("consumer-{}", self.rng.below(4));
        let impact = self.sel.add(id, &name);
        let permits = self.rng.below(10);
        self.core.add_consumer(id, permits, &self.cursor).unwrap();
        self.core.set_owners_from(self.sel.table()).unwrap();
        self.core.register_moved(&impact.removed, id).unwrap();
        self.seats.insert(
            id,
            Seat {
                permits,
                pending: BTreeMap::new(),
            },
        );
        assert!(self.core.add_consumer(id, 1, &self.cursor).is_err());
        self.stats.joins += 1;
    }

    fn leave(&mut self) {
        if self.seats.is_empty() {
            return;
        }
        let ids = self.ids();
        let c = self.rng.pick(&ids);
        let impact = self.sel.remove(c);
        let returned = self.core.remove_consumer(c, &self.cursor).unwrap();
        self.core.set_owners_from(self.sel.table()).unwrap();
        self.core.register_moved(&impact.removed, c).unwrap();
        let seat = self.seats.remove(&c).unwrap();
        let expect: Vec<Position> = seat.pending.into_keys().collect();
        assert_eq!(returned, expect, "positions returned by leaving {c}");
        assert!(self.core.unacked(c).is_err());
        self.stats.returned += returned.len() as u64;
        self.stats.leaves += 1;
        self.give_back(&returned, false);
        if self.seats.is_empty() {
            // Nobody left: Pulsar clears its redelivery tracker.
            self.counts.clear();
        }
    }

    /// A rewind (the last consumer left, or a read found nobody): everything read after it is
    /// gone from the core and read again.
    fn after_step(&mut self) {
        if let Some(r) = self.core.take_rewind() {
            assert!(self.seats.is_empty(), "a rewind with consumers connected");
            assert_eq!(r, self.cursor.mark_delete());
            self.waiting.clear();
            self.read_upto = self.published.partition_point(|(p, _)| *p <= r);
            self.stats.rewinds += 1;
        }
        assert_eq!(self.core.take_rewind(), None);
    }

    // --- checks ---------------------------------------------------------------------------------

    fn check(&self) {
        assert_eq!(self.core.len(), self.seats.len());
        let mut total = 0u64;
        let mut permits = 0u64;
        let mut slot_holder: HashMap<u16, u32> = HashMap::new();
        for (&c, seat) in &self.seats {
            let unacked = self.core.unacked(c).unwrap();
            let expect: Vec<Position> = seat.pending.keys().copied().collect();
            assert_eq!(unacked, expect, "unacked of {c}");
            let f = self.core.consumer_figures(c).unwrap();
            assert_eq!(f.permits, seat.permits, "permits of {c}");
            assert_eq!(f.unacked, seat.pending.len() as u64);
            total += seat.pending.len() as u64;
            permits += seat.permits;
            for (p, &slot) in &seat.pending {
                assert_eq!(
                    self.core.redelivery_count(*p),
                    self.counts.get(p).copied().unwrap_or(0),
                    "redelivery count of {p:?} pending on {c}"
                );
                assert!(
                    !self.waiting.contains(p),
                    "{p:?} pending on {c} and waiting"
                );
                assert_eq!(
                    self.acked.contains(p),
                    self.acked_held.contains(p),
                    "{p:?} pending on {c} and acked by {c}"
                );
                if self.mode == DispatchMode::Draining {
                    if let Some(other) = slot_holder.insert(slot, c) {
                        assert_eq!(
                            other, c,
                            "slot {slot} has unacked messages on {other} and {c}"
                        );
                    }
                }
            }
        }
        assert_eq!(self.core.pending_total(), total);
        assert_eq!(self.core.permits_total(), permits);

        let replay = self.core.replay_positions();
        assert_eq!(replay.len(), self.core.replay_len());
        assert!(
            replay.windows(2).all(|w| w[0] < w[1]),
            "replay out of order"
        );
        // Acknowledged positions may wait in the replay queue until the core tries to send them
        // (then they are dropped), as Pulsar's replay reads drop deleted entries.
        let mut lingering = 0;
        for p in &replay {
            if self.acked.contains(p) {
                assert!(
                    !self.acked_held.contains(p),
                    "{p:?} in the replay queue and pending"
                );
                lingering += usize::from(self.core.redelivery_count(*p) > 0);
            } else {
                assert!(
                    self.waiting.contains(p),
                    "{p:?} in the replay queue but not waiting"
                );
            }
        }
        // Redelivery counts: the model's for every waiting position, and none of a position neither
        // pending nor queued (no leak).
        for p in &self.waiting {
            assert_eq!(
                self.core.redelivery_count(*p),
                self.counts.get(p).copied().unwrap_or(0),
                "redelivery count of waiting {p:?}"
            );
        }
        let counted = self
            .counts
            .iter()
            .filter(|(p, &n)| {
                n > 0
                    && (self.waiting.contains(p)
                        || self.seats.values().any(|s| s.pending.contains_key(p)))
            })
            .count();
        assert_eq!(
            self.core.redeliveries_tracked(),
            counted + lingering,
            "redelivery counts tracked"
        );

        if self.mode == DispatchMode::Draining {
            for e in self.core.draining().entries(None) {
                let seat = self.seats.get(&e.owner).unwrap_or_else(|| {
                    panic!("hash {} drains on unregistered {}", e.hash, e.owner)
                });
                let n = seat
                    .pending
                    .values()
                    .filter(|&&s| u32::from(s) == e.hash)
                    .count();
                assert_eq!(
                    e.unacked as usize, n,
                    "draining count of hash {} on {}",
                    e.hash, e.owner
                );
            }
        } else {
            assert!(self.core.draining().is_empty());
        }
        if self.mode != DispatchMode::LastSent {
            assert!(self.core.recently_joined().is_empty());
        }
    }

    /// The cursor against the model over every published position, and mark-delete.
    fn check_cursor(&self) {
        for (p, _) in &self.published {
            assert_eq!(
                self.cursor.is_acked(p.ledger_id, p.entry_id).unwrap(),
                self.acked.contains(p),
                "cursor ack state of {p:?}"
            );
        }
        let prefix = self
            .published
            .iter()
            .take_while(|(p, _)| self.acked.contains(p))
            .count();
        let md = match prefix {
            0 => pos(1, -1),
            n => self.published[n - 1].0,
        };
        assert_eq!(self.cursor.mark_delete(), md);
    }

    // --- driver ---------------------------------------------------------------------------------

    fn step(&mut self) {
        let join_weight = if self.seats.is_empty() { 12 } else { 5 };
        let roll = self.rng.below(88 + join_weight);
        if std::env::var_os("DISPATCH_MODEL_TRACE").is_some() {
            let show = |ps: &mut dyn Iterator<Item = Position>| {
                ps.map(|p| format!("{}:{}", p.ledger_id, p.entry_id))
                    .collect::<Vec<_>>()
                    .join(",")
            };
            let seats: Vec<String> = self
                .seats
                .iter()
                .map(|(c, s)| {
                    let held = show(&mut s.pending.keys().copied());
                    format!("{c}: {} permits [{held}]", s.permits)
                })
                .collect();
            eprintln!(
                "roll {roll}: {seats:?} waiting [{}] replay [{}] blocked {:?} read_upto {} md {:?}",
                show(&mut self.waiting.iter().copied()),
                show(&mut self.core.replay_positions().into_iter()),
                self.core.blocked().into_iter().collect::<Vec<_>>(),
                self.read_upto,
                self.cursor.mark_delete()
            );
        }
        match roll {
            0..=19 => self.publish(),
            20..=22 => self.read(false),
            23..=24 => self.ack_elsewhere(),
            25..=44 => self.dispatch(),
            45..=64 => self.ack(),
            65..=69 => self.nack(),
            70..=71 => self.redeliver(),
            72..=84 => self.permits(0),
            85..=87 => self.leave(),
            _ => self.join(),
        }
        self.after_step();
        self.check();
        self.stats.draining += u64::from(!self.core.draining().is_empty());
    }

    /// Everyone acks everything with plenty of permits: the topic drains.
    fn drain(&mut self) {
        if self.seats.is_empty() {
            self.join();
        }
        for round in 0.. {
            assert!(round < 100, "the topic does not drain: {:?}", self.stats);
            self.read(true);
            self.permits(32);
            self.dispatch();
            self.after_step();
            self.check();
            for c in self.ids() {
                let held: Vec<Position> = self.seats[&c].pending.keys().copied().collect();
                if held.is_empty() {
                    continue;
                }
                let (ls, es) = columns(&held);
                let out = self.core.ack(c, &ls, &es, &mut self.cursor).unwrap();
                assert_eq!(out.acked, held.len() as u64);
                assert_eq!(
                    out.acked + out.from_other_consumer + out.not_pending + out.duplicates,
                    held.len() as u64
                );
                self.stats.acked += out.acked;
                let seat = self.seats.get_mut(&c).unwrap();
                seat.pending.clear();
                for p in held {
                    self.acked.insert(p);
                    self.acked_held.remove(&p);
                    self.counts.remove(&p);
                }
                self.check();
            }
            if self.acked.len() == self.published.len() {
                break;
            }
        }
        // Everything is acknowledged: one more dispatch sends nothing and drops what still waits.
        self.permits(32);
        self.dispatch();
        self.check();
        self.check_cursor();
        assert!(self.waiting.is_empty(), "still waiting: {:?}", self.waiting);
        assert_eq!(self.core.replay_len(), 0);
        assert_eq!(self.core.pending_total(), 0);
        if let Some((last, _)) = self.published.last() {
            assert_eq!(self.cursor.mark_delete(), *last);
        }
        if self.mode == DispatchMode::Draining {
            assert!(self.core.draining().is_empty());
        }
    }
}

fn run(mode: DispatchMode, kind: Kind, seed: u64, steps: usize) -> Stats {
    let mut r = Run::new(mode, kind, seed);
    for i in 0..steps {
        note(format!("{mode:?} {kind:?} seed {seed} step {i}"));
        r.step();
        if i % 64 == 63 {
            r.check_cursor();
        }
    }
    note(format!("{mode:?} {kind:?} seed {seed} final drain"));
    r.drain();
    r.stats
}

fn run_mode(mode: DispatchMode) {
    let _note = Note;
    let mut totals = Stats::default();
    // DISPATCH_MODEL_SEEDS=n runs more seeds (a longer soak); `make fuzz` (CURSORKIT_FUZZ=long)
    // runs 200.
    let long = std::env::var("CURSORKIT_FUZZ").as_deref() == Ok("long");
    let seeds = std::env::var("DISPATCH_MODEL_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(if long { 200u64 } else { 10 });
    let steps = std::env::var("DISPATCH_MODEL_STEPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(400usize);
    for seed in 1..=seeds {
        for kind in [Kind::AutoSplit, Kind::Consistent] {
            let s = run(mode, kind, seed * 0x1234_5678 + kind as u64, steps);
            totals.delivered += s.delivered;
            totals.acked += s.acked;
            totals.from_other += s.from_other;
            totals.not_pending += s.not_pending;
            totals.duplicates += s.duplicates;
            totals.unblocked += s.unblocked;
            totals.nacked += s.nacked;
            totals.returned += s.returned;
            totals.joins += s.joins;
            totals.leaves += s.leaves;
            totals.rewinds += s.rewinds;
            totals.failed_acks += s.failed_acks;
            totals.acked_elsewhere += s.acked_elsewhere;
            totals.acked_held += s.acked_held;
            totals.acked_held_returned += s.acked_held_returned;
            totals.limited += s.limited;
            totals.draining += s.draining;
        }
    }
    eprintln!("{mode:?}: {totals:?}");
    // Every path was taken.
    assert!(totals.delivered > 0 && totals.acked > 0 && totals.from_other > 0);
    assert!(totals.not_pending > 0 && totals.duplicates > 0 && totals.nacked > 0);
    assert!(totals.returned > 0 && totals.leaves > 0 && totals.rewinds > 0);
    assert!(totals.failed_acks > 0 && totals.acked_elsewhere > 0);
    assert!(totals.acked_held > 0 && totals.acked_held_returned > 0);
    match mode {
        DispatchMode::Draining => assert!(totals.unblocked > 0 && totals.draining > 0),
        DispatchMode::LastSent => assert!(totals.limited > 0),
        DispatchMode::OutOfOrder => {}
    }
}

#[test]
fn draining_mode_model() {
    run_mode(DispatchMode::Draining);
}

#[test]
fn last_sent_mode_model() {
    run_mode(DispatchMode::LastSent);
}

#[test]
fn out_of_order_mode_model() {
    run_mode(DispatchMode::OutOfOrder);
}

/// How a held message goes back to the dispatcher.
#[derive(Debug, Clone, Copy)]
enum Back {
    Leave,
    Nack,
    Redeliver,
}

/// A holds 1:0 and 1:1; the cursor acknowledges 1:1 directly (a skip, TTL, a shared cursor); a
/// dispatch runs; then 1:0 and 1:1 go back by `back`. 1:0 is sent again, 1:1 never is, and no
/// redelivery count is left for it.
fn acked_while_held(mode: DispatchMode, back: Back) {
    let mut cursor = Cursor::new(pos(1, -1), false);
    let mut sel = AutoSplitSelector::new(65536).unwrap();
    let mut core = DispatchCore::new(mode);
    let mut join = |core: &mut DispatchCore, id: u32, name: &str, cursor: &Cursor| {
        let impact = sel.add_consumer(id, name, &[]).unwrap();
        core.add_consumer(id, 10, cursor).unwrap();
        core.set_owners_from(sel.table()).unwrap();
        core.register_moved(&impact.removed, id).unwrap();
    };
    join(&mut core, 1, "a", &cursor);
    core.add_read(&[1, 1], &[0, 1], &[7, 7], &cursor).unwrap();
    let out = core.dispatch(&cursor).unwrap();
    assert_eq!(out.len(), 1);
    assert_eq!((out[0].consumer, &out[0].entries[..]), (1, &[0, 1][..]));
    join(&mut core, 2, "b", &cursor);

    assert!(cursor.ack(1, 1).unwrap()); // directly on the cursor: a still holds 1:1
    assert_eq!(core.dispatch(&cursor).unwrap(), vec![]);
    let back_to_replay = match back {
        Back::Leave => {
            let impact = sel.remove_consumer(1).unwrap();
            let returned = core.remove_consumer(1, &cursor).unwrap();
            core.set_owners_from(sel.table()).unwrap();
            core.register_moved(&impact.removed, 1).unwrap();
            returned
        }
        Back::Nack => {
            assert_eq!(core.nack(1, &[1, 1], &[0, 1], &cursor).unwrap(), 2);
            vec![pos(1, 0), pos(1, 1)]
        }
        Back::Redeliver => core.redeliver(1, &cursor).unwrap(),
    };
    assert_eq!(back_to_replay, vec![pos(1, 0), pos(1, 1)]);
    assert_eq!(core.replay_positions(), vec![pos(1, 0)]);
    assert_eq!(core.redelivery_count(pos(1, 1)), 0);
    let mut sent = Vec::new();
    for _ in 0..3 {
        for d in core.dispatch(&cursor).unwrap() {
            sent.extend(d.entries.iter().map(|&e| (d.consumer, e)));
        }
    }
    assert_eq!(sent.len(), 1, "{mode:?} {back:?}: sent {sent:?}");
    assert_eq!(sent[0].1, 0, "{mode:?} {back:?}: 1:1 was acked, yet sent");
    // A leaver's message is not counted as redelivered; a nacked or redelivered one is.
    let expect = u32::from(!matches!(back, Back::Leave));
    assert_eq!(core.redelivery_count(pos(1, 0)), expect);
    assert_eq!(core.redeliveries_tracked(), expect as usize);
    assert_eq!(core.replay_dropped_acked(), 1);
}

#[test]
fn a_position_acked_on_the_cursor_while_held_is_never_sent_again() {
    for mode in [
        DispatchMode::Draining,
        DispatchMode::LastSent,
        DispatchMode::OutOfOrder,
    ] {
        for back in [Back::Leave, Back::Nack, Back::Redeliver] {
            acked_while_held(mode, back);
        }
    }
}

/// Acked after it went back (acks happen at any time between calls): dropped at the send, with
/// its count, even when nothing else about the cursor changes before the dispatch.
#[test]
fn a_position_acked_while_it_waits_in_replay_is_dropped_with_its_count() {
    let mut cursor = Cursor::new(pos(1, -1), false);
    let mut core = DispatchCore::new(DispatchMode::Draining);
    core.add_consumer(1, 10, &cursor).unwrap();
    core.set_owners(&vec![1; 65536]).unwrap();
    core.add_read(&[1, 1], &[0, 1], &[7, 7], &cursor).unwrap();
    assert_eq!(core.dispatch(&cursor).unwrap()[0].entries, vec![0, 1]);
    assert_eq!(core.nack(1, &[1], &[1], &cursor).unwrap(), 1);
    assert_eq!(core.redelivery_count(pos(1, 1)), 1);
    cursor.ack(1, 1).unwrap();
    assert_eq!(core.dispatch(&cursor).unwrap(), vec![]);
    assert_eq!(core.replay_len(), 0);
    assert_eq!(core.redeliveries_tracked(), 0);
    // The last consumer leaving clears every count (Pulsar clears its redelivery tracker).
    assert_eq!(core.nack(1, &[1], &[0], &cursor).unwrap(), 1);
    assert_eq!(core.redelivery_count(pos(1, 0)), 1);
    core.remove_consumer(1, &cursor).unwrap();
    assert_eq!(core.redeliveries_tracked(), 0);
}

/// A read split by held bits in the core is the read split into columns first: random reads
/// (lengths across words of 64, random slots, random held bits) go to one core through
/// `add_read_split` and to another through `hold_delayed` + `add_read`; both send the same, and
/// the held entries come back the same once released. Malformed words change nothing.
#[test]
fn a_read_split_by_held_bits_is_the_read_split_into_columns() {
    let mut rng = Rng(0x51_7E_D0_0D);
    for run in 0..200 {
        let cursor = Cursor::new(pos(1, -1), false);
        let mut cores = [
            DispatchCore::new(DispatchMode::Draining),
            DispatchCore::new(DispatchMode::Draining),
        ];
        let mut sel = AutoSplitSelector::new(65536).unwrap();
        sel.add_consumer(1, "a", &[]).unwrap();
        for core in &mut cores {
            core.add_consumer(1, 100_000, &cursor).unwrap();
            core.set_owners_from(sel.table()).unwrap();
        }
        let mut next = 0i64;
        let mut held_all = Vec::new();
        for _ in 0..4 {
            let n = rng.below(300) as usize;
            let ls = vec![1i64; n];
            let es: Vec<i64> = (next..next + n as i64).collect();
            next += n as i64;
            let slots: Vec<i64> = (0..n).map(|_| 1 + rng.below(65535) as i64).collect();
            let held: Vec<bool> = (0..n).map(|_| rng.below(3) == 0).collect();
            let (words, _) = cursorkit_core::pack_bits(&held, |&h| h);
            if !n.is_multiple_of(64) {
                let mut stray = words.clone();
                *stray.last_mut().unwrap() |= 1 << 63;
                assert!(cores[0]
                    .add_read_split(&ls, &es, &slots, &stray, &cursor)
                    .is_err());
            }
            let mut short = words.clone();
            short.push(0);
            assert!(cores[0]
                .add_read_split(&ls, &es, &slots, &short, &cursor)
                .is_err());
            cores[0]
                .add_read_split(&ls, &es, &slots, &words, &cursor)
                .unwrap();
            let side = |keep: bool| -> (Vec<i64>, Vec<i64>, Vec<i64>) {
                let idx: Vec<usize> = (0..n).filter(|&i| held[i] == keep).collect();
                (
                    idx.iter().map(|&i| ls[i]).collect(),
                    idx.iter().map(|&i| es[i]).collect(),
                    idx.iter().map(|&i| slots[i]).collect(),
                )
            };
            let (hl, he, hs) = side(true);
            let (rl, re, rs) = side(false);
            cores[1].hold_delayed(&hl, &he, &hs).unwrap();
            cores[1].add_read(&rl, &re, &rs, &cursor).unwrap();
            held_all.extend(hl.into_iter().zip(he));
            note(format!("run {run}: read of {n}"));
            let a = cores[0].dispatch(&cursor).unwrap();
            assert_eq!(a, cores[1].dispatch(&cursor).unwrap());
        }
        let (hl, he): (Vec<i64>, Vec<i64>) = held_all.into_iter().unzip();
        for core in &mut cores {
            assert_eq!(core.release_delayed(&hl, &he, &cursor).unwrap(), hl.len());
        }
        assert_eq!(
            cores[0].dispatch(&cursor).unwrap(),
            cores[1].dispatch(&cursor).unwrap()
        );
    }
}
