//! `cursorkit._core.SharedCore`: a Shared subscription's dispatch state behind a mutex.
//!
//! Consumers are small ids (`cursorkit.shared.SharedDispatcher` maps objects to them). Calls that
//! touch the cursor take a `cursorkit.Cursor` and lock it after the core, always in that order.
//! Positions go in as `Position` lists or int64 columns; a dispatch returns
//! `(consumer id, [Position], [redelivery count])` per consumer. Large calls release the GIL.

use std::sync::Mutex;

use cursorkit_core::{AckCounts, CoreError, Position, SharedCore, ROUND_ROBIN_BATCH};
use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};

use crate::ackstate::cursor::with_cursor;
use crate::ackstate::dispatch_counts::{
    positions as positions_of, seeds, take_raised, RaisedColumns,
};
use crate::ackstate::position::PyPosition;
use crate::ackstate::rangeset::columns;
use crate::args::{bool_arg, column, int_arg, u32_arg};
use crate::errors::{to_py, InvalidArgument};
use crate::keyshared::dispatcher::ids::Ids;
use crate::sync::Shared;

/// Calls over at most this many entries keep the GIL (releasing it costs more).
const SMALL: usize = 256;

/// A Shared subscription's dispatch state (see `cursorkit_core::SharedCore`).
#[pyclass(name = "SharedCore", module = "cursorkit._core", frozen)]
pub struct PySharedCore {
    inner: Mutex<SharedCore>,
}

crate::shared!(PySharedCore, SharedCore, "SharedCore");

fn count_arg(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<u64> {
    let v = int_arg(obj, what)?;
    u64::try_from(v).map_err(|_| InvalidArgument::new_err(format!("{what} must be >= 0, got {v}")))
}

fn counts(py: Python<'_>, c: AckCounts) -> PyResult<Bound<'_, PyTuple>> {
    PyTuple::new(py, [c.released, c.not_held, c.duplicates])
}

impl PySharedCore {
    fn plain<R>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut SharedCore) -> Result<R, CoreError>,
    ) -> PyResult<R> {
        let mut d = self.lock(py);
        f(&mut d).map_err(|e| to_py(py, e))
    }
}

