//! Randomised model test of `DispatchCore`'s per-key in-flight cap (`max_unacked_per_key`, beyond
//! Pulsar): reads, dispatches, acks, nacks, permits and consumers leaving and joining in random
//! order, against a model of what is in flight per slot taken from what each dispatch returned.
//!
//! After every step: no slot has more than the cap in flight, the core's count of each slot is
//! the model's, and a held slot is reported as held for the cap. At the end, consumers acking
//! everything drain the topic: every read position is acknowledged.

use std::collections::{BTreeMap, HashMap};

use cursorkit_core::{BlockReason, Cursor, DispatchCore, DispatchMode, Position};

mod common;
use common::Rng;

const SLOTS_USED: u64 = 6;

struct Run {
    core: DispatchCore,
    cursor: Cursor,
    cap: u64,
    consumers: Vec<u32>,
    next_id: u32,
    next_entry: i64,
    /// In flight by position: (consumer, slot).
    held: BTreeMap<Position, (u32, u16)>,
    slot_of: HashMap<Position, u16>,
}

impl Run {
    fn new(seed: u64) -> Self {
        let mut rng = Rng(seed);
        let cap = 1 + rng.below(3);
        let cursor = Cursor::new(Position::new(1, -1).unwrap(), false);
        let mut core = DispatchCore::new(DispatchMode::OutOfOrder);
        core.set_max_unacked_per_key(cap);
        let mut run = Self {
            core,
            cursor,
            cap,
            consumers: Vec::new(),
            next_id: 1,
            next_entry: 0,
            held: BTreeMap::new(),
            slot_of: HashMap::new(),
        };
        run.join(5);
        run.join(5);
        run
    }

    /// Slots `1..=SLOTS_USED` split between the consumers in turn.
    fn owners(&mut self) {
        let mut table = vec![-1i64; 1 + SLOTS_USED as usize];
        if !self.consumers.is_empty() {
            for (slot, owner) in table.iter_mut().enumerate().skip(1) {
                *owner = i64::from(self.consumers[slot % self.consumers.len()]);
            }
        }
        self.core.set_owners(&table).unwrap();
    }

    fn join(&mut self, permits: u64) {
        let id = self.next_id;
        self.next_id += 1;
        self.core.add_consumer(id, permits, &self.cursor).unwrap();
        self.consumers.push(id);
        self.owners();
    }

    fn leave(&mut self, id: u32) {
        self.core.remove_consumer(id, &self.cursor).unwrap();
        self.consumers.retain(|&c| c != id);
        self.held.retain(|_, (c, _)| *c != id);
        self.owners();
    }

    fn read(&mut self, rng: &mut Rng) {
        let n = 1 + rng.below(8) as usize;
        let mut ls = Vec::new();
        let mut es = Vec::new();
        let mut slots = Vec::new();
        for _ in 0..n {
            let slot = 1 + rng.below(SLOTS_USED) as u16;
            let p = Position::new(1, self.next_entry).unwrap();
            self.next_entry += 1;
            self.slot_of.insert(p, slot);
            ls.push(1);
            es.push(p.entry_id);
            slots.push(i64::from(slot));
        }
        self.core.add_read(&ls, &es, &slots, &self.cursor).unwrap();
    }

    fn dispatch(&mut self) {
        for d in self.core.dispatch(&self.cursor).unwrap() {
            for (&l, &e) in d.ledgers.iter().zip(&d.entries) {
                let p = Position::new(l, e).unwrap();
                assert!(
                    !self.cursor.is_acked(l, e).unwrap(),
                    "{p} sent after its ack"
                );
                let before = self.held.insert(p, (d.consumer, self.slot_of[&p]));
                assert!(before.is_none(), "{p} sent while in flight");
            }
        }
        self.check();
        for (slot, b) in self.core.blocked() {
            if b.reason == BlockReason::KeyUnackedLimit {
                assert!(
                    self.in_flight(slot) >= self.cap,
                    "slot {slot} held below the cap"
                );
            }
        }
    }

    fn in_flight(&self, slot: u16) -> u64 {
        self.held.values().filter(|(_, s)| *s == slot).count() as u64
    }

    fn check(&self) {
        for slot in 1..=SLOTS_USED as u16 {
            let n = self.in_flight(slot);
            assert!(
                n <= self.cap,
                "slot {slot}: {n} in flight, cap {}",
                self.cap
            );
            assert_eq!(
                self.core.key_unacked(slot),
                n,
                "slot {slot}: the core's count"
            );
        }
    }

