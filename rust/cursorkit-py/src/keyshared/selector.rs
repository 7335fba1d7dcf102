//! The Key_Shared selectors of `cursorkit._core`: `AutoSplitSelectorState`,
//! `ConsistentHashingSelectorState` and `ExclusiveRangeSelectorState`, each a frozen pyclass around
//! the core selector behind a mutex. Consumers are integer ids here; the wrappers in
//! `cursorkit.keyshared.selectors` map consumer objects to ids.
//!
//! An impact crosses as `(removed, added)`, each a list of `(id, [(start, end), ...])` sorted by id.
//! `select_many` reads int64 and uint32 arrays without copying and releases the GIL for large ones.

use std::sync::Mutex;

use cursorkit_core::{
    AutoSplitSelector, ConsistentHashingSelector, CoreError, ExclusiveRangeSelector, HashRange,
    Impact, StickyKeySelector, DEFAULT_POINTS_PER_CONSUMER, DEFAULT_RANGE_SIZE,
};
use numpy::{PyArray1, PyArrayMethods, PyReadonlyArray1};
use pyo3::prelude::*;
use pyo3::types::{PyList, PyString, PyTuple};

use crate::args::{column, int_arg, str_arg, u32_arg};
use crate::errors::{IntoPy, InvalidArgument, InvalidInputType, UnknownConsumer};
use crate::sync::{self, Shared};

/// Selections of at most this many slots run with the GIL held (cheaper than releasing it).
const SMALL_SELECT: usize = 4096;

/// Ranges by consumer, as they cross to Python.
type ByConsumer = Vec<(u32, Vec<HashRange>)>;

/// A consumer id: an int in `0..2^32` (the core rejects ids beyond `MAX_CONSUMER_ID`).
fn id_arg(obj: &Bound<'_, PyAny>) -> PyResult<u32> {
    u32_arg(obj, "consumer id")
}

/// A positive size argument, or `default` when None.
fn size_arg(obj: Option<&Bound<'_, PyAny>>, what: &str, default: u32) -> PyResult<u32> {
    match obj {
        Some(o) if !o.is_none() => {
            let v = int_arg(o, what)?;
            u32::try_from(v)
                .map_err(|_| InvalidArgument::new_err(format!("{what} must be positive, got {v}")))
        }
        _ => Ok(default),
    }
}

/// `ranges`: None, or an iterable of `(start, end)` pairs of ints in `0..2^32`.
fn ranges_arg(obj: Option<&Bound<'_, PyAny>>) -> PyResult<Vec<HashRange>> {
    let Some(obj) = obj.filter(|o| !o.is_none()) else {
        return Ok(Vec::new());
    };
    let not_pairs = || {
        InvalidInputType::new_err(
            "ranges must be an iterable of (start, end) pairs of ints".to_owned(),
        )
    };
    if obj.is_instance_of::<PyString>() {
        return Err(not_pairs());
    }
    let mut out = Vec::new();
    for item in obj.try_iter().map_err(|_| not_pairs())? {
        let item = item?;
        if item.is_instance_of::<PyString>() || item.len().ok() != Some(2) {
            return Err(not_pairs());
        }
        let start = item.get_item(0).map_err(|_| not_pairs())?;
        let end = item.get_item(1).map_err(|_| not_pairs())?;
        out.push((u32_arg(&start, "range start")?, u32_arg(&end, "range end")?));
    }
    Ok(out)
}

/// The owner of every slot of `slots` (an int64 or uint32 array without copying, or any int
/// column), as a new int64 array (`-1`: nobody).
fn select_many<'py, S: StickyKeySelector + Send>(
    m: &Mutex<S>,
    slots: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    let py = slots.py();
    let mut out = Vec::new();
    let result = if let Some(ro) = contiguous::<u32>(slots) {
        run(py, m, ro.as_slice().unwrap_or(&[]), &mut out)
    } else {
        let col = column(slots, "slots")?;
        run(py, m, col.as_slice(), &mut out)
    };
    result.py_err(py)?;
    Ok(PyArray1::from_vec(py, out).into_any())
}

fn run<S: StickyKeySelector + Send, T: Copy + Into<i64> + Sync>(
    py: Python<'_>,
    m: &Mutex<S>,
    slots: &[T],
    out: &mut Vec<i64>,
) -> Result<(), CoreError> {
    if slots.len() <= SMALL_SELECT {
        sync::lock(py, m).select_many(slots, out)
    } else {
        sync::detached(py, m, |s| s.select_many(slots, out))
    }
}

/// A contiguous 1-D array of `T`, borrowed.
fn contiguous<'py, T: numpy::Element>(obj: &Bound<'py, PyAny>) -> Option<PyReadonlyArray1<'py, T>> {
    let arr = obj.cast::<PyArray1<T>>().ok()?;
    let ro = arr.readonly();
    ro.as_slice().is_ok().then_some(ro)
}

