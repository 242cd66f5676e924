//! numpy arrays in and out: vectors and matrices of `float32`.
//!
//! Any array-like of numbers is accepted (a numpy array of any float or int type, nested
//! lists); it is converted to `float32` once, by numpy, and read through a read-only
//! view, which is the caller's own array when that already is `float32`. A matrix is read
//! in C order: [`rows`] gives a view of it when it already is C-contiguous, else one copy.

use numpy::ndarray::{ArrayView2, CowArray, Ix2};
use numpy::{AllowTypeChange, PyArrayLike1, PyArrayLike2};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;

/// A matrix argument of any numeric array-like, as `float32`.
pub(crate) type Matrix<'py> = PyArrayLike2<'py, f32, AllowTypeChange>;

/// `obj` as a matrix (`TypeError` if numpy cannot make a 2-d float array of it).
pub(crate) fn matrix<'py>(obj: &Bound<'py, PyAny>, what: &str) -> PyResult<Matrix<'py>> {
    obj.extract().map_err(|e: PyErr| {
        PyTypeError::new_err(format!(
            "{what} must be a 2-d array of numbers (n, dim): {}",
            e.value(obj.py())
        ))
    })
}

/// `obj` as one vector, copied (`TypeError` if it is not a 1-d array of numbers).
pub(crate) fn vector(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<f32>> {
    let array: PyArrayLike1<'_, f32, AllowTypeChange> = obj.extract().map_err(|e: PyErr| {
        PyTypeError::new_err(format!(
            "{what} must be a 1-d array of numbers: {}",
            e.value(obj.py())
        ))
    })?;
    Ok(array.as_array().to_vec())
}

/// The matrix in C order: a view of `view` when it is C-contiguous, else a copy.
pub(crate) fn c_order<'a>(view: ArrayView2<'a, f32>) -> CowArray<'a, f32, Ix2> {
    if view.is_standard_layout() {
        CowArray::from(view)
    } else {
        CowArray::from(view.as_standard_layout().into_owned())
    }
}

/// The rows of a matrix that [`c_order`] made, each `dim` wide (the caller checked the
/// shape).
pub(crate) fn rows<'a>(matrix: &'a CowArray<'_, f32, Ix2>, dim: usize) -> PyResult<Vec<&'a [f32]>> {
    let flat = matrix.as_slice().ok_or_else(|| {
        pyo3::exceptions::PyRuntimeError::new_err("internal error: a matrix is not in C order")
    })?;
    Ok(flat.chunks_exact(dim.max(1)).collect())
}
