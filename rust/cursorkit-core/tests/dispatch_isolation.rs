//! Randomised model test of stuck-consumer isolation (beyond Pulsar): reads, dispatches, acks,
//! nacks, consumers joining, leaving, getting stuck and recovering, with the re-reads a broker
//! makes from its log, against a model of what was read, sent and acknowledged.
//!
//! After every dispatch: nothing acknowledged is sent again, each slot's first deliveries keep
//! position order, and no entry of a stuck consumer's slots waits in the replay queue (they are
//! spilled: the queue holds only what others can take). At the end, with everyone recovered and
//! acking, the topic drains: nothing spilled was lost.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use cursorkit_core::{Cursor, DispatchCore, DispatchMode, Position};

mod common;
use common::Rng;

const SLOTS_USED: u16 = 6;

struct World {
    core: DispatchCore,
    cursor: Cursor,
    consumers: Vec<u32>,
    stuck: BTreeSet<u32>,
    owners: Vec<i64>,
    next_id: u32,
    next_entry: i64,
    /// The log: every position read, with its slot.
    log: BTreeMap<Position, u16>,
    held: BTreeMap<Position, u32>,
    acked: BTreeSet<Position>,
    first_sent: HashMap<u16, Vec<Position>>,
    ever_sent: BTreeSet<Position>,
    spilled_seen: u64,
    /// Log entries handed to re-reads, in total.
    log_reread: u64,
    /// Re-reads made (spans or parts of them).
    rereads: u64,
    /// Log entries a re-read reads at most (the rest of the span at the next one).
    chunk: usize,
    /// Entries a re-read may bring back (None: all): small ones leave the rest for later rounds.
    limit: Option<usize>,
}

fn p(e: i64) -> Position {
    Position::new(1, e).unwrap()
}

impl World {
    fn new(limit: Option<usize>, chunk: usize) -> Self {
        let mut w = Self {
            core: DispatchCore::new(DispatchMode::Draining),
            cursor: Cursor::new(Position::new(1, -1).unwrap(), false),
            consumers: Vec::new(),
            stuck: BTreeSet::new(),
            owners: vec![-1; 1 + usize::from(SLOTS_USED)],
            next_id: 1,
            next_entry: 0,
            log: BTreeMap::new(),
            held: BTreeMap::new(),
            acked: BTreeSet::new(),
            first_sent: HashMap::new(),
            ever_sent: BTreeSet::new(),
            spilled_seen: 0,
            log_reread: 0,
            rereads: 0,
            chunk,
            limit,
        };
        for _ in 0..3 {
            w.join(4);
        }
        w
    }

    fn reassign(&mut self, changed: u32) {
        let old = std::mem::take(&mut self.owners);
        let mut new = vec![-1i64; old.len()];
        for (slot, owner) in new.iter_mut().enumerate().skip(1) {
            if !self.consumers.is_empty() {
                *owner = i64::from(self.consumers[slot % self.consumers.len()]);
            }
        }
        self.core.set_owners(&new).unwrap();
        let removed: Vec<(u32, Vec<(u32, u32)>)> = (1..old.len())
            .filter(|&s| old[s] >= 0 && old[s] != new[s])
            .filter(|&s| self.consumers.contains(&(old[s] as u32)))
            .map(|s| (old[s] as u32, vec![(s as u32, s as u32)]))
            .collect();
        self.core.register_moved(&removed, changed).unwrap();
        self.owners = new;
    }

    fn join(&mut self, permits: u64) {
        let id = self.next_id;
        self.next_id += 1;
        self.core.add_consumer(id, permits, &self.cursor).unwrap();
        self.consumers.push(id);
        self.reassign(id);
    }

    fn leave(&mut self, id: u32) {
        self.core.remove_consumer(id, &self.cursor).unwrap();
        self.consumers.retain(|&c| c != id);
        self.stuck.remove(&id);
        self.held.retain(|_, c| *c != id);
        self.reassign(id);
        self.reread();
    }

