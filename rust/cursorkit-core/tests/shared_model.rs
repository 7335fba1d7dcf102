//! Randomised model test of `SharedCore`, the Shared subscription's dispatch.
//!
//! Random operations (reads of entries carrying 1–3 messages, dispatch, acks from any consumer,
//! acks on the cursor outside the core, cumulative acks, nacks, redelivery of everything a
//! consumer holds, permits, pauses, consumers joining at random priority levels and leaving) run
//! against a model of what each consumer holds, what waits, what the cursor acked and the
//! redelivery counts. The model does not predict the round-robin choice; it checks what any
//! correct choice must satisfy. After every dispatch: what was sent is the queue's first positions
//! in order, none acknowledged; each consumer received only while it could take messages and at
//! most one entry beyond its turn's quota; the queue is left non-empty only when no consumer can
//! take more; a consumer of a worse priority level received only if every better one could take
//! no more; redelivery counts are the model's. After every step a position is held by at most one
//! consumer and the core's unacked figures are the model's. At the end, consumers acking
//! everything drain the topic to its last position.
//!
//! `SHARED_MODEL_SEEDS=n` and `SHARED_MODEL_STEPS=n` make a longer soak.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use cursorkit_core::{Cursor, Position, SharedCore};

mod common;
use common::Rng;

struct Model {
    core: SharedCore,
    cursor: Cursor,
    /// id → (priority, permits, held positions)
    consumers: BTreeMap<u32, (i32, i64, BTreeSet<Position>, bool)>,
    queue: BTreeSet<Position>,
    messages: HashMap<Position, u32>,
    counts: HashMap<Position, u32>,
    next_entry: i64,
    next_id: u32,
    per_consumer: u64,
}

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

impl Model {
    fn new(rng: &mut Rng) -> Self {
        let mut core = SharedCore::new(1 + rng.below(25) as u32);
        let per_consumer = rng.pick(&[0u64, 5, 40]);
        core.set_limits(per_consumer, 0);
        Self {
            core,
            cursor: Cursor::new(Position::new(1, -1).unwrap(), false),
            consumers: BTreeMap::new(),
            queue: BTreeSet::new(),
            messages: HashMap::new(),
            counts: HashMap::new(),
            next_entry: 0,
            next_id: 1,
            per_consumer,
        }
    }

    fn acked(&self, p: Position) -> bool {
        self.cursor.is_acked(p.ledger_id, p.entry_id).unwrap()
    }

    fn holder(&self, p: Position) -> Option<u32> {
        self.consumers
            .iter()
            .find(|(_, c)| c.2.contains(&p))
            .map(|(&id, _)| id)
    }

    fn unacked(&self, id: u32) -> u64 {
        self.consumers[&id]
            .2
            .iter()
            .map(|p| u64::from(self.messages[p]))
            .sum()
    }

    fn can_take(&self, id: u32) -> bool {
        let c = &self.consumers[&id];
        c.1 > 0 && !c.3 && (self.per_consumer == 0 || self.unacked(id) < self.per_consumer)
    }

    /// Positions acked on the cursor leave the model's queue (the core drops them when met).
    fn forget_acked(&mut self) {
        let acked: Vec<Position> = self
            .queue
            .iter()
            .copied()
            .filter(|&p| self.acked(p))
            .collect();
        for p in acked {
            self.queue.remove(&p);
            self.counts.remove(&p);
        }
    }

    fn read(&mut self, rng: &mut Rng) {
        let n = rng.below(12) as usize;
        let (mut ls, mut es, mut ms) = (vec![], vec![], vec![]);
        for _ in 0..n {
            let p = Position::new(1, self.next_entry).unwrap();
            self.next_entry += 1;
            let m = 1 + rng.below(3) as u32;
            self.messages.insert(p, m);
            ls.push(1);
            es.push(p.entry_id);
            ms.push(i64::from(m));
            self.queue.insert(p);
        }
        self.core.add_read(&ls, &es, &ms, &self.cursor).unwrap();
    }

