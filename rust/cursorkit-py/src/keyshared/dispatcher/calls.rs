//! What `KeySharedBase`'s Python methods share: the consumer lookup, the locked and detached
//! calls into the core, the policy and delayed hooks, the read with deliver-at times, and the
//! argument checks.

use super::*;
use crate::errors::{InvalidArgument, InvalidInputType, UnknownConsumer};

impl PyKeySharedBase {
    /// The consumer id of a registered consumer (`UnknownConsumer` otherwise).
    #[inline]
    pub(super) fn id_of(&self, consumer: &Bound<'_, PyAny>) -> PyResult<u32> {
        // A registered object is kept alive by `consumers`, so its address is not reused.
        if let Some(&id) = lock(&self.by_address).get(&(consumer.as_ptr() as usize)) {
            return Ok(id);
        }
        let py = consumer.py();
        match self.ids.bind(py).get_item(consumer) {
            Ok(Some(id)) => id.extract::<u32>(),
            Ok(None) | Err(_) => Err(unknown_consumer(consumer)),
        }
    }

    /// Runs `f` on the dispatch core and the cursor, locked in that order (GIL held).
    #[inline]
    pub(super) fn locked<R>(
        &self,
        py: Python<'_>,
        method: &'static str,
        f: impl FnOnce(&mut DispatchCore, &mut Cursor) -> Result<R, CoreError>,
    ) -> PyResult<R> {
        let core = self.core.get();
        let cursor = self.cursor.get();
        let mut d = core.lock(py);
        let mut c = cursor.lock(py);
        catching(
            || format!("KeySharedDispatcher.{method}"),
            || f(&mut d, &mut c),
        )
        .map_err(|e| to_py(py, e))
    }

    /// [`locked`](Self::locked) with the GIL released, for work over many entries.
    pub(super) fn detached<R: Send>(
        &self,
        py: Python<'_>,
        method: &'static str,
        f: impl FnOnce(&mut DispatchCore, &mut Cursor) -> Result<R, CoreError> + Send,
    ) -> PyResult<R> {
        let (mine, theirs) = (self.core.get().cell(), self.cursor.get().cell());
        sync::guarded(py, method, || {
            let mut d = lock(mine);
            let mut c = lock(theirs);
            f(&mut d, &mut c)
        })
        .map_err(|e| to_py(py, e))
    }

    /// The shared `AckResult` of an outcome: the usual ones (`k` acked, nothing else) from a
    /// table without a lock, others from a map (made once; the first few thousand kept).
    #[inline]
    pub(super) fn result(&self, py: Python<'_>, o: Outcome) -> PyResult<Py<PyAny>> {
        if let (k, 0, 0, 0, 0, 0, 0) = o {
            if let Some(cell) = PLAIN_RESULTS.get(k as usize) {
                return cell
                    .get_or_try_init(py, || make_result(py, o))
                    .map(|r| r.clone_ref(py));
            }
        }
        if let Some(found) = lock(&self.results).get(&o) {
            return Ok(found.clone_ref(py));
        }
        let made = make_result(py, o)?;
        let mut kept = lock(&self.results);
        if kept.len() < RESULTS_KEPT {
            kept.insert(o, made.clone_ref(py));
        }
        Ok(made)
    }

    /// A hook if one is set (the atomic keeps the common no-hook case off the mutex).
    #[inline]
    pub(super) fn hook(
        &self,
        py: Python<'_>,
        set: &AtomicBool,
        slot: &Mutex<Option<Py<PyAny>>>,
    ) -> Option<Py<PyAny>> {
        if !set.load(Ordering::Acquire) {
            return None;
        }
        lock(slot).as_ref().map(|h| h.clone_ref(py))
    }

    /// Whether the PIP-299 policy wants a look after acks (a policy without the flag always does).
    pub(super) fn policy_watching(py: Python<'_>, policy: &Bound<'_, PyAny>) -> PyResult<bool> {
        match policy.getattr(intern!(py, "checks_acks")) {
            Ok(flag) => flag.is_truthy(),
            Err(_) => Ok(true),
        }
    }

    /// PIP-299: the policy re-checks the cursor after an ack (skipped while it is off and unpaused).
    pub(super) fn after_ack(&self, py: Python<'_>) -> PyResult<()> {
        if let Some(policy) = self.hook(py, &self.has_policy, &self.policy) {
            let policy = policy.bind(py);
            if Self::policy_watching(py, policy)? {
                policy.call_method1(
                    intern!(py, "after_ack"),
                    (self.cursor.clone_ref(py), intern!(py, "Key_Shared")),
                )?;
            }
        }
        Ok(())
    }