    fn read(&mut self, rng: &mut Rng) {
        let n = 1 + rng.below(10) as usize;
        let (mut ls, mut es, mut ss) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..n {
            let pos = p(self.next_entry);
            self.next_entry += 1;
            let slot = 1 + rng.below(u64::from(SLOTS_USED)) as u16;
            self.log.insert(pos, slot);
            ls.push(1);
            es.push(pos.entry_id);
            ss.push(i64::from(slot));
        }
        self.core.add_read(&ls, &es, &ss, &self.cursor).unwrap();
    }

    /// What a broker does each round: re-read the spans the core hands out, from the log, in
    /// parts of `chunk` entries (each part is done with: the next span starts after it).
    fn reread(&mut self) {
        let mut floor: Option<Position> = None;
        while let Some((lo, hi)) = self.core.take_reread() {
            // Progress: a re-read brings some back, or the part read is not named again.
            assert!(
                floor.is_none_or(|f| lo > f),
                "{lo}..{hi} named again after reading through {floor:?}"
            );
            let part: Vec<(Position, u16)> = self
                .log
                .range(lo..=hi)
                .take(self.chunk)
                .map(|(&q, &s)| (q, s))
                .collect();
            let read_to = match part.last() {
                Some(&(q, _)) if part.len() == self.chunk && q < hi => Some(q),
                _ => None, // the whole span
            };
            let ls: Vec<i64> = part.iter().map(|(q, _)| q.ledger_id).collect();
            let es: Vec<i64> = part.iter().map(|(q, _)| q.entry_id).collect();
            let ss: Vec<i64> = part.iter().map(|(_, s)| i64::from(*s)).collect();
            let back = self
                .core
                .add_reread(&ls, &es, &ss, self.limit, read_to, &self.cursor)
                .unwrap();
            self.log_reread += part.len() as u64;
            self.rereads += 1;
            // Progress: each spilled entry is read back at most once per spill.
            let f = self.core.isolation_figures();
            assert!(
                f.read_back <= f.spilled,
                "{} spilled entries read back for {} spilled ({} log entries re-read)",
                f.read_back,
                f.spilled,
                self.log_reread
            );
            floor = (back == 0).then(|| read_to.unwrap_or(hi));
        }
    }

    fn dispatch(&mut self) {
        self.reread();
        for d in self.core.dispatch(&self.cursor).unwrap() {
            for &e in &d.entries {
                let pos = p(e);
                assert!(!self.acked.contains(&pos), "{pos} sent after its ack");
                assert!(
                    self.held.insert(pos, d.consumer).is_none(),
                    "{pos} sent twice"
                );
                if self.ever_sent.insert(pos) {
                    self.first_sent.entry(self.log[&pos]).or_default().push(pos);
                }
            }
        }
        for sent in self.first_sent.values() {
            assert!(
                sent.windows(2).all(|w| w[0] < w[1]),
                "first deliveries out of order: {sent:?}"
            );
        }
        // A stuck consumer's slots keep nothing in the replay queue.
        for q in self.core.replay_positions() {
            let owner = self.owners[usize::from(self.log[&q])];
            assert!(
                owner < 0 || !self.stuck.contains(&(owner as u32)),
                "{q} of a stuck consumer's slot waits in the replay queue"
            );
        }
        self.spilled_seen = self.core.isolation_figures().spilled;
    }

    /// What consumer `id` holds, in order.
    fn held_by(&self, id: u32) -> Vec<Position> {
        self.held
            .iter()
            .filter(|(_, &c)| c == id)
            .map(|(&q, _)| q)
            .collect()
    }

    fn ack_some(&mut self, id: u32, rng: &mut Rng) {
        for q in self.held_by(id) {
            if rng.chance(2, 3) {
                self.core
                    .ack(id, &[q.ledger_id], &[q.entry_id], &mut self.cursor)
                    .unwrap();
                self.held.remove(&q);
                self.acked.insert(q);
            }
        }
    }

