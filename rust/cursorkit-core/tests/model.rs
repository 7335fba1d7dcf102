//! Randomised check of `RangeSet` against a `BTreeSet` of positions (a small, obviously right model).

use std::collections::{BTreeMap, BTreeSet};

use cursorkit_core::RangeSet;

mod common;
use common::Rng;

/// An entry id, one in ten around a container boundary.
fn entry(rng: &mut Rng) -> i64 {
    match rng.below(10) {
        0 => 65_500 + rng.below(60) as i64,
        _ => rng.below(90) as i64,
    }
}

#[derive(Default)]
struct Model {
    set: BTreeSet<(i64, i64)>,
}

impl Model {
    fn runs(&self) -> Vec<[i64; 4]> {
        let mut out: Vec<[i64; 4]> = Vec::new();
        for &(l, e) in &self.set {
            match out.last_mut() {
                Some(r) if r[0] == l && r[3] + 1 == e => r[3] = e,
                _ => out.push([l, e - 1, l, e]),
            }
        }
        out
    }

    fn top(&self, ledger: i64) -> Option<i64> {
        self.set
            .range((ledger, 0)..=(ledger, i64::MAX))
            .next_back()
            .map(|p| p.1)
    }

    fn add_range(&mut self, ledger: i64, from: i64, to: i64) {
        for e in from..=to {
            self.set.insert((ledger, e));
        }
    }

    fn add_open_closed(
        &mut self,
        lk: i64,
        lv: i64,
        uk: i64,
        uv: i64,
        sizes: Option<&BTreeMap<i64, u64>>,
    ) {
        if lk == uk {
            self.add_range(lk, lv + 1, uv);
            return;
        }
        if lk > uk {
            return;
        }
        match sizes {
            None => {
                if let Some(top) = self.top(lk).filter(|&t| t > lv) {
                    self.add_range(lk, lv + 1, top);
                }
            }
            Some(sizes) => {
                let size = sizes.get(&lk).copied().unwrap_or(0) as i64;
                self.add_range(lk, lv + 1, size - 1);
                for (&l, &s) in sizes.range(lk + 1..uk) {
                    self.add_range(l, 0, s as i64 - 1);
                }
            }
        }
        self.add_range(uk, 0, uv);
    }

    fn remove_open_closed(&mut self, lk: i64, lv: i64, uk: i64, uv: i64, quirks: bool) {
        if (lk, lv) >= (uk, uv) {
            return;
        }
        let keep_top = if quirks && lk != uk {
            self.top(lk)
        } else {
            None
        };
        self.set
            .retain(|&p| !(p > (lk, lv) && p <= (uk, uv)) || Some(p) == keep_top.map(|t| (lk, t)));
    }
}

fn check(rs: &RangeSet, model: &Model, rng: &mut Rng) {
    let runs = model.runs();
    assert_eq!(rs.len() as usize, runs.len(), "range count");
    assert_eq!(rs.ranges_rows(None), runs, "ranges");
    assert_eq!(rs.total_cardinality() as usize, model.set.len());
    for _ in 0..20 {
        let (l, e) = (rng.below(4) as i64, entry(rng));
        assert_eq!(
            rs.contains(l, e).unwrap(),
            model.set.contains(&(l, e)),
            "contains {l}:{e}"
        );
        let (l2, e2) = (rng.below(4) as i64, entry(rng) - 1);
        let want = model
            .set
            .range((l, e)..)
            .take_while(|&&p| p <= (l2, e2))
            .count() as u64;
        if (l, e) <= (l2, e2) {
            assert_eq!(
                rs.cardinality(l, e, l2, e2).unwrap(),
                want,
                "cardinality {l}:{e}..{l2}:{e2}"
            );
        }
    }
}

fn run(seed: u64, quirks: bool) {
    let mut rng = Rng(seed);
    let mut rs = RangeSet::new(quirks);
    let mut model = Model::default();
    for step in 0..400 {
        let (l, e) = (rng.below(4) as i64, entry(&mut rng));
        match rng.below(9) {
            0 | 1 => {
                assert_eq!(
                    rs.add(l, e).unwrap(),
                    model.set.insert((l, e)),
                    "step {step}"
                );
            }
            2 => {
                assert_eq!(
                    rs.remove(l, e).unwrap(),
                    model.set.remove(&(l, e)),
                    "step {step}"
                );
            }
            3 => {
                let n = rng.below(300) as usize;
                let mut ls = Vec::new();
                let mut es = Vec::new();
                let sorted = rng.below(2) == 0;
                let mut next = e;
                for _ in 0..n {
                    ls.push(if sorted { l } else { rng.below(4) as i64 });
                    next = if sorted {
                        next + rng.below(3) as i64
                    } else {
                        entry(&mut rng)
                    };
                    es.push(next.min(u32::MAX as i64));
                }
                let fresh = ls
                    .iter()
                    .zip(&es)
                    .filter(|(&a, &b)| !model.set.contains(&(a, b)))
                    .collect::<BTreeSet<_>>()
                    .len();
                assert_eq!(
                    rs.add_many(&ls, &es).unwrap() as usize,
                    fresh,
                    "step {step}"
                );
                model.set.extend(ls.into_iter().zip(es));
            }
            4 => {
                let uk = l + rng.below(3) as i64;
                let lv = e - 1;
                let uv = if uk == l {
                    lv + rng.below(80) as i64
                } else {
                    rng.below(90) as i64 - 1
                };
                let sizes: Option<BTreeMap<i64, u64>> =
                    (rng.below(2) == 0).then(|| (0..4).map(|x| (x, rng.below(100))).collect());
                rs.add_open_closed(l, lv, uk, uv, sizes.as_ref()).unwrap();
                model.add_open_closed(l, lv, uk, uv, sizes.as_ref());
            }
            5 => {
                rs.remove_at_most(l, e - 1).unwrap();
                model.set.retain(|&p| p > (l, e - 1));
            }
            6 | 7 => {
                let (uk, uv) = (l + rng.below(3) as i64, entry(&mut rng));
                rs.remove_open_closed(l, e - 1, uk, uv).unwrap();
                model.remove_open_closed(l, e - 1, uk, uv, quirks);
            }
            _ => {
                let bytes = rs.to_bytes();
                assert_eq!(RangeSet::from_bytes(&bytes).unwrap(), rs);
                let words = rs.to_long_list_map(None);
                assert_eq!(RangeSet::from_long_list_map(&words, quirks).unwrap(), rs);
            }
        }
        check(&rs, &model, &mut rng);
    }
}

#[test]
fn matches_model_correct_mode() {
    for seed in 0..20 {
        run(seed, false);
    }
}

#[test]
fn matches_model_quirks_mode() {
    for seed in 100..120 {
        run(seed, true);
    }
}

#[test]
fn dirty_ledgers_follow_changes() {
    let mut rs = RangeSet::new(false);
    rs.add(1, 1).unwrap();
    rs.add(2, 1).unwrap();
    assert_eq!(rs.dirty_ledgers(), vec![1, 2]);
    rs.clear_dirty();
    rs.add(2, 1).unwrap(); // already held: not a change
    assert!(rs.dirty_ledgers().is_empty());
    rs.remove_at_most(1, 5).unwrap(); // empties ledger 1
    rs.add(3, 0).unwrap();
    assert_eq!(rs.dirty_ledgers(), vec![1, 3]);
}
