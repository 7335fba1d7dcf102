//! `DispatchCore`'s figures: what is in flight, waiting, blocked and counted.

use super::*;

impl DispatchCore {
    /// Consumer `id`'s unacked positions, in order.
    pub fn unacked(&self, id: u32) -> Result<Vec<Position>> {
        let seat = self.seat(id)?;
        Ok(self
            .inflight
            .of_seat(seat)
            .into_iter()
            .map(|(p, _)| p)
            .collect())
    }

    /// Consumer `id`'s figures.
    pub fn consumer_figures(&self, id: u32) -> Result<ConsumerFigures> {
        let seat = self.seat(id)?;
        let s = self.occupant(seat)?;
        Ok(ConsumerFigures {
            permits: s.permits,
            unacked: self.inflight.count(seat),
            delivered: s.delivered,
            joined_last_sent: s.joined_last_sent,
            progress: s.progress,
            stuck: s.stuck,
        })
    }

    /// The replay queue, in order.
    pub fn replay_positions(&self) -> Vec<Position> {
        self.replay.positions().map(|(p, _)| p).collect()
    }

    /// Replay queue length.
    pub fn replay_len(&self) -> usize {
        self.replay.len()
    }

    /// Why each slot was held back at the last dispatch.
    pub fn blocked(&self) -> Vec<(u16, Blocked)> {
        self.blocked.sorted()
    }

    /// Unblock events so far (acks, nacks and membership changes that released a blocked hash).
    pub fn unblocked_events(&self) -> u64 {
        self.unblocked
    }

    /// Positions dropped on their way to (or from) the replay queue because the cursor had
    /// acknowledged them.
    pub fn replay_dropped_acked(&self) -> u64 {
        self.dropped_acked
    }

    /// How many times `p` was nacked or redelivered (Pulsar's redelivery count: a leaver's messages
    /// are not counted; counts go with an ack and when the last consumer leaves).
    pub fn redelivery_count(&self, p: Position) -> u32 {
        self.redeliveries.get(&p).copied().unwrap_or(0)
    }

    /// Redelivery counts of many positions.
    pub fn redelivery_counts(&self, ledgers: &[i64], entries: &[i64]) -> Vec<u32> {
        if self.redeliveries.is_empty() {
            return vec![0; ledgers.len()];
        }
        each_position(ledgers, entries)
            .map(|p| self.redelivery_count(p))
            .collect()
    }

    /// The redelivery counts, the one place they are kept (journal on for durable counts).
    pub fn counts(&self) -> &DispatchCounts {
        &self.redeliveries
    }

    /// The redelivery counts, to journal, seed or raise (a consumer's connection lost).
    pub fn counts_mut(&mut self) -> &mut DispatchCounts {
        &mut self.redeliveries
    }

    /// Positions with a redelivery count held.
    pub fn redeliveries_tracked(&self) -> usize {
        self.redeliveries.len()
    }

    /// The draining hashes (PIP-379).
    pub fn draining(&self) -> &DrainingHashes {
        &self.draining
    }

    /// PIP-282: the last sent position (None before first use).
    pub fn last_sent_position(&self) -> Option<Position> {
        self.last_sent.last()
    }

    /// PIP-282: positions sent after the last sent position.
    pub fn individually_sent(&self) -> &RangeSet {
        self.last_sent.sent()
    }

    /// PIP-282: joined consumers still limited, with their limit.
    pub fn recently_joined(&self) -> Vec<(u32, Position)> {
        self.last_sent
            .joined
            .iter()
            .map(|(c, p)| (*c, *p))
            .collect()
    }

    /// The highest position read since the last release.
    pub fn highest_read(&self) -> Option<Position> {
        self.highest_read
    }

    /// Approximate heap bytes of what the consumers have in flight.
    pub fn pending_memory_usage(&self) -> usize {
        self.inflight.memory_usage()
    }

    /// Messages pending over all consumers.
    pub fn pending_total(&self) -> u64 {
        self.inflight.len()
    }
}