/// `(removed, added)` of an impact.
fn impact_tuple(impact: Impact) -> (ByConsumer, ByConsumer) {
    (impact.removed, impact.added)
}

/// The pyclass of one selector: shared methods, plus the selector's own in `$extra`.
macro_rules! selector_class {
    ($py_ty:ident, $core:ty, $name:literal, $doc:literal, { $($extra:tt)* }) => {
        #[doc = $doc]
        #[pyclass(name = $name, module = "cursorkit._core", frozen)]
        pub struct $py_ty {
            inner: Mutex<$core>,
        }

        crate::shared!($py_ty, $core, $name);

        #[pymethods]
        impl $py_ty {
            /// Registers consumer `consumer_id` (named `name`) and returns `(removed, added)`.
            #[pyo3(signature = (consumer_id, name, ranges = None))]
            fn add_consumer(
                &self,
                consumer_id: &Bound<'_, PyAny>,
                name: &Bound<'_, PyAny>,
                ranges: Option<&Bound<'_, PyAny>>,
            ) -> PyResult<(ByConsumer, ByConsumer)> {
                let py = consumer_id.py();
                let id = id_arg(consumer_id)?;
                let name = str_arg(name, "name")?;
                let ranges = ranges_arg(ranges)?;
                let impact = self.call(py, "add_consumer", |c| c.add_consumer(id, &name, &ranges))?;
                Ok(impact_tuple(impact))
            }

            /// Unregisters consumer `consumer_id` and returns `(removed, added)`.
            fn remove_consumer(
                &self,
                consumer_id: &Bound<'_, PyAny>,
            ) -> PyResult<(ByConsumer, ByConsumer)> {
                let py = consumer_id.py();
                let id = id_arg(consumer_id)?;
                let impact = self.call(py, "remove_consumer", |c| c.remove_consumer(id))?;
                Ok(impact_tuple(impact))
            }

            /// The id of the consumer owning `slot`, or None.
            fn select(&self, slot: &Bound<'_, PyAny>) -> PyResult<Option<u32>> {
                let py = slot.py();
                let slot = int_arg(slot, "slot")?;
                self.lock(py).table().checked_select(slot).py_err(py)
            }

            /// The owner id of every slot as an int64 array (-1: nobody).
            fn select_many<'py>(&self, slots: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
                select_many(&self.inner, slots)
            }

            /// `[(id, [(start, end), ...]), ...]`: merged inclusive ranges, by first range.
            fn consumer_key_hash_ranges(&self, py: Python<'_>) -> ByConsumer {
                self.lock(py).consumer_key_hash_ranges()
            }

            /// The snapshot: `[(start, end, id), ...]` sorted by start.
            fn assignments<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
                let rows: Vec<(u32, u32, u32)> = self
                    .lock(py)
                    .assignments()
                    .iter()
                    .map(|a| (a.start, a.end, a.consumer))
                    .collect();
                PyList::new(py, rows)
            }

            /// The registered ids, ascending.
            fn consumer_ids(&self, py: Python<'_>) -> Vec<u32> {
                self.lock(py).consumer_ids()
            }

            /// The slots the selector's hashing produces, `(first, last)`.
            #[getter]
            fn key_hash_range(&self, py: Python<'_>) -> HashRange {
                self.lock(py).key_hash_range()
            }

            fn __len__(&self, py: Python<'_>) -> usize {
                self.lock(py).len()
            }

            fn __contains__(&self, consumer_id: &Bound<'_, PyAny>) -> bool {
                let py = consumer_id.py();
                match int_arg(consumer_id, "consumer id").map(u32::try_from) {
                    Ok(Ok(id)) => self.lock(py).contains(id),
                    _ => false,
                }
            }

            $($extra)*
        }
    };
}

selector_class!(
    PyAutoSplitSelectorState,
    AutoSplitSelector,
    "AutoSplitSelectorState",
    "PIP-34's auto-split selector over integer consumer ids.",
    {
        #[new]
        #[pyo3(signature = (range_size = None))]
        fn new(py: Python<'_>, range_size: Option<&Bound<'_, PyAny>>) -> PyResult<Self> {
            let size = size_arg(range_size, "range_size", DEFAULT_RANGE_SIZE)?;
            Ok(Self {
                inner: Mutex::new(AutoSplitSelector::new(size).py_err(py)?),
            })
        }

        /// The size of the hash space.
        #[getter]
        fn range_size(&self, py: Python<'_>) -> u32 {
            self.lock(py).range_size()
        }
    }
);