    fn dispatch(&mut self) {
        self.forget_acked();
        let before: BTreeMap<u32, (i64, bool)> = self
            .consumers
            .keys()
            .map(|&id| (id, (self.consumers[&id].1, self.can_take(id))))
            .collect();
        let out = self.core.dispatch(&self.cursor).unwrap();
        let mut sent: Vec<Position> = vec![];
        let mut got: BTreeMap<u32, u32> = BTreeMap::new();
        for s in &out {
            let c = self
                .consumers
                .get_mut(&s.consumer)
                .expect("sent to a registered consumer");
            let mut last: Option<Position> = None;
            for ((&l, &e), &count) in s.ledgers.iter().zip(&s.entries).zip(&s.counts) {
                let p = Position::new(l, e).unwrap();
                assert!(
                    last.is_none_or(|q| q < p),
                    "a consumer's deliveries are in order"
                );
                last = Some(p);
                assert!(
                    !self.cursor.is_acked(l, e).unwrap(),
                    "{p} sent although acked"
                );
                assert_eq!(
                    count,
                    self.counts.get(&p).copied().unwrap_or(0),
                    "count of {p}"
                );
                let m = self.messages[&p];
                c.1 -= i64::from(m);
                c.2.insert(p);
                *got.entry(s.consumer).or_default() += m;
                sent.push(p);
            }
        }
        sent.sort();
        let first: Vec<Position> = self.queue.iter().copied().take(sent.len()).collect();
        assert_eq!(sent, first, "what is sent is the queue's first positions");
        for p in &sent {
            self.queue.remove(p);
        }
        let batch = i64::from(self.core.round_robin_batch());
        for (&id, &m) in &got {
            let (permits, could) = before[&id];
            assert!(
                could,
                "consumer {id} received while it could not take messages"
            );
            // Each turn gives at most one entry (≤ 3 messages) beyond min(permits, batch).
            assert!(
                i64::from(m) < permits + 3 * (1 + i64::from(m) / batch.max(1)) + 3,
                "overshoot"
            );
        }
        if !self.queue.is_empty() {
            for &id in self.consumers.keys() {
                assert!(
                    !self.can_take(id),
                    "queue left while consumer {id} can take"
                );
            }
        }
        for &id in got.keys() {
            let pr = self.consumers[&id].0;
            for (&other, c) in &self.consumers {
                if c.0 < pr {
                    assert!(
                        !self.can_take(other),
                        "worse priority {pr} served while {other} can take"
                    );
                }
            }
        }
    }

    fn ack_some(&mut self, rng: &mut Rng) {
        let held: Vec<Position> = self
            .consumers
            .values()
            .flat_map(|c| c.2.iter().copied())
            .collect();
        let mut chosen: Vec<Position> = held.into_iter().filter(|_| rng.chance(1, 3)).collect();
        if rng.chance(1, 4) && self.next_entry > 0 {
            chosen.push(Position::new(1, rng.below(self.next_entry as u64) as i64).unwrap());
        }
        let ls: Vec<i64> = chosen.iter().map(|p| p.ledger_id).collect();
        let es: Vec<i64> = chosen.iter().map(|p| p.entry_id).collect();
        self.core.ack(&ls, &es, &mut self.cursor).unwrap();
        for p in chosen {
            if let Some(id) = self.holder(p) {
                self.consumers.get_mut(&id).unwrap().2.remove(&p);
            }
            self.queue.remove(&p);
            self.counts.remove(&p);
        }
    }

    fn ack_outside(&mut self, rng: &mut Rng) {
        if self.next_entry == 0 {
            return;
        }
        let e = rng.below(self.next_entry as u64) as i64;
        self.cursor.ack(1, e).unwrap();
        // Held positions stay held (the consumer's ack will come); queued ones are dropped later.
    }

    fn cumulative(&mut self, rng: &mut Rng) {
        if self.next_entry == 0 {
            return;
        }
        let e = rng.below(self.next_entry as u64) as i64;
        let upto = Position::new(1, e).unwrap();
        self.core.ack_cumulative(1, e, &mut self.cursor).unwrap();
        for c in self.consumers.values_mut() {
            c.2.retain(|&p| p > upto);
        }
        self.queue.retain(|&p| p > upto);
        self.counts.retain(|&p, _| p > upto);
    }

    fn nack(&mut self, rng: &mut Rng, all: bool) {
        let Some(&id) = self
            .consumers
            .keys()
            .nth(rng.below(self.consumers.len() as u64) as usize)
        else {
            return;
        };
        let held: Vec<Position> = self.consumers[&id].2.iter().copied().collect();
        let chosen: Vec<Position> = if all {
            held
        } else {
            held.into_iter().filter(|_| rng.chance(1, 2)).collect()
        };
        if all {
            self.core.redeliver_all(id, &self.cursor).unwrap();
        } else {
            let ls: Vec<i64> = chosen.iter().map(|p| p.ledger_id).collect();
            let es: Vec<i64> = chosen.iter().map(|p| p.entry_id).collect();
            self.core.nack(id, &ls, &es, &self.cursor).unwrap();
        }
        for p in chosen {
            self.consumers.get_mut(&id).unwrap().2.remove(&p);
            if self.acked(p) {
                self.counts.remove(&p);
            } else {
                *self.counts.entry(p).or_default() += 1;
                self.queue.insert(p);
            }
        }
    }

    fn join(&mut self, rng: &mut Rng) {
        let id = self.next_id;
        self.next_id += 1;
        let priority = rng.below(3) as i32;
        let permits = rng.below(30) as i64;
        self.core
            .add_consumer(id, priority, permits as u64)
            .unwrap();
        self.consumers
            .insert(id, (priority, permits, BTreeSet::new(), false));
    }

