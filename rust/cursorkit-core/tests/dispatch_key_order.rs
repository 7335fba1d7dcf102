//! Randomised model test of `DispatchCore`'s key-ordered nacks (beyond Pulsar): consumers run as
//! Pulsar's client does — they handle what they received in arrival order, and acks and nacks
//! leave on timers of their own (a sorted ack group; a nack after its delay), a message arriving
//! while its id's ack is pending is dropped — and join, leave and redeliver everything.
//!
//! Every accepted ack is traced back to the moment its consumer handled that message: per slot,
//! those moments follow position order. No accepted position is sent again, and consumers acking
//! everything drain the topic. The same walks without key order break the property (so the
//! check can fail).

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

use cursorkit_core::{Cursor, DispatchCore, DispatchMode, Position};

mod common;
use common::Rng;

const SLOTS_USED: u16 = 3;

#[derive(Default)]
struct Client {
    id: u32,
    queue: VecDeque<Position>,
    pending_acks: BTreeMap<Position, u64>,
    pending_nacks: Vec<Position>,
}

struct World {
    core: DispatchCore,
    cursor: Cursor,
    clients: Vec<Client>,
    owners: Vec<i64>,
    next_id: u32,
    next_entry: i64,
    clock: u64,
    slot_of: HashMap<Position, u16>,
    nacks_of: HashMap<Position, u32>,
    ack_moment: HashMap<Position, u64>,
    open: BTreeSet<Position>,
    /// Per slot: (position, the moment its accepted ack was decided).
    accepted: BTreeMap<u16, Vec<(Position, u64)>>,
    /// Consumers handle up to 48 messages a step (so ack groups pass the bulk threshold).
    batchy: bool,
    /// Acks parked by calls of at most 32 positions and by larger ones.
    parked_by: [u64; 2],
}

fn p(e: i64) -> Position {
    Position::new(1, e).unwrap()
}

impl World {
    fn new(ordered: bool, mode: DispatchMode, batchy: bool) -> Self {
        let mut core = DispatchCore::new(mode);
        if ordered {
            core.set_key_ordered_nacks(true).unwrap();
        }
        let mut w = Self {
            core,
            cursor: Cursor::new(Position::new(1, -1).unwrap(), false),
            clients: Vec::new(),
            owners: vec![-1; 1 + usize::from(SLOTS_USED)],
            next_id: 1,
            next_entry: 0,
            clock: 0,
            slot_of: HashMap::new(),
            nacks_of: HashMap::new(),
            ack_moment: HashMap::new(),
            open: BTreeSet::new(),
            accepted: BTreeMap::new(),
            batchy,
            parked_by: [0; 2],
        };
        let permits = if batchy { 64 } else { 8 };
        w.join(permits);
        w.join(permits);
        w
    }

    /// Slots split among the consumers in turn; the slots that moved drain on their old owner.
    fn reassign(&mut self, joined_or_left: u32) {
        let ids: Vec<u32> = self.clients.iter().map(|c| c.id).collect();
        let old = std::mem::take(&mut self.owners);
        let mut new = vec![-1i64; old.len()];
        if !ids.is_empty() {
            for (slot, owner) in new.iter_mut().enumerate().skip(1) {
                *owner = i64::from(ids[slot % ids.len()]);
            }
        }
        self.core.set_owners(&new).unwrap();
        let mut removed: Vec<(u32, Vec<(u32, u32)>)> = Vec::new();
        for slot in 1..old.len() {
            if old[slot] >= 0 && old[slot] != new[slot] && ids.contains(&(old[slot] as u32)) {
                removed.push((old[slot] as u32, vec![(slot as u32, slot as u32)]));
            }
        }
        self.core.register_moved(&removed, joined_or_left).unwrap();
        self.owners = new;
    }

    fn join(&mut self, permits: u64) {
        let id = self.next_id;
        self.next_id += 1;
        self.core.add_consumer(id, permits, &self.cursor).unwrap();
        self.clients.push(Client {
            id,
            ..Client::default()
        });
        self.reassign(id);
    }

    fn leave(&mut self, i: usize) {
        let c = self.clients.remove(i);
        self.core.remove_consumer(c.id, &self.cursor).unwrap();
        self.reassign(c.id);
    }

