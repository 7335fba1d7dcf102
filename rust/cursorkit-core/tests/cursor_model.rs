//! Randomised check of `Cursor` against a naive model: a mark-delete and a `BTreeSet` of acks,
//! rolled forward one entry at a time, with and without ledger sizes.

use std::collections::{BTreeMap, BTreeSet};

use cursorkit_core::{Cursor, Position};

mod common;
use common::Rng;

struct Model {
    md: (i64, i64),
    acked: BTreeSet<(i64, i64)>,
    sizes: Option<BTreeMap<i64, u64>>,
}

impl Model {
    fn next_after(&self, (l, e): (i64, i64)) -> Option<(i64, i64)> {
        match &self.sizes {
            None => Some((l, e + 1)),
            Some(s) if e + 1 < s.get(&l).map_or(0, |&n| n as i64) => Some((l, e + 1)),
            Some(s) => s.range(l + 1..).find(|(_, &n)| n > 0).map(|(&k, _)| (k, 0)),
        }
    }

    fn roll(&mut self) {
        while let Some(n) = self.next_after(self.md) {
            if !self.acked.contains(&n) {
                break;
            }
            self.md = n;
        }
        let md = self.md;
        self.acked.retain(|&p| p > md);
    }

    fn valid(&self, (l, e): (i64, i64)) -> bool {
        self.sizes
            .as_ref()
            .is_none_or(|s| s.get(&l).is_some_and(|&n| e < n as i64))
    }
}

fn run(seed: u64, with_sizes: bool) {
    let mut rng = Rng(seed);
    let sizes: BTreeMap<i64, u64> = [(1, 7), (2, 0), (3, 5), (4, 70_000)].into_iter().collect();
    let sizes = with_sizes.then_some(sizes);
    let mut c = Cursor::new(Position::new(1, -1).unwrap(), false);
    c.set_ledger_sizes(sizes.clone()).unwrap();
    let mut m = Model {
        md: (1, -1),
        acked: BTreeSet::new(),
        sizes,
    };
    for step in 0..400 {
        let l = [1, 2, 3, 4][rng.below(4) as usize];
        let e = if l == 4 && rng.below(2) == 0 {
            65_530 + rng.below(12) as i64
        } else {
            rng.below(9) as i64
        };
        let ok = m.valid((l, e));
        match rng.below(10) {
            0 => {
                let got = c.ack_cumulative(l, e);
                assert_eq!(got.is_ok(), ok, "seed {seed} step {step}");
                if ok && (l, e) > m.md {
                    m.md = (l, e);
                    m.roll();
                }
            }
            1 => {
                c.reset(l, e).unwrap();
                m.md = (l, e - 1);
                m.acked.clear();
                m.roll();
            }
            _ => {
                let got = c.ack(l, e);
                assert_eq!(got.is_ok(), ok, "seed {seed} step {step}");
                if ok {
                    let new = (l, e) > m.md && m.acked.insert((l, e));
                    assert_eq!(got.unwrap(), new, "seed {seed} step {step}");
                    m.roll();
                }
            }
        }
        let md = c.mark_delete();
        assert_eq!((md.ledger_id, md.entry_id), m.md, "seed {seed} step {step}");
        let mut runs = 0;
        let mut prev: Option<(i64, i64)> = None;
        for &(l, e) in &m.acked {
            runs += u64::from(prev != Some((l, e - 1)));
            prev = Some((l, e));
        }
        assert_eq!(c.acked().len(), runs, "seed {seed} step {step}");
        assert_eq!(
            c.acked().total_cardinality(),
            m.acked.len() as u64,
            "seed {seed} step {step}"
        );
    }
}

#[test]
fn cursor_matches_the_model() {
    for seed in 0..200 {
        run(seed, seed % 2 == 0);
    }
}
