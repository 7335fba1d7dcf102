//! Reading a `Position` list (or two short int64 columns) into ledger and entry ids, on the
//! stack when few: the input of every ack, nack and read given as objects.

use super::*;
use crate::errors::InvalidInputType;

/// `Position`'s type object, as an address.
#[inline]
pub(super) fn position_type(py: Python<'_>) -> usize {
    *POSITION_TYPE.get_or_init(py, || py.get_type::<PyPosition>().as_type_ptr() as usize)
}

pub(super) fn position_of(obj: &Bound<'_, PyAny>) -> PyResult<Position> {
    position_of_type(obj, position_type(obj.py()))
}

/// [`position_of`] with `Position`'s type address at hand (a list reader looks it up once).
#[inline(always)]
pub(super) fn position_of_type(obj: &Bound<'_, PyAny>, exact: usize) -> PyResult<Position> {
    // A `Position` (the per-event case) is one type compare; anything else takes the checked cast
    // (which refuses it with a typed error).
    // SAFETY: a type compare against `Position`'s own type object: the cast below is to it.
    if unsafe { pyo3::ffi::Py_TYPE(obj.as_ptr()) } as usize == exact {
        // SAFETY: the object's type is exactly `PyPosition` (checked above).
        return Ok(unsafe { obj.cast_unchecked::<PyPosition>() }.get().0);
    }
    match obj.cast::<PyPosition>() {
        Ok(p) => Ok(p.get().0),
        Err(_) => Err(InvalidInputType::new_err(format!(
            "positions must be Position objects, got {}",
            type_name(obj)
        ))),
    }
}

/// `Position`'s type object, as an address (compared, never dereferenced here).
pub(super) static POSITION_TYPE: PyOnceLock<usize> = PyOnceLock::new();

/// Ledger and entry ids of a sequence of `Position`s, on the stack when few.
pub(crate) struct Ids {
    n: usize,
    inline_ls: [i64; INLINE],
    inline_es: [i64; INLINE],
    heap: Option<(Vec<i64>, Vec<i64>)>,
}

impl Ids {
    pub(crate) fn empty() -> Self {
        Ids {
            n: 0,
            inline_ls: [0; INLINE],
            inline_es: [0; INLINE],
            heap: None,
        }
    }

    /// Fills an empty `Ids` (the caller's, in its own frame: a few hundred bytes are not moved
    /// per call) with the ids of a sequence of `Position`s.
    pub(crate) fn read(&mut self, positions: &Bound<'_, PyAny>) -> PyResult<()> {
        if let Ok(list) = positions.cast::<PyList>() {
            return self.read_list(list);
        }
        let ids = self;
        if let Ok(tuple) = positions.cast::<PyTuple>() {
            for item in tuple.iter() {
                ids.push(position_of(&item)?);
            }
        } else {
            for item in positions.try_iter().map_err(|_| {
                InvalidInputType::new_err(format!(
                    "positions must be a sequence of Position, got {}",
                    type_name(positions)
                ))
            })? {
                ids.push(position_of(&item?)?);
            }
        }
        Ok(())
    }

    /// A list of `Position`s, read by index and borrowed (no reference count taken and dropped
    /// per item), straight into place: nothing between the reads can change the list
    /// (`position_of` runs no Python code, and the GIL is held throughout).
    pub(super) fn read_list(&mut self, list: &Bound<'_, PyList>) -> PyResult<()> {
        let py = list.py();
        let exact = position_type(py);
        let n = list.len();
        let at = |i: usize| -> PyResult<Position> {
            // SAFETY: `i` < the list's length, read before the reads and unchanged since, so
            // `PyList_GetItem` returns a non-null borrowed reference the list keeps alive.
            let item = unsafe {
                Borrowed::from_ptr(py, pyo3::ffi::PyList_GetItem(list.as_ptr(), i as isize))
            };
            position_of_type(&item, exact)
        };
        let ids = self;
        if n > INLINE {
            ids.heap = Some((vec![0; n], vec![0; n]));
        }
        let (ls, es) = match &mut ids.heap {
            Some((ls, es)) => (ls.as_mut_slice(), es.as_mut_slice()),
            None => (&mut ids.inline_ls[..], &mut ids.inline_es[..]),
        };
        for (i, (l, e)) in ls.iter_mut().zip(es.iter_mut()).take(n).enumerate() {
            let p = at(i)?;
            *l = p.ledger_id;
            *e = p.entry_id;
        }
        ids.n = n;
        Ok(())
    }

    /// Two contiguous int64 numpy arrays of equal length up to [`INLINE`], copied into this empty
    /// `Ids` (false, nothing read, for anything else: the general column reader takes it).
    pub(super) fn read_short_arrays(
        &mut self,
        ledgers: &Bound<'_, PyAny>,
        entries: &Bound<'_, PyAny>,
    ) -> bool {
        // SAFETY: read and copied at once with the GIL held and no Python code run in between,
        // so nothing can write the arrays while they are read (a borrow's bookkeeping would cost
        // more than the copy).
        let Some((l, e)) = (unsafe { plain_i64(ledgers).zip(plain_i64(entries)) }) else {
            return false;
        };
        if l.len() != e.len() || l.len() > INLINE {
            return false;
        }
        self.n = l.len();
        for ((to_l, to_e), (&from_l, &from_e)) in self
            .inline_ls
            .iter_mut()
            .zip(self.inline_es.iter_mut())
            .zip(l.iter().zip(e))
        {
            *to_l = from_l;
            *to_e = from_e;
        }
        true
    }

    #[inline]
    pub(super) fn push(&mut self, p: Position) {
        match (
            &mut self.heap,
            self.inline_ls.get_mut(self.n),
            self.inline_es.get_mut(self.n),
        ) {
            (None, Some(l), Some(e)) => {
                *l = p.ledger_id;
                *e = p.entry_id;
            }
            (None, _, _) => {
                let mut ls = self.inline_ls.to_vec();
                let mut es = self.inline_es.to_vec();
                ls.push(p.ledger_id);
                es.push(p.entry_id);
                self.heap = Some((ls, es));
            }
            (Some((ls, es)), _, _) => {
                ls.push(p.ledger_id);
                es.push(p.entry_id);
            }
        }
        self.n += 1;
    }

    pub(crate) fn slices(&self) -> (&[i64], &[i64]) {
        match &self.heap {
            Some((ls, es)) => (ls, es),
            None => (
                self.inline_ls.get(..self.n).unwrap_or(&[]),
                self.inline_es.get(..self.n).unwrap_or(&[]),
            ),
        }
    }
}
