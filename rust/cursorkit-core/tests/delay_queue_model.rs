//! Randomised check of `DelayQueue` against a `BTreeSet<(at, ledger, entry)>` plus a map of queued
//! positions: interleaved single and bulk adds, pops by limit and by cutoff, peeks, removals below a
//! ledger, clears and look-ups, over timestamp shapes that exercise flat, grouped, sorted-head and
//! side-heap paths.

use std::collections::{BTreeSet, HashMap};

use cursorkit_core::{CoreError, DelayQueue, Popped, MAX_ENTRY_ID, MAX_LIVE_LEDGERS};

mod common;
use common::Rng;

/// How delivery times and positions are drawn.
#[derive(Clone, Copy, Debug)]
enum Shape {
    /// A handful of delivery times (grouped buckets).
    Clustered,
    /// Uniform over an hour (flat buckets of a few hundred).
    Hour,
    /// Anywhere in `0..=i64::MAX`, with the extremes drawn often.
    Wide,
    /// One 4.096 s window: a single big bucket that is popped while it grows.
    OneBucket,
}

struct Gen {
    rng: Rng,
    shape: Shape,
    ledgers: Vec<i64>,
    times: Vec<i64>,
}

impl Gen {
    fn new(seed: u64, shape: Shape) -> Self {
        let mut rng = Rng(seed);
        // Ledger ids arrive out of order; some are huge.
        let mut ledgers = vec![7, 3, 11, 0, i64::MAX - 1, 1 << 40, 5, (1 << 40) - 1];
        ledgers.truncate(2 + rng.below(7) as usize);
        let times = (0..1 + rng.below(6))
            .map(|_| 50_000 + rng.below(40_000) as i64)
            .collect();
        Self {
            rng,
            shape,
            ledgers,
            times,
        }
    }

    fn at(&mut self) -> i64 {
        let r = &mut self.rng;
        match self.shape {
            Shape::Clustered => self.times[r.below(self.times.len() as u64) as usize],
            Shape::Hour => r.below(3_600_000) as i64,
            Shape::Wide => match r.below(8) {
                0 => 0,
                1 => i64::MAX,
                2 => i64::MAX - r.below(5000) as i64,
                3 => r.below(5000) as i64,
                _ => (r.next() >> 1) as i64,
            },
            Shape::OneBucket => 8192 + r.below(4096) as i64,
        }
    }

    fn ledger(&mut self) -> i64 {
        self.ledgers[self.rng.below(self.ledgers.len() as u64) as usize]
    }

    fn entry(&mut self) -> i64 {
        match self.rng.below(20) {
            0 => MAX_ENTRY_ID - self.rng.below(3) as i64,
            _ => self.rng.below(3000) as i64,
        }
    }

    fn limit(&mut self, m: &Model) -> (i64, i64, i64) {
        // Mostly around a queued index (so pops stop inside buckets), sometimes anywhere.
        if let Some(&(t, l, e)) = m.nth(self.rng.next()) {
            match self.rng.below(4) {
                0 => (t, l, e),
                1 => (t, l, e - 1),
                2 => (t, i64::MAX, i64::MAX),
                _ => (t.saturating_add(self.rng.below(20_000) as i64), l, e),
            }
        } else {
            (self.at(), self.ledger(), self.entry())
        }
    }
}

#[derive(Default)]
struct Model {
    order: BTreeSet<(i64, i64, i64)>,
    at_of: HashMap<(i64, i64), i64>,
}

impl Model {
    fn add(&mut self, at: i64, ledger: i64, entry: i64) -> bool {
        if self.at_of.contains_key(&(ledger, entry)) {
            return false;
        }
        self.at_of.insert((ledger, entry), at);
        self.order.insert((at, ledger, entry));
        true
    }

    fn pop_until(&mut self, limit: (i64, i64, i64), max: usize) -> Vec<(i64, i64, i64)> {
        let out: Vec<_> = self
            .order
            .iter()
            .take_while(|&&k| k <= limit)
            .take(max)
            .copied()
            .collect();
        for k in &out {
            self.order.remove(k);
            self.at_of.remove(&(k.1, k.2));
        }
        out
    }