    fn step(&mut self, rng: &mut Rng) {
        let id = self.consumers[rng.below(self.consumers.len() as u64) as usize];
        match rng.below(16) {
            0..=3 => self.read(rng),
            4..=6 => self.dispatch(),
            7..=9 if !self.stuck.contains(&id) => self.ack_some(id, rng),
            10 if !self.stuck.contains(&id) => self.core.add_permits(id, 1 + rng.below(6)).unwrap(),
            11 if !self.stuck.contains(&id) => {
                if let Some(&q) = self.held_by(id).first() {
                    self.core
                        .nack(id, &[q.ledger_id], &[q.entry_id], &self.cursor)
                        .unwrap();
                    self.held.remove(&q);
                }
            }
            12 => {
                // The policy: a consumer stops acking (stuck), or comes back.
                let stuck = !self.stuck.contains(&id);
                if stuck && self.stuck.len() + 1 >= self.consumers.len() {
                    return; // someone stays well
                }
                self.core.set_stuck(id, stuck).unwrap();
                if stuck {
                    self.stuck.insert(id);
                } else {
                    self.stuck.remove(&id);
                }
            }
            13 if self.consumers.len() > 2 => self.leave(id),
            14 if self.consumers.len() < 5 => self.join(1 + rng.below(6)),
            15 => {
                // An operator skip: the cursor acks an unacknowledged entry directly.
                let open: Vec<Position> = self
                    .log
                    .keys()
                    .filter(|q| !self.acked.contains(q))
                    .copied()
                    .collect();
                if let Some(&q) = open.get(rng.below(open.len() as u64 + 1) as usize) {
                    self.cursor.ack(q.ledger_id, q.entry_id).unwrap();
                    self.acked.insert(q);
                }
            }
            _ => {}
        }
    }

    fn drain(&mut self) {
        for id in std::mem::take(&mut self.stuck) {
            self.core.set_stuck(id, false).unwrap();
        }
        for &id in &self.consumers.clone() {
            self.core.add_permits(id, 10_000).unwrap();
        }
        // Each round brings back at least one spilled entry: bounded by what was spilled.
        for _ in 0..2_000 {
            self.dispatch();
            let all: Vec<(Position, u32)> = self.held.iter().map(|(&q, &c)| (q, c)).collect();
            for (q, c) in all {
                self.core
                    .ack(c, &[q.ledger_id], &[q.entry_id], &mut self.cursor)
                    .unwrap();
                self.held.remove(&q);
                self.acked.insert(q);
            }
            if self.log.keys().all(|q| self.acked.contains(q)) {
                return;
            }
        }
        panic!(
            "not drained: mark-delete {}, {:?}",
            self.cursor.mark_delete(),
            self.core.isolation_figures()
        );
    }
}

#[test]
fn spilled_entries_come_back_in_order_and_nothing_is_lost() {
    let mut spilled = 0;
    let mut brought_back = 0;
    // Fewer walks in a debug build (`make test`); all of them under `make fuzz` (release).
    let seeds = if cfg!(debug_assertions) { 80 } else { 200 };
    for seed in 0..seeds {
        let mut rng = Rng(seed);
        let limit = [None, Some(2), Some(1), Some(8)][seed as usize % 4];
        let mut w = World::new(limit, [usize::MAX, 3, 16][seed as usize % 3]);
        for _ in 0..500 {
            w.step(&mut rng);
        }
        w.drain();
        let f = w.core.isolation_figures();
        spilled += f.spilled;
        brought_back += f.brought_back;
        assert_eq!(f.span, None, "seed {seed}: a span was left unread");
    }
    // The walks spill and bring back for real.
    assert!(
        spilled > 1000 && brought_back > 500,
        "{spilled} {brought_back}"
    );
}