    fn leave(&mut self, rng: &mut Rng) {
        let Some(&id) = self
            .consumers
            .keys()
            .nth(rng.below(self.consumers.len() as u64) as usize)
        else {
            return;
        };
        let gone = self.core.remove_consumer(id, &self.cursor).unwrap();
        let (_, _, held, _) = self.consumers.remove(&id).unwrap();
        assert_eq!(gone, held.iter().copied().collect::<Vec<_>>());
        for p in held {
            if !self.acked(p) {
                self.queue.insert(p);
            } else {
                self.counts.remove(&p);
            }
        }
        if self.consumers.is_empty() {
            self.counts.clear();
        }
    }

    fn check(&self) {
        let figures = self.core.figures();
        assert_eq!(figures.len(), self.consumers.len());
        for f in figures {
            let c = &self.consumers[&f.id];
            assert_eq!(f.permits, c.1, "permits of {}", f.id);
            assert_eq!(f.unacked, self.unacked(f.id), "unacked of {}", f.id);
            assert_eq!(
                self.core.held_by(f.id),
                c.2.iter().copied().collect::<Vec<_>>()
            );
        }
        let mut seen = BTreeSet::new();
        for c in self.consumers.values() {
            for p in &c.2 {
                assert!(seen.insert(*p), "{p} held twice");
                assert!(!self.queue.contains(p), "{p} held and queued");
            }
        }
        for (p, &n) in &self.counts {
            assert_eq!(self.core.redelivery_count(*p), n, "count of {p}");
        }
        let queued: BTreeSet<Position> = self.core.queued().filter(|&p| !self.acked(p)).collect();
        let model: BTreeSet<Position> = self
            .queue
            .iter()
            .copied()
            .filter(|&p| !self.acked(p))
            .collect();
        assert_eq!(queued, model, "queue");
    }

    fn drain(&mut self) {
        if self.consumers.is_empty() {
            self.join(&mut Rng(1));
        }
        let ids: Vec<u32> = self.consumers.keys().copied().collect();
        self.core.set_limits(0, 0);
        for &id in &ids {
            self.core.set_paused(id, false).unwrap();
            self.core.add_permits(id, 1 << 40).unwrap();
        }
        for _ in 0..10_000 {
            let out = self.core.dispatch(&self.cursor).unwrap();
            for s in &out {
                self.core
                    .ack(&s.ledgers, &s.entries, &mut self.cursor)
                    .unwrap();
            }
            for &id in &ids {
                let held = self.core.held_by(id);
                let ls: Vec<i64> = held.iter().map(|p| p.ledger_id).collect();
                let es: Vec<i64> = held.iter().map(|p| p.entry_id).collect();
                self.core.ack(&ls, &es, &mut self.cursor).unwrap();
            }
            if self.core.queue_len() == 0 && self.core.held_len() == 0 {
                break;
            }
        }
        if self.next_entry > 0 {
            assert_eq!(
                self.cursor.mark_delete(),
                Position::new(1, self.next_entry - 1).unwrap()
            );
        }
        assert_eq!(self.core.unacked_total(), 0);
    }
}

fn run(seed: u64, steps: u64) {
    let mut rng = Rng(seed);
    let mut m = Model::new(&mut rng);
    for _ in 0..steps {
        match rng.below(14) {
            0 | 1 => m.read(&mut rng),
            2..=4 => m.dispatch(),
            5 | 6 => m.ack_some(&mut rng),
            7 => m.ack_outside(&mut rng),
            8 if rng.chance(1, 4) => m.cumulative(&mut rng),
            9 => {
                let all = rng.chance(1, 3);
                m.nack(&mut rng, all)
            }
            10 if m.consumers.len() < 6 => m.join(&mut rng),
            11 if rng.chance(1, 2) => m.leave(&mut rng),
            12 => {
                if let Some(&id) = m.consumers.keys().next() {
                    let n = rng.below(20);
                    m.core.add_permits(id, n).unwrap();
                    m.consumers.get_mut(&id).unwrap().1 += n as i64;
                }
            }
            13 => {
                if let Some(&id) = m.consumers.keys().last() {
                    let paused = rng.chance(1, 3);
                    m.core.set_paused(id, paused).unwrap();
                    m.consumers.get_mut(&id).unwrap().3 = paused;
                }
            }
            _ => {}
        }
        m.check();
    }
    m.drain();
}

#[test]
fn shared_core_matches_the_model() {
    let seeds = env("SHARED_MODEL_SEEDS", 200);
    let steps = env("SHARED_MODEL_STEPS", 300);
    for seed in 0..seeds {
        run(seed, steps);
    }
}
