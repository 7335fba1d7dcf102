//! `Cursor::ack_batch_set` (Pulsar's `ack_set`, ANDed word by word) against the model it must
//! equal: the same acks made one index at a time with `ack_batch_index`.

use cursorkit_core::{CoreError, Cursor, Position, MAX_BATCH_SIZE};

mod common;
use common::Rng;

/// The unacked-index words of a batch, or None when the cursor holds no partial batch there.
fn words(c: &Cursor, e: i64) -> Option<Vec<u64>> {
    c.batch(1, e).map(|b| b.words().to_vec())
}

/// The model: every index of `0..size` whose bit `given` leaves unset, acked one at a time.
fn per_index(c: &mut Cursor, e: i64, given: &[u64], size: u32) -> Result<u32, CoreError> {
    let mut n = 0;
    for i in 0..size {
        let unacked = given
            .get((i / 64) as usize)
            .is_some_and(|w| w & (1 << (i % 64)) != 0);
        if !unacked {
            n += u32::from(c.ack_batch_index(1, e, i, size)?);
        }
    }
    Ok(n)
}

fn random_words(rng: &mut Rng, size: u32) -> Vec<u64> {
    let len = rng.below(u64::from(size.div_ceil(64)) + 3) as usize;
    (0..len)
        .map(|_| match rng.below(4) {
            0 => 0,
            1 => u64::MAX,
            2 => !(1u64 << rng.below(64)),
            _ => rng.next() | rng.next(), // mostly set: a few indexes acked per call
        })
        .collect()
}

#[test]
fn ack_batch_set_equals_the_per_index_loop() {
    for seed in 0..300 {
        let mut rng = Rng(seed);
        let mut fast = Cursor::new(Position::new(1, -1).unwrap(), false);
        let mut slow = fast.clone();
        for _ in 0..30 {
            let e = rng.below(4) as i64;
            let size = [1, 3, 63, 64, 65, 130][rng.below(6) as usize];
            let size = if rng.chance(1, 10) { size + 1 } else { size }; // a size that differs
            let given = random_words(&mut rng, size);
            let want = per_index(&mut slow.clone(), e, &given, size);
            let got = fast.ack_batch_set(1, e, &given, size);
            match (want, got) {
                (Ok(w), Ok(g)) => {
                    assert_eq!(g, w, "seed {seed}");
                    per_index(&mut slow, e, &given, size).unwrap();
                }
                (Err(_), Err(_)) => {}
                // The loop checks sizes only when some index is acked; the set always checks.
                (Ok(0), Err(CoreError::InvalidArgument(_))) => {}
                (w, g) => panic!("seed {seed}: per-index {w:?}, set {g:?}"),
            }
            assert_eq!(fast.mark_delete(), slow.mark_delete(), "seed {seed}");
            assert_eq!(fast.acked(), slow.acked(), "seed {seed}");
            for e in 0..4 {
                assert_eq!(words(&fast, e), words(&slow, e), "seed {seed} entry {e}");
            }
        }
    }
}

#[test]
fn all_zero_words_ack_the_whole_entry() {
    let mut c = Cursor::new(Position::new(1, -1).unwrap(), false);
    assert_eq!(c.ack_batch_set(1, 0, &[], 10).unwrap(), 10);
    assert_eq!(c.mark_delete(), Position::new(1, 0).unwrap());
    assert_eq!(c.batch_count(), 0);
    assert_eq!(c.ack_batch_set(1, 0, &[], 10).unwrap(), 0);
    assert_eq!(c.counters().duplicate_batch_index_acks, 1);
}

#[test]
fn an_all_set_ack_holds_nothing() {
    let mut c = Cursor::new(Position::new(1, -1).unwrap(), false);
    assert_eq!(c.ack_batch_set(1, 4, &[u64::MAX; 3], 100).unwrap(), 0);
    assert_eq!(c.batch_count(), 0);
    assert_eq!(c.mutations(), 0);
}

/// A huge `ack_set` costs what the batch holds, not what the client sent; a huge batch size is
/// refused.
#[test]
fn the_cost_is_bounded_by_the_batch() {
    let mut c = Cursor::new(Position::new(1, -1).unwrap(), false);
    let given = vec![u64::MAX ^ 1; 1 << 20]; // 8 MiB of words for a batch of 5
    assert_eq!(c.ack_batch_set(1, 0, &given, 5).unwrap(), 1);
    assert_eq!(c.batch(1, 0).unwrap().words(), &[0b11110]);
    assert!(matches!(
        c.ack_batch_set(1, 1, &given, MAX_BATCH_SIZE + 1),
        Err(CoreError::InvalidArgument(_))
    ));
    assert!(c.ack_batch_set(1, 0, &given, 6).is_err(), "another size");
}
