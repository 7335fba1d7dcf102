use super::*;
use crate::ackstate::cursor::Cursor;
use crate::error::CoreError;

fn cursor() -> Cursor {
    Cursor::new(Position::new(1, -1).unwrap(), false)
}

fn read(core: &mut SharedCore, c: &Cursor, entries: std::ops::Range<i64>, messages: i64) {
    let es: Vec<i64> = entries.collect();
    let ls = vec![1; es.len()];
    let ms = vec![messages; es.len()];
    core.add_read(&ls, &es, &ms, c).unwrap();
}

#[test]
fn turns_alternate_in_round_robin_batches() {
    let c = cursor();
    let mut core = SharedCore::new(2);
    core.add_consumer(1, 0, 100).unwrap();
    core.add_consumer(2, 0, 100).unwrap();
    read(&mut core, &c, 0..6, 1);
    let out = core.dispatch(&c).unwrap();
    assert_eq!(out[0].entries, vec![0, 1, 4, 5]);
    assert_eq!(out[1].entries, vec![2, 3]);
}

#[test]
fn a_better_priority_level_is_served_first() {
    let c = cursor();
    let mut core = SharedCore::new(20);
    core.add_consumer(1, 1, 100).unwrap();
    core.add_consumer(2, 0, 3).unwrap();
    read(&mut core, &c, 0..5, 1);
    let out = core.dispatch(&c).unwrap();
    assert_eq!(
        (out[0].consumer, out[0].entries.clone()),
        (2, vec![0, 1, 2])
    );
    assert_eq!((out[1].consumer, out[1].entries.clone()), (1, vec![3, 4]));
}

#[test]
fn permits_count_messages_and_a_batch_may_overshoot() {
    let c = cursor();
    let mut core = SharedCore::new(20);
    core.add_consumer(1, 0, 5).unwrap();
    read(&mut core, &c, 0..3, 4);
    let out = core.dispatch(&c).unwrap();
    assert_eq!(out[0].entries, vec![0, 1]);
    assert_eq!(core.figures()[0].permits, -3);
    assert_eq!(core.queue_len(), 1);
    assert_eq!(core.entries_to_read(100), 0);
}

#[test]
fn a_nacked_message_comes_back_first_with_its_count_raised() {
    let mut c = cursor();
    let mut core = SharedCore::new(20);
    core.add_consumer(1, 0, 3).unwrap();
    read(&mut core, &c, 0..3, 1);
    core.dispatch(&c).unwrap();
    assert_eq!(core.nack(1, &[1], &[1], &c).unwrap(), 1);
    core.ack(&[1], &[0], &mut c).unwrap();
    core.add_permits(1, 5).unwrap();
    read(&mut core, &c, 3..5, 1);
    let out = core.dispatch(&c).unwrap();
    assert_eq!(out[0].entries, vec![1, 3, 4]);
    assert_eq!(out[0].counts, vec![1, 0, 0]);
}

#[test]
fn a_message_acked_on_the_cursor_while_away_is_never_sent_again() {
    let mut c = cursor();
    let mut core = SharedCore::new(20);
    core.add_consumer(1, 0, 2).unwrap();
    core.add_consumer(2, 0, 0).unwrap();
    read(&mut core, &c, 0..2, 1);
    core.dispatch(&c).unwrap();
    c.ack(1, 0).unwrap();
    core.remove_consumer(1, &c).unwrap();
    core.add_permits(2, 10).unwrap();
    let out = core.dispatch(&c).unwrap();
    assert_eq!(out[0].entries, vec![1]);
    assert_eq!(core.dropped_acked(), 1);
}

#[test]
fn limits_stop_a_consumer_and_the_subscription() {
    let c = cursor();
    let mut core = SharedCore::new(20);
    core.set_limits(2, 3);
    core.add_consumer(1, 0, 10).unwrap();
    core.add_consumer(2, 0, 10).unwrap();
    read(&mut core, &c, 0..10, 1);
    let out = core.dispatch(&c).unwrap();
    let sent: usize = out.iter().map(|s| s.entries.len()).sum();
    assert_eq!(sent, 3);
    assert_eq!(core.unacked_total(), 3);
}

#[test]
fn errors_are_typed() {
    let c = cursor();
    let mut core = SharedCore::new(20);
    assert!(matches!(
        core.add_permits(9, 1),
        Err(CoreError::UnknownConsumer(_))
    ));
    core.add_consumer(1, 0, 1).unwrap();
    assert!(matches!(
        core.add_consumer(1, 0, 1),
        Err(CoreError::InvalidArgument(_))
    ));
    assert!(core.add_read(&[1], &[0], &[0], &c).is_err());
    assert!(core.add_read(&[1, 1], &[0], &[1], &c).is_err());
    assert!(core.add_read(&[-1], &[0], &[1], &c).is_err());
}