#[test]
fn a_hung_consumer_spills_and_the_others_keep_reading() {
    let cursor = Cursor::new(Position::new(1, -1).unwrap(), false);
    let mut core = DispatchCore::new(DispatchMode::Draining);
    core.add_consumer(1, 100, &cursor).unwrap();
    core.add_consumer(2, 0, &cursor).unwrap(); // hung: no permits
    let mut owners = vec![1i64; 8];
    owners[5] = 2;
    core.set_owners(&owners).unwrap();
    core.set_stuck(2, true).unwrap();
    core.add_read(&[1, 1, 1, 1], &[0, 1, 2, 3], &[5, 3, 5, 3], &cursor)
        .unwrap();
    let out = core.dispatch(&cursor).unwrap();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].entries, vec![1, 3]);
    assert_eq!(core.replay_len(), 0); // 1:0 and 1:2 spilled, not queued
    let f = core.isolation_figures();
    assert_eq!(
        (f.spilled, f.spilled_slots, f.span),
        (2, 1, Some((p(0), p(2))))
    );
    assert_eq!(core.take_reread(), None); // still stuck: nothing to re-read yet
    core.set_stuck(2, false).unwrap();
    core.add_permits(2, 10).unwrap();
    // A newer entry of the spilled slot read meanwhile waits behind the spilled ones.
    core.add_read(&[1], &[4], &[5], &cursor).unwrap();
    assert!(core.dispatch(&cursor).unwrap().is_empty());
    let (lo, hi) = core.take_reread().unwrap();
    assert_eq!((lo, hi), (p(0), p(4)));
    let back = core
        .add_reread(
            &[1, 1, 1, 1, 1],
            &[0, 1, 2, 3, 4],
            &[5, 3, 5, 3, 5],
            None,
            None,
            &cursor,
        )
        .unwrap();
    assert_eq!(back, 3); // 1:1 and 1:3 are in flight
    let out = core.dispatch(&cursor).unwrap();
    assert_eq!(out[0].consumer, 2);
    assert_eq!(out[0].entries, vec![0, 2, 4]);
}

#[test]
fn a_spilled_entry_acknowledged_meanwhile_comes_back_as_nothing_and_loses_its_count() {
    let mut cursor = Cursor::new(Position::new(1, -1).unwrap(), false);
    let mut core = DispatchCore::new(DispatchMode::Draining);
    core.add_consumer(1, 1, &cursor).unwrap();
    core.set_owners(&[1; 8]).unwrap();
    core.add_read(&[1], &[0], &[5], &cursor).unwrap();
    assert_eq!(core.dispatch(&cursor).unwrap()[0].entries, vec![0]);
    core.nack(1, &[1], &[0], &cursor).unwrap(); // counted once; no permits left to resend it
    core.set_stuck(1, true).unwrap();
    assert!(core.dispatch(&cursor).unwrap().is_empty());
    assert_eq!(core.isolation_figures().spilled, 1);
    assert_eq!(core.redelivery_count(p(0)), 1); // spilled with its count
    cursor.ack(1, 0).unwrap(); // a skip while it is spilled
    core.set_stuck(1, false).unwrap();
    assert_eq!(core.take_reread(), Some((p(0), p(0))));
    assert_eq!(
        core.add_reread(&[1], &[0], &[5], None, None, &cursor)
            .unwrap(),
        0
    );
    assert_eq!(core.redeliveries_tracked(), 0);
    assert_eq!(core.isolation_figures().span, None);
    core.add_permits(1, 5).unwrap();
    assert!(core.dispatch(&cursor).unwrap().is_empty()); // never sent again
}