    fn read(&mut self, rng: &mut Rng) {
        let n = 1 + rng.below(7) as usize;
        let (mut ls, mut es, mut ss) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..n {
            let pos = p(self.next_entry);
            self.next_entry += 1;
            let slot = 1 + rng.below(u64::from(SLOTS_USED)) as u16;
            self.slot_of.insert(pos, slot);
            self.open.insert(pos);
            ls.push(1);
            es.push(pos.entry_id);
            ss.push(i64::from(slot));
        }
        self.core.add_read(&ls, &es, &ss, &self.cursor).unwrap();
    }

    fn dispatch(&mut self) {
        for d in self.core.dispatch(&self.cursor).unwrap() {
            let c = self
                .clients
                .iter_mut()
                .find(|c| c.id == d.consumer)
                .unwrap();
            for &e in &d.entries {
                let pos = p(e);
                assert!(
                    self.open.contains(&pos),
                    "{pos} sent again after its ack was accepted"
                );
                if !c.pending_acks.contains_key(&pos) {
                    c.queue.push_back(pos);
                }
            }
        }
    }

    fn handle(&mut self, i: usize, nack: bool) {
        let Some(pos) = self.clients[i].queue.pop_front() else {
            return;
        };
        self.clock += 1;
        let nacks = self.nacks_of.entry(pos).or_insert(0);
        if nack && *nacks < 2 {
            *nacks += 1;
            self.clients[i].pending_nacks.push(pos);
        } else {
            self.clients[i].pending_acks.insert(pos, self.clock);
        }
    }

    fn flush_acks(&mut self, i: usize) {
        let acks = std::mem::take(&mut self.clients[i].pending_acks);
        if acks.is_empty() {
            return;
        }
        let (mut ls, mut es) = (Vec::new(), Vec::new());
        for (&pos, &moment) in &acks {
            self.ack_moment.insert(pos, moment);
            ls.push(pos.ledger_id);
            es.push(pos.entry_id);
        }
        let id = self.clients[i].id;
        let out = self.core.ack(id, &ls, &es, &mut self.cursor).unwrap();
        self.parked_by[usize::from(ls.len() > 32)] += out.parked;
        let now: Vec<Position> = self
            .open
            .iter()
            .copied()
            .filter(|q| self.cursor.is_acked(q.ledger_id, q.entry_id).unwrap())
            .collect();
        for q in now {
            self.open.remove(&q);
            self.accepted
                .entry(self.slot_of[&q])
                .or_default()
                .push((q, self.ack_moment[&q]));
        }
    }

    fn flush_nacks(&mut self, i: usize) {
        let nacks = std::mem::take(&mut self.clients[i].pending_nacks);
        if !nacks.is_empty() {
            let ls = vec![1i64; nacks.len()];
            let es: Vec<i64> = nacks.iter().map(|q| q.entry_id).collect();
            self.core
                .nack(self.clients[i].id, &ls, &es, &self.cursor)
                .unwrap();
        }
    }

    fn redeliver_all(&mut self, i: usize) {
        self.flush_acks(i);
        self.clients[i].queue.clear();
        self.clients[i].pending_nacks.clear();
        self.core
            .redeliver(self.clients[i].id, &self.cursor)
            .unwrap();
    }

    /// Per slot, the moments of the accepted acks in position order are increasing.
    fn in_order(&self) -> bool {
        self.accepted.values().all(|seq| {
            let mut seq = seq.clone();
            seq.sort();
            seq.windows(2).all(|w| w[0].1 < w[1].1)
        })
    }

    fn step(&mut self, rng: &mut Rng, stable: bool) {
        let n = self.clients.len();
        let i = rng.below(n as u64) as usize;
        match rng.below(20) {
            0..=2 => self.read(rng),
            3..=5 => self.dispatch(),
            6..=9 => {
                let count = if self.batchy { 1 + rng.below(48) } else { 1 };
                for _ in 0..count {
                    self.handle(i, rng.chance(1, 12));
                }
            }
            10..=11 => self.handle(i, true),
            12..=13 => self.flush_acks(i),
            14..=15 => self.flush_nacks(i),
            16 => {
                let id = self.clients[i].id;
                let more = if self.batchy {
                    1 + rng.below(64)
                } else {
                    1 + rng.below(4)
                };
                self.core.add_permits(id, more).unwrap();
            }
            17 => self.redeliver_all(i),
            18 if !stable && n < 3 => self.join(1 + rng.below(8)),
            19 if !stable && n > 1 => self.leave(i),
            _ => {}
        }
    }