    fn remove_ledgers_below(&mut self, ledger: i64) -> u64 {
        let before = self.order.len();
        self.order.retain(|k| k.1 >= ledger);
        self.at_of.retain(|k, _| k.0 >= ledger);
        (before - self.order.len()) as u64
    }

    fn nth(&self, r: u64) -> Option<&(i64, i64, i64)> {
        if self.order.is_empty() {
            return None;
        }
        self.order
            .iter()
            .nth((r % self.order.len() as u64) as usize)
    }
}

fn rows(p: &Popped) -> Vec<(i64, i64, i64)> {
    (0..p.len())
        .map(|i| (p.at[i], p.ledgers[i], p.entries[i]))
        .collect()
}

fn run(seed: u64, shape: Shape, steps: usize) {
    let mut g = Gen::new(seed, shape);
    let mut q = DelayQueue::new();
    let mut m = Model::default();
    let ctx = |step: usize| format!("seed {seed} {shape:?} step {step}");
    for step in 0..steps {
        match g.rng.below(100) {
            0..=29 => {
                let (t, l, e) = (g.at(), g.ledger(), g.entry());
                assert_eq!(q.add(t, l, e).unwrap(), m.add(t, l, e), "{}", ctx(step));
            }
            30..=44 => {
                let n = match g.rng.below(4) {
                    0 => g.rng.below(1200) as usize,
                    _ => g.rng.below(40) as usize,
                };
                let mut cols = (Vec::new(), Vec::new(), Vec::new());
                for _ in 0..n {
                    cols.0.push(g.at());
                    cols.1.push(g.ledger());
                    cols.2.push(g.entry());
                }
                if n > 0 && g.rng.below(10) == 0 {
                    // One bad value anywhere: nothing may change.
                    let i = g.rng.below(n as u64) as usize;
                    match g.rng.below(3) {
                        0 => cols.0[i] = -1 - g.rng.below(5) as i64,
                        1 => cols.1[i] = -1,
                        _ => cols.2[i] = [-1, MAX_ENTRY_ID + 1][g.rng.below(2) as usize],
                    }
                    let before = q.len();
                    assert!(
                        q.add_many(&cols.0, &cols.1, &cols.2).is_err(),
                        "{}",
                        ctx(step)
                    );
                    assert_eq!(q.len(), before);
                    continue;
                }
                let want: u64 = (0..n)
                    .map(|i| u64::from(m.add(cols.0[i], cols.1[i], cols.2[i])))
                    .sum();
                let got = q.add_many(&cols.0, &cols.1, &cols.2).unwrap();
                assert_eq!(got, want, "{}", ctx(step));
            }
            45..=59 => {
                let limit = g.limit(&m);
                let max = [0, 1, 3, 100, usize::MAX][g.rng.below(5) as usize];
                let mut out = Popped::new();
                let n = q.pop_until(limit, max, &mut out);
                let want = m.pop_until(limit, max);
                assert_eq!(n, want.len(), "{}", ctx(step));
                assert_eq!(rows(&out), want, "{}", ctx(step));
            }
            60..=69 => {
                let cutoff = g.limit(&m).0;
                let max = [1, 7, 100][g.rng.below(3) as usize];
                let mut out = Popped::new();
                out.at.push(-5); // pops append
                out.ledgers.push(-5);
                out.entries.push(-5);
                let n = q.pop_due(cutoff, max, &mut out);
                let want = m.pop_until((cutoff, i64::MAX, i64::MAX), max);
                assert_eq!(n, want.len(), "{}", ctx(step));
                assert_eq!(&rows(&out)[1..], &want[..], "{}", ctx(step));
            }
            70..=79 => {
                let want = m.order.first().copied();
                assert_eq!(q.peek(), want, "{}", ctx(step));
            }
            80..=84 => {
                let l = match g.rng.below(3) {
                    0 => g.ledger(),
                    1 => g.ledger() + 1,
                    _ => 0,
                };
                assert_eq!(
                    q.remove_ledgers_below(l),
                    m.remove_ledgers_below(l),
                    "{}",
                    ctx(step)
                );
            }
            85 => {
                if g.rng.below(4) == 0 {
                    q.clear();
                    m = Model::default();
                    assert_eq!(q.memory_usage(), DelayQueue::new().memory_usage());
                }
            }
            _ => {
                for _ in 0..5 {
                    let (l, e) = (g.ledger(), g.entry());
                    assert_eq!(
                        q.contains(l, e),
                        m.at_of.contains_key(&(l, e)),
                        "{}",
                        ctx(step)
                    );
                }
                assert!(!q.contains(-1, 0));
                assert!(!q.contains(0, -1));
            }
        }
        assert_eq!(q.len(), m.order.len() as u64, "{}", ctx(step));
        assert_eq!(q.is_empty(), m.order.is_empty());
    }
    let ledgers: BTreeSet<i64> = m.order.iter().map(|k| k.1).collect();
    assert_eq!(q.ledger_count(), ledgers.len(), "seed {seed}");
    let all = q.drain();
    assert_eq!(
        rows(&all),
        m.order.iter().copied().collect::<Vec<_>>(),
        "seed {seed}"
    );
    assert!(q.is_empty());
    assert_eq!(q.ledger_count(), 0);
    assert_eq!(q.peek(), None);
}