#[pymethods]
impl PySharedCore {
    /// An empty subscription: `round_robin_batch` messages per consumer turn, and the unacked
    /// limits per consumer and per subscription (0: none).
    #[new]
    #[pyo3(signature = (
        round_robin_batch = None,
        max_unacked_per_consumer = None,
        max_unacked_per_subscription = None
    ))]
    fn new(
        round_robin_batch: Option<&Bound<'_, PyAny>>,
        max_unacked_per_consumer: Option<&Bound<'_, PyAny>>,
        max_unacked_per_subscription: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let batch = match round_robin_batch {
            Some(b) => u32_arg(b, "round_robin_batch")?,
            None => ROUND_ROBIN_BATCH,
        };
        if batch == 0 {
            return Err(InvalidArgument::new_err(
                "round_robin_batch must be at least 1",
            ));
        }
        let limit = |v: Option<&Bound<'_, PyAny>>, what: &str, default: u64| {
            v.map_or(Ok(default), |v| count_arg(v, what))
        };
        let mut core = SharedCore::new(batch);
        core.set_limits(
            limit(max_unacked_per_consumer, "max_unacked_per_consumer", 50_000)?,
            limit(
                max_unacked_per_subscription,
                "max_unacked_per_subscription",
                200_000,
            )?,
        );
        Ok(Self {
            inner: Mutex::new(core),
        })
    }

    /// Registers consumer `consumer_id` at `priority` (lower is served first) with `permits`.
    fn add_consumer(
        &self,
        py: Python<'_>,
        consumer_id: &Bound<'_, PyAny>,
        priority: &Bound<'_, PyAny>,
        permits: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let id = u32_arg(consumer_id, "consumer id")?;
        let pr = int_arg(priority, "priority")?;
        let pr = i32::try_from(pr).map_err(|_| {
            InvalidArgument::new_err(format!("priority must fit 32 bits, got {pr}"))
        })?;
        let n = count_arg(permits, "permits")?;
        self.plain(py, |d| d.add_consumer(id, pr, n))
    }

    /// Unregisters a consumer; returns what it held (now queued again), in order.
    fn remove_consumer<'py>(
        &self,
        consumer_id: &Bound<'py, PyAny>,
        cursor: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyList>> {
        let id = u32_arg(consumer_id, "consumer id")?;
        let ps = with_cursor(self, cursor, "remove_consumer", true, |d, c| {
            d.remove_consumer(id, c)
        })?;
        PyList::new(cursor.py(), ps.into_iter().map(PyPosition))
    }

    /// Adds permits (messages) to a consumer.
    fn add_permits(
        &self,
        py: Python<'_>,
        consumer_id: &Bound<'_, PyAny>,
        permits: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let id = u32_arg(consumer_id, "consumer id")?;
        let n = count_arg(permits, "permits")?;
        self.plain(py, |d| d.add_permits(id, n))
    }

    /// Pauses (True) or resumes a consumer.
    fn set_paused(
        &self,
        py: Python<'_>,
        consumer_id: &Bound<'_, PyAny>,
        paused: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let id = u32_arg(consumer_id, "consumer id")?;
        let p = bool_arg(paused, "paused")?;
        self.plain(py, |d| d.set_paused(id, p))
    }

    /// How many new entries to read now (0 while the queue has entries or nobody can take).
    fn entries_to_read(&self, py: Python<'_>, read_batch: &Bound<'_, PyAny>) -> PyResult<u64> {
        let n = count_arg(read_batch, "read_batch")?;
        Ok(self.lock(py).entries_to_read(n))
    }

    /// Adds entries read from the log: a `Position` sequence and their message counts.
    fn add_read(
        &self,
        positions: &Bound<'_, PyAny>,
        messages: &Bound<'_, PyAny>,
        cursor: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let mut ids = Ids::empty();
        ids.read(positions)?;
        let (ls, es) = ids.slices();
        let ms = column(messages, "messages")?;
        let ms = ms.as_slice();
        with_cursor(self, cursor, "add_read", ls.len() > SMALL, |d, c| {
            d.add_read(ls, es, ms, c)
        })
    }

    /// `add_read` with the positions as ledger and entry id columns (int64 arrays or sequences).
    fn add_read_columns(
        &self,
        ledger_ids: &Bound<'_, PyAny>,
        entry_ids: &Bound<'_, PyAny>,
        messages: &Bound<'_, PyAny>,
        cursor: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let (ls, es) = columns(ledger_ids, entry_ids)?;
        let ms = column(messages, "messages")?;
        let (ls, es, ms) = (ls.as_slice(), es.as_slice(), ms.as_slice());
        with_cursor(
            self,
            cursor,
            "add_read_columns",
            ls.len() > SMALL,
            |d, c| d.add_read(ls, es, ms, c),
        )
    }

    /// Sends what can be sent: `(consumer id, [Position], [redelivery count])` per consumer.
    fn dispatch<'py>(&self, cursor: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyList>> {
        let py = cursor.py();
        let large = self.lock(py).queue_len() > SMALL;
        let sent = with_cursor(self, cursor, "dispatch", large, |d, c| d.dispatch(c))?;
        let out = PyList::empty(py);
        for s in sent {
            let ps = PyList::new(
                py,
                s.ledgers.iter().zip(&s.entries).map(|(&l, &e)| {
                    PyPosition(Position {
                        ledger_id: l,
                        entry_id: e,
                    })
                }),
            )?;
            out.append((s.consumer, ps, s.counts))?;
        }
        Ok(out)
    }

    /// Acknowledges `Position`s, whoever holds them: `(released, not_held, duplicates)`.
    fn ack<'py>(
        &self,
        positions: &Bound<'py, PyAny>,
        cursor: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let mut ids = Ids::empty();
        ids.read(positions)?;
        let (ls, es) = ids.slices();
        let c = with_cursor(self, cursor, "ack", ls.len() > SMALL, |d, k| {
            d.ack(ls, es, k)
        })?;
        counts(cursor.py(), c)
    }

    /// Acknowledges everything up to and including a position: `(released, not_held, duplicates)`.
    fn ack_cumulative<'py>(
        &self,
        position: PyRef<'py, PyPosition>,
        cursor: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let p = position.0;
        let c = with_cursor(self, cursor, "ack_cumulative", true, |d, k| {
            d.ack_cumulative(p.ledger_id, p.entry_id, k)
        })?;
        counts(cursor.py(), c)
    }

    /// A consumer's negative acks of `Position`s it holds; returns how many went back.
    fn nack(
        &self,
        consumer_id: &Bound<'_, PyAny>,
        positions: &Bound<'_, PyAny>,
        cursor: &Bound<'_, PyAny>,
    ) -> PyResult<u64> {
        let id = u32_arg(consumer_id, "consumer id")?;
        let mut ids = Ids::empty();
        ids.read(positions)?;
        let (ls, es) = ids.slices();
        with_cursor(self, cursor, "nack", ls.len() > SMALL, |d, c| {
            d.nack(id, ls, es, c)
        })
    }

    /// Everything a consumer holds goes back, counts raised; returns how many.
    fn redeliver_all(
        &self,
        consumer_id: &Bound<'_, PyAny>,
        cursor: &Bound<'_, PyAny>,
    ) -> PyResult<u64> {
        let id = u32_arg(consumer_id, "consumer id")?;
        with_cursor(self, cursor, "redeliver_all", true, |d, c| {
            d.redeliver_all(id, c)
        })
    }

    /// Forgets everything sent or waiting (a seek).
    fn reset(&self, py: Python<'_>) {
        self.lock(py).reset();
    }

    /// A position's redelivery count.
    fn redelivery_count(&self, py: Python<'_>, position: PyRef<'_, PyPosition>) -> u32 {
        self.lock(py).redelivery_count(position.0)
    }

    /// Journals every redelivery-count raise from now on (durable counts), or stops; a journaled
    /// dispatcher keeps its counts when the last consumer leaves.
    fn set_counts_journal(&self, py: Python<'_>, on: &Bound<'_, PyAny>) -> PyResult<()> {
        let on = bool_arg(on, "on")?;
        self.lock(py).counts_mut().set_journal(on);
        Ok(())
    }

    /// The raises journaled since the last call: `(ledger ids, entry ids, new counts)` arrays.
    fn take_raised_counts<'py>(&self, py: Python<'py>) -> RaisedColumns<'py> {
        take_raised(py, self.lock(py).counts_mut())
    }

    /// Counts read back from a durable journal: each position keeps the higher of its count and
    /// the given one.
    fn seed_counts(
        &self,
        ledger_ids: &Bound<'_, PyAny>,
        entry_ids: &Bound<'_, PyAny>,
        counts: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let seeds = seeds(ledger_ids, entry_ids, counts)?;
        self.lock(ledger_ids.py()).counts_mut().seed(seeds);
        Ok(())
    }

    /// One more redelivery of each of `positions` (a consumer lost holding them); journaled.
    fn raise_counts(&self, positions: &Bound<'_, PyAny>) -> PyResult<()> {
        let ps = positions_of(positions)?;
        let mut d = self.lock(positions.py());
        ps.into_iter().for_each(|p| {
            d.counts_mut().raise(p);
        });
        Ok(())
    }

    /// The positions a consumer holds, in order.
    fn held_by<'py>(
        &self,
        py: Python<'py>,
        consumer_id: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyList>> {
        let id = u32_arg(consumer_id, "consumer id")?;
        let ps = self.lock(py).held_by(id);
        PyList::new(py, ps.into_iter().map(PyPosition))
    }

    /// The queued positions, in order.
    fn queued<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let ps: Vec<Position> = self.lock(py).queued().collect();
        PyList::new(py, ps.into_iter().map(PyPosition))
    }

    /// Per consumer in join order: `(id, priority, permits, unacked, held entries, msg out, paused)`.
    fn figures<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let fs = self.lock(py).figures();
        let out = PyList::empty(py);
        for f in fs {
            out.append((
                f.id,
                f.priority,
                f.permits,
                f.unacked,
                f.held_entries,
                f.msg_out,
                f.paused,
            ))?;
        }
        Ok(out)
    }

    /// `(queued entries, held entries, unacked messages, dropped as acked, permits of those who can take)`.
    fn totals(&self, py: Python<'_>) -> (usize, usize, u64, u64, u64) {
        let d = self.lock(py);
        (
            d.queue_len(),
            d.held_len(),
            d.unacked_total(),
            d.dropped_acked(),
            d.permits_total(),
        )
    }

    /// Heap bytes of the state, roughly.
    fn memory_usage(&self, py: Python<'_>) -> usize {
        self.lock(py).memory_usage()
    }
}