    /// Whether the PIP-299 policy pauses reads of new entries now.
    pub(super) fn paused(&self, py: Python<'_>) -> PyResult<bool> {
        let Some(policy) = self.hook(py, &self.has_policy, &self.policy) else {
            return Ok(false);
        };
        let policy = policy.bind(py);
        if !Self::policy_watching(py, policy)? {
            return Ok(false);
        }
        policy
            .call_method1(
                intern!(py, "should_pause"),
                (self.cursor.clone_ref(py), intern!(py, "Key_Shared")),
            )?
            .is_truthy()
    }

    /// Pulsar 4's look-ahead limit for `consumers` consumers.
    pub(super) fn limit_for(&self, consumers: u64) -> u64 {
        let [per_c, per_s, max_c, max_s] = self
            .look_ahead
            .each_ref()
            .map(|a| a.load(Ordering::Relaxed));
        let limit = if per_c > 0 {
            let l = per_c.saturating_mul(consumers);
            if per_s > 0 {
                l.min(per_s)
            } else {
                l
            }
        } else {
            per_s
        };
        if limit > 0 {
            return limit;
        }
        let by_consumers = consumers.saturating_mul(max_c);
        [max_s, by_consumers]
            .into_iter()
            .filter(|&c| c > 0)
            .min()
            .unwrap_or(UNLIMITED)
    }

    /// Due delayed messages join the replay queue (they are older than anything read since).
    pub(super) fn take_due(&self, py: Python<'_>) -> PyResult<()> {
        let Some(delayed) = self.hook(py, &self.has_delayed, &self.delayed) else {
            return Ok(());
        };
        let due = delayed
            .bind(py)
            .call_method1(intern!(py, "get_scheduled_messages"), (1i64 << 31,))?;
        let (ls, es) = pairs(&due)?;
        if ls.is_empty() {
            return Ok(());
        }
        self.locked(py, "dispatch", |d, c| d.release_delayed(&ls, &es, c))?;
        Ok(())
    }

    /// A dispatch's deliveries (the GIL released when much is waiting).
    pub(super) fn deliveries(&self, py: Python<'_>) -> PyResult<Dispatched> {
        self.take_due(py)?;
        let waiting = self.core.get().lock(py).waiting();
        if waiting > SMALL {
            self.detached(py, "dispatch", |d, c| d.dispatch_packed(c))
        } else {
            self.locked(py, "dispatch", |d, c| d.dispatch_packed(c))
        }
    }

    /// A read (columns), the entries a delayed-delivery tracker takes held back in one call to it.
    ///
    /// Each id column comes with the caller's array when it was read without a copy: the tracker
    /// gets that array itself rather than a copy.
    pub(super) fn read<'py>(
        &self,
        py: Python<'py>,
        (ls, ls_given): (&[i64], Option<Bound<'py, PyAny>>),
        (es, es_given): (&[i64], Option<Bound<'py, PyAny>>),
        slots: &[i64],
        deliver_at: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<()> {
        let delayed = match deliver_at.filter(|d| !d.is_none()) {
            Some(at) => self
                .hook(py, &self.has_delayed, &self.delayed)
                .map(|d| (d, at)),
            None => None,
        };
        let Some((tracker, at)) = delayed else {
            return self.locked(py, "add_read", |d, c| d.add_read(ls, es, slots, c));
        };
        let at_column = column(at, "deliver_at")?;
        let at_given = at_column.borrowed();
        let at = at_column.as_slice();
        if at.len() != ls.len() || slots.len() != ls.len() || es.len() != ls.len() {
            return Err(InvalidArgument::new_err(format!(
                "positions, slots and deliver_at differ in length: {}, {}, {}",
                ls.len(),
                slots.len(),
                at.len()
            )));
        }
        if ls.is_empty() {
            return Ok(());
        }
        if self.core.get().lock(py).is_empty() {
            // Nobody to hold them for: the core releases the read (and the broker reads it again).
            return self.locked(py, "add_read", |d, c| d.add_read(ls, es, slots, c));
        }
        check_slots(slots)?;
        let tracker = tracker.bind(py);
        let (held, kept) = match native_tracker(tracker)? {
            Some(native) => native.get().add_many_words(py, ls, es, at)?,
            None => {
                let array = |given: Option<Bound<'py, PyAny>>, v: &[i64]| {
                    given.unwrap_or_else(|| PyArray1::from_slice(py, v).into_any())
                };
                let mask = tracker.call_method1(
                    intern!(py, "add_many"),
                    (
                        array(ls_given, ls),
                        array(es_given, es),
                        array(at_given, at),
                    ),
                )?;
                pack_bits(&bools(&mask, ls.len())?, |&h| h)
            }
        };
        // The core splits the read by the held bits: no column of either side built here.
        self.locked(py, "add_read", |d, c| {
            if kept == 0 {
                d.add_read(ls, es, slots, c)
            } else {
                d.add_read_split(ls, es, slots, &held, c)
            }
        })
    }
}

/// The native in-memory tracker behind `tracker` when its `add_many` is the native one (a
/// subclass that overrides it is called through Python, as any other tracker is).
pub(super) fn native_tracker<'a, 'py>(
    tracker: &'a Bound<'py, PyAny>,
) -> PyResult<Option<&'a Bound<'py, PyInMemoryTrackerState>>> {
    let Ok(native) = tracker.cast::<PyInMemoryTrackerState>() else {
        return Ok(None);
    };
    let py = tracker.py();
    let own = tracker.get_type().getattr(intern!(py, "add_many"))?;
    let base = NATIVE_ADD_MANY.get_or_try_init(py, || {
        py.get_type::<PyInMemoryTrackerState>()
            .getattr("add_many")
            .map(Bound::unbind)
    })?;
    Ok(own.is(base.bind(py)).then_some(native))
}

/// `InMemoryTrackerState.add_many`, looked up once.
static NATIVE_ADD_MANY: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

#[cold]
pub(super) fn unknown_consumer(consumer: &Bound<'_, PyAny>) -> PyErr {
    let py = consumer.py();
    let shown = consumer
        .getattr(intern!(py, "name"))
        .unwrap_or_else(|_| consumer.clone())
        .repr()
        .map_or_else(|_| "?".to_owned(), |r| r.to_string());
    UnknownConsumer::new_err(format!("consumer {shown} is not registered"))
}

pub(super) fn check_slots(slots: &[i64]) -> PyResult<()> {
    if slots.iter().all(|&s| (1..=65535).contains(&s)) {
        Ok(())
    } else {
        Err(InvalidArgument::new_err(
            "slots must be in 1..=65535 (sticky-key hash slots)".to_owned(),
        ))
    }
}

/// `(ledgers, entries)` of an `(n, 2)` int64 array or a sequence of `(ledger, entry)` rows.
pub(super) fn pairs(obj: &Bound<'_, PyAny>) -> PyResult<(Vec<i64>, Vec<i64>)> {
    if let Ok(arr) = obj.extract::<PyReadonlyArray2<'_, i64>>() {
        let view = arr.as_array();
        if view.ncols() == 2 {
            let ls = view.column(0).to_vec();
            let es = view.column(1).to_vec();
            return Ok((ls, es));
        }
        if view.nrows() == 0 {
            return Ok((Vec::new(), Vec::new()));
        }
    }
    let mut ls = Vec::new();
    let mut es = Vec::new();
    for row in obj.try_iter()? {
        let (l, e): (i64, i64) = row?.extract()?;
        ls.push(l);
        es.push(e);
    }
    Ok((ls, es))
}

