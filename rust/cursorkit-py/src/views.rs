//! Int64 columns out, many at once: one numpy buffer per call and a view of it per column.
//!
//! A dispatch hands each consumer two short columns (often one or two positions). A numpy array
//! of its own costs an allocation through numpy's memory handler each; a view of a buffer filled
//! once costs only the array object, so a dispatch to 100 consumers allocates its data once.

use std::os::raw::c_int;
use std::ptr;

use numpy::npyffi::{
    get_type_object, npy_intp, NpyTypes, PyArrayObject, NPY_ARRAY_WRITEABLE, PY_ARRAY_API,
};
use numpy::{Element, PyArray1, PyArrayDescrMethods, PyArrayMethods};
use pyo3::prelude::*;

/// Arrays of `data`'s ranges (`start..end` each, in order), each a writeable view of one buffer
/// that they share: ranges that do not overlap can be written independently. A range out of
/// bounds is an error.
pub(crate) fn views<'py>(
    py: Python<'py>,
    data: Vec<i64>,
    ranges: &[(usize, usize)],
) -> PyResult<Vec<Bound<'py, PyArray1<i64>>>> {
    let len = data.len();
    let owner = PyArray1::from_vec(py, data);
    let base = owner.data();
    let mut out = Vec::with_capacity(ranges.len());
    for &(start, end) in ranges {
        if start > end || end > len {
            return Err(pyo3::exceptions::PyIndexError::new_err(format!(
                "range {start}..{end} outside a column of {len}"
            )));
        }
        // SAFETY: `start..end` lies inside `owner`'s buffer (checked above), and each view holds
        // a reference to `owner`.
        out.push(unsafe { view(&owner, base.add(start), end - start)? });
    }
    Ok(out)
}

/// A one-dimensional view of `len` values at `data`, keeping `owner` alive.
///
/// # Safety
/// `data..data + len` must lie inside `owner`'s buffer.
unsafe fn view<'py>(
    owner: &Bound<'py, PyArray1<i64>>,
    data: *mut i64,
    len: usize,
) -> PyResult<Bound<'py, PyArray1<i64>>> {
    let py = owner.py();
    let mut dims = [len as npy_intp];
    // SAFETY: numpy's C API with its documented ownership: the descriptor reference is stolen by
    // `PyArray_NewFromDescr`, the base reference by `PyArray_SetBaseObject` (also on failure).
    unsafe {
        let array = PY_ARRAY_API.PyArray_NewFromDescr(
            py,
            get_type_object(py, NpyTypes::PyArray_Type),
            i64::get_dtype(py).into_dtype_ptr(),
            1,
            dims.as_mut_ptr(),
            ptr::null_mut(),
            data.cast(),
            NPY_ARRAY_WRITEABLE as c_int,
            ptr::null_mut(),
        );
        let array = Bound::from_owned_ptr_or_err(py, array)?;
        if PY_ARRAY_API.PyArray_SetBaseObject(
            py,
            array.as_ptr().cast::<PyArrayObject>(),
            owner.clone().into_any().into_ptr(),
        ) != 0
        {
            return Err(PyErr::fetch(py));
        }
        Ok(array.cast_into_unchecked())
    }
}
