//! Redelivery counts against a map of every position's count, over random operations; the
//! encoded forms under damage.

use std::collections::BTreeMap;

use super::*;
use crate::testing::Rng;

type Model = BTreeMap<(i64, i64), u32>;

fn model_of(c: &RedeliveryCounts) -> Model {
    let mut m = Model::new();
    for (l, a, b, n) in c.runs() {
        for e in a..=b {
            m.insert((l, e), n);
        }
    }
    m
}

/// Runs apart and ascending, no two neighbours with one count, the position count right.
fn check_shape(c: &RedeliveryCounts) {
    let mut prev: Option<(i64, i64, u32)> = None;
    let mut positions = 0u64;
    for (l, a, b, n) in c.runs() {
        assert!(a <= b && n > 0, "bad run {l}:{a}..={b} x{n}");
        if let Some((pl, pb, pn)) = prev {
            assert!(pl < l || pb < a, "runs overlap or go back at {l}:{a}");
            assert!(
                !(pl == l && pb + 1 == a && pn == n),
                "neighbours not merged at {l}:{a}"
            );
        }
        positions += (b - a + 1) as u64;
        prev = Some((l, b, n));
    }
    assert_eq!(positions, c.positions());
}

#[test]
fn random_operations_match_the_model() {
    for seed in 0..300u64 {
        let mut rng = Rng(seed);
        let mut c = RedeliveryCounts::default();
        let mut m = Model::new();
        let mut persisted = RedeliveryCounts::default(); // snapshot + deltas, as a journal replays
        let mut cursor = Cursor::new(Position::new(0, -1).unwrap(), false);
        for step in 0..400 {
            let l = rng.below(3) as i64;
            let e = rng.below(40) as i64;
            match rng.below(10) {
                0..=3 => {
                    let n = c.increment(l, e).unwrap();
                    let want = m.get(&(l, e)).copied().unwrap_or(0) + 1;
                    assert_eq!(n, want);
                    m.insert((l, e), want);
                }
                4 => {
                    let n = rng.below(4) as u32;
                    c.set(l, e, n).unwrap();
                    if n == 0 {
                        m.remove(&(l, e));
                    } else {
                        m.insert((l, e), n);
                    }
                }
                5 => {
                    let ls: Vec<i64> = (0..5).map(|_| rng.below(3) as i64).collect();
                    let es: Vec<i64> = (0..5).map(|_| rng.below(40) as i64).collect();
                    let ns: Vec<u32> = (0..5).map(|_| rng.below(3) as u32).collect();
                    c.set_many(&ls, &es, &ns).unwrap();
                    for i in 0..5 {
                        if ns[i] == 0 {
                            m.remove(&(ls[i], es[i]));
                        } else {
                            m.insert((ls[i], es[i]), ns[i]);
                        }
                    }
                }
                6 => {
                    cursor.ack(l, e).unwrap();
                    c.prune(&cursor).unwrap();
                    m.retain(|&(ml, me), _| !cursor.is_acked(ml, me).unwrap());
                }
                7 if rng.chance(1, 4) => {
                    let md = cursor.mark_delete();
                    let to = Position::new(l, e).unwrap().max(md);
                    cursor.ack_cumulative(to.ledger_id, to.entry_id).unwrap();
                    c.forget_through(cursor.mark_delete());
                    let md = cursor.mark_delete();
                    m.retain(|&(ml, me), _| Position::new(ml, me).unwrap() > md);
                }
                8 => {
                    let delta = c.take_delta();
                    persisted.apply(&delta).unwrap();
                    // Replayed state equals the live state once what the cursor acked is pruned.
                    // (Counts of acknowledged positions are not journaled: loading prunes them.)
                    let mut replayed = persisted.clone();
                    replayed.prune(&cursor).unwrap();
                    let mut live = m.clone();
                    live.retain(|&(ml, me), _| !cursor.is_acked(ml, me).unwrap());
                    assert_eq!(model_of(&replayed), live, "seed {seed} step {step}: replay");
                }
                _ => {
                    let snap = c.encode();
                    let back = RedeliveryCounts::decode(&snap, 0).unwrap();
                    assert_eq!(model_of(&back), m, "seed {seed} step {step}: snapshot");
                    check_shape(&back);
                    if rng.chance(1, 3) {
                        persisted = back; // a compaction: the snapshot replaces the journal
                    }
                }
            }
            assert_eq!(model_of(&c), m, "seed {seed} step {step}");
            check_shape(&c);
            let (l, e) = (rng.below(3) as i64, rng.below(45) as i64);
            assert_eq!(c.get(l, e).unwrap(), m.get(&(l, e)).copied().unwrap_or(0));
        }
    }
}

#[test]
fn a_delta_holds_only_what_changed() {
    let mut c = RedeliveryCounts::default();
    for e in 0..100_000 {
        if e % 10 == 0 {
            c.increment(7, e).unwrap();
        }
    }
    let snapshot = c.take_delta();
    assert!(snapshot.len() > 10_000 * 3);
    c.increment(7, 500).unwrap();
    let delta = c.take_delta();
    assert!(delta.len() <= 8, "one change, {} bytes", delta.len());
    assert!(!c.has_changes());
    assert!(c.take_delta().len() <= 2); // nothing: version and a zero ledger count
}