    fn drain(&mut self) {
        for c in &self.clients {
            self.core.add_permits(c.id, 1000).unwrap();
        }
        for _ in 0..200 {
            self.dispatch();
            for i in 0..self.clients.len() {
                self.flush_nacks(i);
                while !self.clients[i].queue.is_empty() {
                    self.handle(i, false);
                }
                self.flush_acks(i);
            }
            if self.open.is_empty() {
                return;
            }
        }
        panic!(
            "not drained: {} open, {:?}",
            self.open.len(),
            self.core.key_order_figures()
        );
    }
}

/// Draining mode with joins and leaves; last-sent mode with a stable membership (PIP-282 itself
/// lets a joiner handle a key while a leaver's earlier message of it is on its way back).
fn walk(seed: u64, ordered: bool, mode: DispatchMode) -> World {
    let mut rng = Rng(seed);
    let mut w = World::new(ordered, mode, seed % 2 == 1);
    let stable = mode == DispatchMode::LastSent;
    for _ in 0..400 {
        w.step(&mut rng, stable);
        if ordered {
            assert!(w.in_order(), "seed {seed}: {:?}", w.accepted);
            let f = w.core.key_order_figures();
            assert_eq!(
                f.tracked,
                w.core.pending_total(),
                "seed {seed}: key order lost track"
            );
        }
    }
    w.drain();
    w
}

#[test]
fn accepted_acks_follow_key_order() {
    let mut taken_back = 0;
    let mut dropped = 0;
    let mut parked = [0u64; 2];
    for seed in 0..150 {
        for mode in [DispatchMode::Draining, DispatchMode::LastSent] {
            let w = walk(seed, true, mode);
            assert!(w.in_order(), "seed {seed} {mode:?}: {:?}", w.accepted);
            let f = w.core.key_order_figures();
            assert_eq!((f.parked_acks, f.held_keys, f.unanswered_copies), (0, 0, 0));
            taken_back += f.taken_back;
            dropped += f.parked_dropped;
            parked[0] += w.parked_by[0];
            parked[1] += w.parked_by[1];
        }
    }
    // The walks reach the races: copies taken back, parked acks dropped at a nack, and acks
    // parked by the bulk path (groups over 32) as well as one by one.
    assert!(
        taken_back > 1000 && dropped > 50 && parked[0] > 50 && parked[1] > 50,
        "{taken_back} {dropped} {parked:?}"
    );
}

#[test]
fn without_key_order_the_same_walks_reorder_keys() {
    let broken = (0..50)
        .filter(|&seed| !walk(seed, false, DispatchMode::Draining).in_order())
        .count();
    assert!(broken > 10, "only {broken} of 50 walks reordered a key");
}

#[test]
fn out_of_order_mode_refuses_and_parked_acks_keep_it_on() {
    let mut core = DispatchCore::new(DispatchMode::OutOfOrder);
    assert!(core.set_key_ordered_nacks(true).is_err());
    let mut cursor = Cursor::new(Position::new(1, -1).unwrap(), false);
    let mut core = DispatchCore::new(DispatchMode::Draining);
    core.add_consumer(1, 10, &cursor).unwrap();
    core.set_owners(&[1; 8]).unwrap();
    core.add_read(&[1, 1], &[0, 1], &[5, 5], &cursor).unwrap();
    core.dispatch(&cursor).unwrap();
    core.set_key_ordered_nacks(true).unwrap(); // what is in flight is counted
    let out = core.ack(1, &[1], &[1], &mut cursor).unwrap();
    assert_eq!(out.parked, 1);
    assert!(core.set_key_ordered_nacks(false).is_err());
    let out = core.ack(1, &[1], &[0], &mut cursor).unwrap();
    assert_eq!(out.acked, 2); // 0, then the parked ack of 1
    assert_eq!(cursor.mark_delete(), p(1));
    core.set_key_ordered_nacks(false).unwrap();
    assert!(!core.key_ordered_nacks());
}