#[test]
fn matches_the_model_clustered() {
    for seed in 0..40 {
        run(seed, Shape::Clustered, 400);
    }
}

#[test]
fn matches_the_model_over_an_hour() {
    for seed in 100..140 {
        run(seed, Shape::Hour, 400);
    }
}

#[test]
fn matches_the_model_wide() {
    for seed in 200..240 {
        run(seed, Shape::Wide, 400);
    }
}

#[test]
fn matches_the_model_in_one_bucket() {
    for seed in 300..340 {
        run(seed, Shape::OneBucket, 400);
    }
}

/// Draining a big shuffled queue in small batches comes out in exact order, whatever the shape.
#[test]
fn big_shuffled_drains_in_order() {
    for (seed, distinct_times) in [(1u64, 0u64), (2, 3600), (3, 7)] {
        let mut rng = Rng(seed);
        let n = 60_000;
        let mut at = Vec::with_capacity(n);
        let mut ledgers = Vec::with_capacity(n);
        let mut entries = Vec::with_capacity(n);
        for i in 0..n as i64 {
            at.push(match distinct_times {
                0 => rng.below(3_600_000) as i64,
                k => (rng.below(k) * 1000) as i64,
            });
            ledgers.push((i % 10) * 1_000_003 % 17); // ids out of arrival order
            entries.push(i / 10);
        }
        let mut q = DelayQueue::new();
        assert_eq!(q.add_many(&at, &ledgers, &entries).unwrap(), n as u64);
        let full = q.memory_usage();
        assert!(full < n * 24, "seed {seed}: {full} B");
        let mut want: Vec<(i64, i64, i64)> =
            (0..n).map(|i| (at[i], ledgers[i], entries[i])).collect();
        want.sort_unstable();
        let mut out = Popped::new();
        while q.pop_due(i64::MAX, 100, &mut out) > 0 {}
        assert_eq!(rows(&out), want);
        assert!(
            q.memory_usage() < full / 4,
            "seed {seed}: {} B left",
            q.memory_usage()
        );
    }
}

/// More than 2^20 live ledgers is an error that changes nothing; a popped ledger frees its slot.
#[test]
fn live_ledger_limit() {
    let n = MAX_LIVE_LEDGERS;
    let ledgers: Vec<i64> = (0..n as i64).collect();
    let at: Vec<i64> = (0..n as i64).collect();
    let entries = vec![0i64; n];
    let mut q = DelayQueue::new();
    assert_eq!(q.add_many(&at, &ledgers, &entries).unwrap(), n as u64);
    assert!(q.add(5, 3, 1).unwrap()); // a live ledger: fine
    let err = q.add(5, n as i64, 0).unwrap_err();
    assert!(matches!(err, CoreError::InvalidArgument(m) if m.contains("1048576")));
    assert!(q.add_many(&[1, 2], &[5, n as i64 + 1], &[9, 0]).is_err());
    assert_eq!(q.len(), n as u64 + 1);
    let mut out = Popped::new();
    assert_eq!(q.pop_due(0, 10, &mut out), 1); // ledger 0 leaves
    assert!(q.add(5, n as i64, 0).unwrap());
    assert_eq!(q.ledger_count(), n);
}