#[test]
fn a_clear_reaches_a_replica_through_the_delta() {
    let mut c = RedeliveryCounts::default();
    for e in 0..50 {
        c.increment(2, e * 3).unwrap();
    }
    let mut replica = RedeliveryCounts::decode(&c.take_delta(), 0).unwrap();
    assert_eq!(replica.positions(), 50);
    c.clear();
    c.increment(2, 3).unwrap();
    replica.apply(&c.take_delta()).unwrap();
    assert_eq!(model_of(&replica), model_of(&c));
    assert_eq!(replica.positions(), 1);
}

#[test]
fn neighbours_merge_into_one_run() {
    let mut c = RedeliveryCounts::default();
    for e in 0..1000 {
        c.increment(1, e).unwrap();
    }
    assert_eq!(c.run_count(), 1);
    c.increment(1, 500).unwrap();
    assert_eq!(c.run_count(), 3);
    c.set(1, 500, 1).unwrap();
    assert_eq!(c.run_count(), 1);
    assert_eq!(c.encode().len(), 1 + 1 + 1 + 1 + 1 + 2 + 1);
}

#[test]
fn bad_bytes_are_typed_errors_and_change_nothing() {
    let mut c = RedeliveryCounts::default();
    for e in (0..3000).step_by(3) {
        c.increment(e / 1000, e).unwrap();
    }
    let good = c.encode();
    let mut rng = Rng(9);
    for _ in 0..3000 {
        let mut bad = good.clone();
        match rng.below(3) {
            0 => bad.truncate(rng.below(good.len() as u64) as usize),
            1 => {
                let i = rng.below(good.len() as u64) as usize;
                bad[i] ^= 1 << rng.below(8);
            }
            _ => bad.push(rng.below(256) as u8),
        }
        let mut held = RedeliveryCounts::default();
        held.increment(99, 1).unwrap();
        match held.apply(&bad) {
            Ok(()) => check_shape(&held),
            Err(e) => {
                assert!(matches!(
                    e,
                    CoreError::Corrupt(_) | CoreError::UnsupportedVersion { .. }
                ));
                assert_eq!(held.positions(), 1, "a refused delta changed nothing");
            }
        }
    }
    assert!(matches!(
        RedeliveryCounts::decode(&[], 0),
        Err(CoreError::Corrupt(_))
    ));
    assert!(matches!(
        RedeliveryCounts::decode(&[2, 0], 0),
        Err(CoreError::UnsupportedVersion { found: 2, .. })
    ));
}

#[test]
fn crafted_sizes_cannot_make_work() {
    // A ledger count of 2^63 with nothing behind it: refused at once.
    let mut data = vec![REDELIVERY_FORMAT_VERSION];
    put_varint(&mut data, 1 << 63);
    assert!(matches!(
        RedeliveryCounts::decode(&data, 0),
        Err(CoreError::Corrupt(_))
    ));
    // A run reaching past the last entry id, a count over 32 bits, an overflowing gap.
    for (gap, len, count) in [
        (MAX_ENTRY_ID as u64, 1, 1),
        (0, 0, 1 << 32),
        (u64::MAX, 0, 1),
    ] {
        let mut data = vec![REDELIVERY_FORMAT_VERSION, 1, 5, 1];
        put_varint(&mut data, gap);
        put_varint(&mut data, len);
        put_varint(&mut data, count);
        assert!(RedeliveryCounts::decode(&data, 0).is_err());
    }
}

#[test]
fn the_budget_refuses_and_changes_nothing() {
    let mut c = RedeliveryCounts::new(10);
    for e in 0..10 {
        c.increment(1, e * 2).unwrap();
    }
    assert!(matches!(c.increment(1, 100), Err(CoreError::Budget(_))));
    assert_eq!(c.positions(), 10);
    c.set(1, 0, 0).unwrap(); // forgetting is always allowed
    c.increment(1, 1).unwrap(); // joins its neighbour's count: no new run needed, one is free
    let snap = c.encode();
    assert!(matches!(
        RedeliveryCounts::decode(&snap, 5),
        Err(CoreError::Budget(_))
    ));
    assert!(matches!(
        c.set_many(&[2; 6], &[0, 2, 4, 6, 8, 10], &[1; 6]),
        Err(CoreError::Budget(_))
    ));
    assert_eq!(
        RedeliveryCounts::decode(&snap, 10).unwrap().positions(),
        c.positions()
    );
}

#[test]
fn bad_positions_are_refused() {
    let mut c = RedeliveryCounts::default();
    assert!(matches!(
        c.increment(-1, 0),
        Err(CoreError::InvalidPosition(_))
    ));
    assert!(matches!(c.get(0, -1), Err(CoreError::InvalidPosition(_))));
    assert!(matches!(
        c.set_many(&[0, 0], &[1], &[1, 1]),
        Err(CoreError::LengthMismatch { .. })
    ));
    assert!(matches!(
        c.set_many(&[0], &[1], &[1, 1]),
        Err(CoreError::InvalidArgument(_))
    ));
    c.increment(3, MAX_ENTRY_ID).unwrap();
    c.increment(3, MAX_ENTRY_ID - 1).unwrap();
    assert_eq!(c.run_count(), 1);
    let back = RedeliveryCounts::decode(&c.encode(), 0).unwrap();
    assert_eq!(back.get(3, MAX_ENTRY_ID).unwrap(), 1);
}