/// A tracker's `add_many` mask as booleans (numpy bool array or any sequence of truths).
pub(super) fn bools(obj: &Bound<'_, PyAny>, n: usize) -> PyResult<Vec<bool>> {
    let out: Vec<bool> = match obj.cast::<PyArray1<bool>>() {
        Ok(arr) => match arr.to_vec() {
            Ok(v) => v,
            Err(_) => arr.readonly().as_array().to_vec(), // not contiguous
        },
        Err(_) => obj
            .try_iter()?
            .map(|v| v.and_then(|v| v.is_truthy()))
            .collect::<PyResult<_>>()?,
    };
    if out.len() != n {
        return Err(InvalidArgument::new_err(format!(
            "the tracker's add_many returned {} flags for {n} messages",
            out.len()
        )));
    }
    Ok(out)
}

pub(super) fn mode_of(mode: Option<&Bound<'_, PyAny>>) -> PyResult<DispatchMode> {
    let Some(mode) = mode.filter(|m| !m.is_none()) else {
        return Ok(DispatchMode::Draining);
    };
    let text = str_arg(mode, "mode").ok();
    match text.as_deref() {
        Some("draining") => Ok(DispatchMode::Draining),
        Some("last-sent") => Ok(DispatchMode::LastSent),
        Some("out-of-order") => Ok(DispatchMode::OutOfOrder),
        _ => Err(InvalidArgument::new_err(format!(
            "mode must be one of draining, last-sent, out-of-order, got {}",
            mode.repr()
                .map_or_else(|_| "?".to_owned(), |r| r.to_string())
        ))),
    }
}

pub(super) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

pub(super) fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map_or_else(|_| "?".to_owned(), |n| n.to_string())
}

/// A non-negative count argument (`InvalidInputType` for a non-int, `InvalidArgument` below 0).
pub(super) fn count_arg(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<u64> {
    if !obj.is_instance_of::<PyInt>() || obj.is_instance_of::<PyBool>() {
        return Err(InvalidInputType::new_err(format!(
            "{what} must be an int, got {}",
            type_name(obj)
        )));
    }
    let v = int_arg(obj, what)?;
    u64::try_from(v).map_err(|_| InvalidArgument::new_err(format!("{what} must be >= 0, got {v}")))
}