selector_class!(
    PyConsistentHashingSelectorState,
    ConsistentHashingSelector,
    "ConsistentHashingSelectorState",
    "Pulsar 4's consistent-hashing selector over integer consumer ids.",
    {
        #[new]
        #[pyo3(signature = (points_per_consumer = None))]
        fn new(py: Python<'_>, points_per_consumer: Option<&Bound<'_, PyAny>>) -> PyResult<Self> {
            let n = size_arg(
                points_per_consumer,
                "points_per_consumer",
                DEFAULT_POINTS_PER_CONSUMER,
            )?;
            Ok(Self {
                inner: Mutex::new(ConsistentHashingSelector::new(n).py_err(py)?),
            })
        }

        /// Points each consumer puts on the ring.
        #[getter]
        fn points_per_consumer(&self, py: Python<'_>) -> u32 {
            self.lock(py).points_per_consumer()
        }

        /// The ring point of index `i` for a consumer name and name index.
        #[staticmethod]
        fn point(
            name: &Bound<'_, PyAny>,
            name_index: &Bound<'_, PyAny>,
            i: &Bound<'_, PyAny>,
        ) -> PyResult<u32> {
            let name = str_arg(name, "name")?;
            let name_index = u32_arg(name_index, "name_index")?;
            let i = u32_arg(i, "i")?;
            Ok(ConsistentHashingSelector::point(&name, name_index, i))
        }

        /// The consumer's points by point index (owned or queued behind a collision).
        fn points(&self, consumer_id: &Bound<'_, PyAny>) -> PyResult<Vec<u32>> {
            let py = consumer_id.py();
            let id = id_arg(consumer_id)?;
            let sel = self.lock(py);
            sel.points(id)
                .map(<[u32]>::to_vec)
                .ok_or_else(|| unknown(id))
        }

        /// The consumer's name index (the lowest unused among consumers of its name).
        fn name_index(&self, consumer_id: &Bound<'_, PyAny>) -> PyResult<u32> {
            let py = consumer_id.py();
            let id = id_arg(consumer_id)?;
            self.lock(py).name_index(id).ok_or_else(|| unknown(id))
        }

        /// How many ring points the consumer owns (0 when all of its points collided).
        fn owned_points(&self, consumer_id: &Bound<'_, PyAny>) -> PyResult<usize> {
            let py = consumer_id.py();
            let id = id_arg(consumer_id)?;
            let sel = self.lock(py);
            if !sel.contains(id) {
                return Err(unknown(id));
            }
            Ok(sel.owned_points(id))
        }

        /// Whether the consumer owns any ring point (false when all of its points collided).
        fn owns_points(&self, consumer_id: &Bound<'_, PyAny>) -> PyResult<bool> {
            let py = consumer_id.py();
            let id = id_arg(consumer_id)?;
            let sel = self.lock(py);
            if !sel.contains(id) {
                return Err(unknown(id));
            }
            Ok(sel.owns_points(id))
        }

        /// Number of distinct points on the ring.
        fn ring_len(&self, py: Python<'_>) -> usize {
            self.lock(py).ring_len()
        }
    }
);

selector_class!(
    PyExclusiveRangeSelectorState,
    ExclusiveRangeSelector,
    "ExclusiveRangeSelectorState",
    "The exclusive (STICKY) selector over integer consumer ids: consumer-given ranges.",
    {
        #[new]
        #[pyo3(signature = (range_size = None))]
        fn new(py: Python<'_>, range_size: Option<&Bound<'_, PyAny>>) -> PyResult<Self> {
            let size = size_arg(range_size, "range_size", DEFAULT_RANGE_SIZE)?;
            Ok(Self {
                inner: Mutex::new(ExclusiveRangeSelector::new(size).py_err(py)?),
            })
        }

        /// The modulus applied to hashes.
        #[getter]
        fn range_size(&self, py: Python<'_>) -> u32 {
            self.lock(py).range_size()
        }

        /// The ranges the consumer registered, sorted by start.
        fn ranges_of(&self, consumer_id: &Bound<'_, PyAny>) -> PyResult<Vec<HashRange>> {
            let py = consumer_id.py();
            let id = id_arg(consumer_id)?;
            let sel = self.lock(py);
            sel.ranges_of(id)
                .map(<[HashRange]>::to_vec)
                .ok_or_else(|| unknown(id))
        }

        /// `(id, (start, end))` of the first holder overlapping `ranges`, or None.
        fn conflicting_consumer<'py>(
            &self,
            ranges: &Bound<'py, PyAny>,
        ) -> PyResult<Option<Bound<'py, PyTuple>>> {
            let py = ranges.py();
            let ranges = ranges_arg(Some(ranges))?;
            let found = self.lock(py).conflicting_consumer(&ranges);
            found
                .map(|(id, held)| {
                    PyTuple::new(
                        py,
                        [
                            id.into_pyobject(py)?.into_any(),
                            held.into_pyobject(py)?.into_any(),
                        ],
                    )
                })
                .transpose()
        }
    }
);

/// `UnknownConsumer` for an id the selector does not hold.
#[cold]
fn unknown(id: u32) -> PyErr {
    UnknownConsumer::new_err(format!("consumer id {id} is not registered"))
}
