//! `DispatchCore` with batch entries: a send takes as many permits as the entry holds messages.

use cursorkit_core::{
    AutoSplitSelector, Cursor, DispatchCore, DispatchMode, Position, StickyKeySelector,
};

fn one_consumer(permits: u64) -> (DispatchCore, Cursor) {
    let cursor = Cursor::new(Position::new(1, -1).unwrap(), false);
    let mut selector = AutoSplitSelector::new(65536).unwrap();
    let mut core = DispatchCore::new(DispatchMode::Draining);
    selector.add_consumer(1, "a", &[]).unwrap();
    core.add_consumer(1, permits, &cursor).unwrap();
    core.set_owners_from(selector.table()).unwrap();
    (core, cursor)
}

#[test]
fn batch_entries_take_their_messages_of_permits() {
    let (mut core, mut cursor) = one_consumer(10);
    core.set_batch_sizes(&[1, 1, 1, 1], &[0, 1, 2, 3], &[4, 4, 4, 4])
        .unwrap();
    core.add_read(&[1, 1, 1, 1], &[0, 1, 2, 3], &[7, 7, 7, 7], &cursor)
        .unwrap();
    let out = core.dispatch(&cursor).unwrap();
    // 10 permits: 4 + 4 + (2 left, the third batch still goes) = 3 entries, then none left.
    assert_eq!(out[0].entries.len(), 3);
    assert_eq!(core.permits_total(), 0);
    core.ack(1, &out[0].ledgers, &out[0].entries, &mut cursor)
        .unwrap();
    core.add_permits(1, 1).unwrap();
    let out = core.dispatch(&cursor).unwrap();
    assert_eq!(out[0].entries, vec![3]);
}

#[test]
fn entries_without_a_size_take_one_permit_and_bad_sizes_are_refused() {
    let (mut core, cursor) = one_consumer(3);
    core.add_read(&[1, 1, 1, 1], &[0, 1, 2, 3], &[7, 7, 7, 7], &cursor)
        .unwrap();
    let out = core.dispatch(&cursor).unwrap();
    assert_eq!(out[0].entries.len(), 3);
    assert!(core.set_batch_sizes(&[1], &[0], &[0]).is_err());
    assert!(core.set_batch_sizes(&[1, 1], &[0], &[2]).is_err());
    assert!(core.set_batch_sizes(&[1], &[0], &[2, 2]).is_err());
}
