#![doc = include_str!("../README.md")]
#![deny(missing_docs)]

pub mod ackstate;
pub mod bits;
pub mod broker;
pub mod delayed;
mod error;
pub mod keyshared;
mod mem;
pub mod shared;
/// The integration tests' shared helpers, for the unit tests too (one seeded generator).
#[cfg(test)]
#[path = "../tests/common/mod.rs"]
mod testing;

pub use ackstate::batch::{check_batch_sizes, BatchAcks, MAX_BATCH_SIZE};
pub use ackstate::codec::{FORMAT_VERSION, MAGIC};
pub use ackstate::cursor::{Cursor, CursorCounters, MAX_NEXT_UNACKED};
pub use ackstate::dispatch_counts::DispatchCounts;
pub use ackstate::position::{check_bound, check_entry, check_ledger, Position, MAX_ENTRY_ID};
pub use ackstate::rangeset::{Range, RangeSet, MAX_DECODED_CHUNKS};
pub use ackstate::redeliveries::{RedeliveryCounts, DEFAULT_MAX_RUNS, REDELIVERY_FORMAT_VERSION};
pub use ackstate::wire::{
    long_list_map_field, message_range_field, parse_message_ranges, varint_len,
};
pub use bits::{pack_bits, set_bits};
pub use broker::{Frame, FrameScanner};
pub use delayed::delay_queue::{DelayQueue, Popped, MAX_LIVE_LEDGERS};
pub use delayed::snapshot::{
    bitmap_cardinality, cut_segments, decode_segment, encode_segment, segment_bitmaps,
    sort_indexes, UNLIMITED_INDEXES,
};
pub use delayed::tracker::{precision_bits, InMemoryTracker, TrackerCounters};
pub use error::{CoreError, Result};
pub use keyshared::dispatch::{
    AckOutcome, BlockReason, Blocked, ConsumerFigures, Delivery, DispatchCore, DispatchMode,
    Dispatched, IsolationFigures, KeyOrderFigures, SLOTS,
};
pub use keyshared::draining::{
    ConsumerDrainingStats, DrainingCounters, DrainingHash, DrainingHashes, RemovedHashes,
};
pub use keyshared::hash::{
    hash_many, key_slots_many, murmur3_x86_32, slot_consistent, slot_range, slots_many,
    sticky_key_hash, Offset, SlotKind, DEFAULT_RANGE_SIZE, MAX_RANGE_SIZE, MAX_STICKY_KEY_HASH,
    NONE_KEY, STICKY_KEY_HASH_NOT_SET,
};
pub use keyshared::selector::{
    diff, ranges_by_consumer, Assignment, AutoSplitSelector, BeyondTable,
    ConsistentHashingSelector, ExclusiveRangeSelector, HashRange, Impact, SlotTable,
    StickyKeySelector, CONSISTENT_HASHING_KEY_RANGE, DEFAULT_POINTS_PER_CONSUMER, MAX_CONSUMER_ID,
    MAX_POINTS_PER_CONSUMER, MAX_SELECTOR_RANGE_SIZE,
};
pub use shared::{AckCounts, Sent, SharedConsumerFigures, SharedCore, ROUND_ROBIN_BATCH};