/// Issue 44 item 5: one of a stuck consumer's spilled slots moves to a consumer that is not
/// stuck. Its entries come back once; the stuck one's stay spilled and are not read again at
/// every dispatch (they were, with every entry brought back spilled again behind them).
#[test]
fn a_spilled_slot_that_moves_comes_back_once_and_the_stuck_ones_are_not_read_again() {
    let cursor = Cursor::new(Position::new(1, -1).unwrap(), false);
    let mut core = DispatchCore::new(DispatchMode::Draining);
    core.add_consumer(1, 0, &cursor).unwrap(); // well, but with no permits for now
    core.add_consumer(2, 0, &cursor).unwrap(); // hung
    let mut owners = vec![1i64; 8];
    owners[5] = 2;
    owners[6] = 2;
    core.set_owners(&owners).unwrap();
    core.set_stuck(2, true).unwrap();
    let es: Vec<i64> = (0..12).collect();
    let slots: Vec<i64> = (0..12).map(|e| [5, 6, 3][e as usize % 3]).collect();
    core.add_read(&[1; 12], &es, &slots, &cursor).unwrap();
    core.dispatch(&cursor).unwrap();
    assert_eq!(core.isolation_figures().spilled, 8); // slots 5 and 6
    assert_eq!(
        core.take_reread(),
        None,
        "only stuck consumers' slots are spilled"
    );
    owners[6] = 1; // slot 6 moves to consumer 1
    core.set_owners(&owners).unwrap();
    let (lo, hi) = core.take_reread().unwrap();
    assert_eq!((lo, hi), (p(1), p(10))); // slot 6's span
    let part: Vec<i64> = (lo.entry_id..=hi.entry_id).collect();
    let part_slots: Vec<i64> = part.iter().map(|&e| [5, 6, 3][e as usize % 3]).collect();
    let back = core
        .add_reread(
            &vec![1; part.len()],
            &part,
            &part_slots,
            None,
            None,
            &cursor,
        )
        .unwrap();
    assert_eq!(back, 4); // 1:1, 1:4, 1:7, 1:10
    for _ in 0..5 {
        assert!(core.dispatch(&cursor).unwrap().is_empty()); // consumer 1 has no permits yet
        assert_eq!(core.take_reread(), None, "nothing more can come back");
    }
    let f = core.isolation_figures();
    assert_eq!((f.spilled, f.read_back, f.spilled_slots), (8, 4, 1));
    assert_eq!(core.replay_len(), 4 + 4); // slot 3's and slot 6's, none spilled again
    core.add_permits(1, 100).unwrap();
    let sent: Vec<i64> = core.dispatch(&cursor).unwrap()[0].entries.clone();
    assert_eq!(sent, vec![1, 2, 4, 5, 7, 8, 10, 11]);
}

/// A re-read in parts: each part is done with, and the next span starts after it.
#[test]
fn a_span_read_in_parts_is_read_once() {
    let cursor = Cursor::new(Position::new(1, -1).unwrap(), false);
    let mut core = DispatchCore::new(DispatchMode::Draining);
    core.add_consumer(1, 0, &cursor).unwrap();
    core.set_owners(&[1; 8]).unwrap();
    core.set_stuck(1, true).unwrap();
    let es: Vec<i64> = (0..100).collect();
    core.add_read(&[1; 100], &es, &[5; 100], &cursor).unwrap();
    core.dispatch(&cursor).unwrap();
    core.set_stuck(1, false).unwrap();
    let mut read = 0;
    while let Some((lo, hi)) = core.take_reread() {
        let part: Vec<i64> = (lo.entry_id..=hi.entry_id.min(lo.entry_id + 9)).collect();
        let to = p(*part.last().unwrap());
        read += part.len();
        core.add_reread(
            &vec![1; part.len()],
            &part,
            &vec![5; part.len()],
            None,
            Some(to),
            &cursor,
        )
        .unwrap();
    }
    assert_eq!(read, 100);
    let f = core.isolation_figures();
    assert_eq!((f.brought_back, f.read_back, f.span), (100, 100, None));
    assert!(core.add_reread(&[], &[], &[], None, None, &cursor).is_err()); // none under way
}

/// A span handed out and never brought back (a caller that stopped reading) is handed out again.
#[test]
fn an_abandoned_span_is_handed_out_again() {
    let cursor = Cursor::new(Position::new(1, -1).unwrap(), false);
    let mut core = DispatchCore::new(DispatchMode::Draining);
    core.add_consumer(1, 0, &cursor).unwrap();
    core.set_owners(&[1; 8]).unwrap();
    core.set_stuck(1, true).unwrap();
    core.add_read(&[1, 1], &[0, 1], &[5, 5], &cursor).unwrap();
    core.dispatch(&cursor).unwrap();
    core.set_stuck(1, false).unwrap();
    assert_eq!(core.take_reread(), Some((p(0), p(1))));
    assert_eq!(core.take_reread(), Some((p(0), p(1))));
    let back = core
        .add_reread(&[1, 1], &[0, 1], &[5, 5], None, None, &cursor)
        .unwrap();
    assert_eq!((back, core.take_reread()), (2, None));
}