    fn pick_held(&self, rng: &mut Rng) -> Option<(Position, u32)> {
        if self.held.is_empty() {
            return None;
        }
        let i = rng.below(self.held.len() as u64) as usize;
        self.held.iter().nth(i).map(|(&p, &(c, _))| (p, c))
    }

    fn step(&mut self, rng: &mut Rng) {
        match rng.below(10) {
            0..=2 => self.read(rng),
            3 | 4 => self.dispatch(),
            5 | 6 => {
                if let Some((p, holder)) = self.pick_held(rng) {
                    // from the holder or another consumer: either way it leaves flight
                    let by = if rng.chance(1, 4) {
                        *self.consumers.first().unwrap()
                    } else {
                        holder
                    };
                    self.core
                        .ack(by, &[p.ledger_id], &[p.entry_id], &mut self.cursor)
                        .unwrap();
                    self.held.remove(&p);
                }
            }
            7 => {
                if let Some((p, holder)) = self.pick_held(rng) {
                    self.core
                        .nack(holder, &[p.ledger_id], &[p.entry_id], &self.cursor)
                        .unwrap();
                    self.held.remove(&p);
                }
            }
            8 => {
                let id = rng.pick(&self.consumers);
                self.core.add_permits(id, 1 + rng.below(4)).unwrap();
            }
            _ => {
                if self.consumers.len() > 1 && rng.chance(1, 2) {
                    let id = rng.pick(&self.consumers);
                    self.leave(id);
                } else if self.consumers.len() < 4 {
                    self.join(1 + rng.below(4));
                }
            }
        }
        self.check();
    }

    fn drain(&mut self) {
        for id in self.consumers.clone() {
            self.core.add_permits(id, 1_000_000).unwrap();
        }
        for _ in 0..10_000 {
            self.dispatch();
            if self.held.is_empty() {
                break;
            }
            let all: Vec<(Position, u32)> = self.held.iter().map(|(&p, &(c, _))| (p, c)).collect();
            for (p, c) in all {
                self.core
                    .ack(c, &[p.ledger_id], &[p.entry_id], &mut self.cursor)
                    .unwrap();
                self.held.remove(&p);
            }
        }
        let last = Position::new(1, self.next_entry - 1).unwrap();
        assert!(
            self.next_entry == 0 || self.cursor.mark_delete() == last,
            "the topic did not drain"
        );
    }
}

#[test]
fn no_key_has_more_than_the_cap_in_flight() {
    for seed in 0..200 {
        let mut rng = Rng(seed ^ 0xCA9);
        let mut run = Run::new(seed);
        for _ in 0..300 {
            run.step(&mut rng);
        }
        run.drain();
    }
}

#[test]
fn a_batch_counts_as_its_messages_and_still_goes_alone() {
    let mut run = Run::new(1);
    run.core.set_max_unacked_per_key(3);
    run.cap = 3;
    run.core.add_permits(1, 100).unwrap();
    run.core.add_permits(2, 100).unwrap();
    run.core.set_batch_sizes(&[1, 1], &[0, 1], &[5, 2]).unwrap();
    run.core
        .add_read(&[1, 1, 1], &[0, 1, 2], &[2, 2, 2], &run.cursor)
        .unwrap();
    let out = run.core.dispatch(&run.cursor).unwrap();
    let sent: Vec<i64> = out.iter().flat_map(|d| d.entries.clone()).collect();
    assert_eq!(
        sent,
        vec![0],
        "a batch of 5 goes alone, then the slot is held"
    );
    assert_eq!(run.core.key_unacked(2), 5);
    assert_eq!(run.core.blocked()[0].1.reason, BlockReason::KeyUnackedLimit);
    run.core
        .ack(out[0].consumer, &[1], &[0], &mut run.cursor)
        .unwrap();
    assert_eq!(run.core.key_unacked(2), 0);
    let out = run.core.dispatch(&run.cursor).unwrap();
    let sent: Vec<i64> = out.iter().flat_map(|d| d.entries.clone()).collect();
    assert_eq!(sent, vec![1, 2], "2 + 1 messages fit the cap of 3");
    run.core.set_max_unacked_per_key(0);
    assert_eq!(run.core.key_unacked(2), 0);
}
