//! PIP-282 (Pulsar 3.3's Key_Shared ordering): the subscription's last sent position, the set of
//! positions sent beyond it, and each recently joined consumer's limit.

use std::collections::BTreeMap;

use crate::ackstate::cursor::Cursor;
use crate::ackstate::position::Position;
use crate::ackstate::rangeset::RangeSet;
use crate::error::Result;

/// The last-sent position and what was sent after it.
#[derive(Debug, Clone, Default)]
pub(super) struct LastSent {
    /// None until first used; then never below mark-delete.
    last: Option<Position>,
    /// Positions sent after `last` (seeded with the cursor's ack holes on first use, as 3.3 does).
    sent: RangeSet,
    /// Joined consumer id → the last sent position at its join (while above mark-delete).
    pub(super) joined: BTreeMap<u32, Position>,
}

impl LastSent {
    pub(super) fn last(&self) -> Option<Position> {
        self.last
    }

    pub(super) fn sent(&self) -> &RangeSet {
        &self.sent
    }

    /// The last sent position, never below mark-delete (first use seeds the sent set).
    pub(super) fn current(&mut self, cursor: &Cursor) -> Position {
        let md = cursor.mark_delete();
        match self.last {
            None => {
                self.sent = cursor.acked().clone();
                self.last = Some(md);
                md
            }
            Some(l) if l < md => {
                self.last = Some(md);
                md
            }
            Some(l) => l,
        }
    }

    /// Records a send of `pos`.
    pub(super) fn on_send(&mut self, pos: Position, cursor: &Cursor) -> Result<()> {
        let lsp = self.current(cursor);
        if pos > lsp && !self.sent.contains(pos.ledger_id, pos.entry_id)? {
            self.sent.add(pos.ledger_id, pos.entry_id)?;
        }
        Ok(())
    }

    /// The limit for a send to `consumer` (replays stop at the earliest joiner's limit).
    pub(super) fn limit(&self, consumer: u32, replay: bool) -> Option<Position> {
        let own = *self.joined.get(&consumer)?;
        if replay {
            self.joined.values().min().map(|m| own.min(*m))
        } else {
            Some(own)
        }
    }

    /// A joiner is free once mark-delete reaches its joining position.
    pub(super) fn forget_joined(&mut self, md: Position) {
        if !self.joined.is_empty() {
            self.joined.retain(|_, j| *j > md);
        }
    }

    /// The entry after `pos`; past a ledger's known last entry, the first of the next non-empty one.
    fn next(pos: Position, cursor: &Cursor) -> Position {
        if let Some(sizes) = cursor.ledger_sizes() {
            let size = sizes.get(&pos.ledger_id).copied().unwrap_or(u64::MAX);
            let past_end = u64::try_from(pos.entry_id.saturating_add(1)).is_ok_and(|n| n >= size);
            if past_end {
                let later = sizes
                    .range(pos.ledger_id.saturating_add(1)..)
                    .find(|(_, n)| **n > 0);
                if let Some((lid, _)) = later {
                    return Position {
                        ledger_id: *lid,
                        entry_id: 0,
                    };
                }
            }
        }
        Position {
            ledger_id: pos.ledger_id,
            entry_id: pos.entry_id.saturating_add(1),
        }
    }

    /// Moves the last sent position over every contiguous run of sent positions after it.
    pub(super) fn advance(&mut self, cursor: &Cursor) -> Result<()> {
        let mut lsp = self.current(cursor);
        self.sent.remove_at_most(lsp.ledger_id, lsp.entry_id)?;
        loop {
            let nxt = Self::next(lsp, cursor);
            match self.sent.range_containing(nxt.ledger_id, nxt.entry_id)? {
                Some((_, end)) => lsp = end,
                None => break,
            }
        }
        self.last = Some(lsp);
        self.sent.remove_at_most(lsp.ledger_id, lsp.entry_id)
    }

    /// Everything forgotten (the last consumer left).
    pub(super) fn reset(&mut self) {
        self.last = None;
        self.sent.clear();
        self.joined.clear();
    }
}
