//! Writing `.npy` files of `float32` rows, as NumPy's `np.save` does: a version 1.0 header
//! padded to 64 bytes, then the data in C order, little-endian.

use std::io::Write;
use std::path::Path;

use crate::error::NpyError;
use crate::format::{encode_header, Dtype};

/// Write `data` (`rows` rows of `cols`, row after row) to `out` as a C-order `<f4` array.
///
/// # Errors
/// `Size` if `data` is not `rows * cols` long (nothing is written then); `Io` if writing
/// fails.
pub fn write_f32(
    out: &mut dyn Write,
    rows: usize,
    cols: usize,
    data: &[f32],
) -> Result<(), NpyError> {
    let want = rows.checked_mul(cols).and_then(|n| n.checked_mul(4));
    let have = data.len().saturating_mul(4);
    if want != Some(have) {
        return Err(NpyError::Size {
            want: want.map_or(u64::MAX, |n| n as u64),
            have: have as u64,
        });
    }
    out.write_all(&encode_header(
        Dtype::F32,
        false,
        &[rows as u64, cols as u64],
    ))
    .map_err(NpyError::Io)?;
    let mut bytes = Vec::with_capacity(have);
    for x in data {
        bytes.extend_from_slice(&x.to_le_bytes());
    }
    out.write_all(&bytes).map_err(NpyError::Io)?;
    Ok(())
}

/// [`write_f32`] to a new file at `path` (replacing one that is there).
///
/// # Errors
/// As [`write_f32`]; `Io` if the file cannot be created.
pub fn write_f32_file(path: &Path, rows: usize, cols: usize, data: &[f32]) -> Result<(), NpyError> {
    let mut file = std::io::BufWriter::new(std::fs::File::create(path).map_err(NpyError::Io)?);
    write_f32(&mut file, rows, cols, data)?;
    file.flush().map_err(NpyError::Io)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reader::NpyReader;

    #[test]
    fn written_rows_read_back() {
        let data = [1.0f32, -2.5, 3.0, 4.0, f32::MAX, 6.0];
        let mut bytes = Vec::new();
        write_f32(&mut bytes, 3, 2, &data).unwrap();
        assert_eq!((bytes.len() - data.len() * 4) % 64, 0, "header is padded");
        let len = bytes.len() as u64;
        let r = NpyReader::<f32>::new(Box::new(std::io::Cursor::new(bytes)), Some(len)).unwrap();
        assert!(!r.header().fortran_order);
        let a = r.read_all().unwrap();
        assert_eq!((a.rows, a.cols), (3, 2));
        assert_eq!(a.data, data);
        assert!(
            NpyReader::<u32>::new(Box::new(std::io::Cursor::new(Vec::new())), None).is_err(),
            "an empty input is not a file"
        );
    }

    #[test]
    fn file_round_trip() {
        let path = std::env::temp_dir().join(format!("shale-npy-{}.npy", std::process::id()));
        write_f32_file(&path, 1, 3, &[0.25, 0.5, 0.75]).unwrap();
        let a = crate::read::<f32>(&path);
        std::fs::remove_file(&path).unwrap();
        assert_eq!(a.unwrap().data, [0.25, 0.5, 0.75]);
    }

    #[test]
    fn data_of_another_length_is_refused() {
        let mut bytes = Vec::new();
        assert!(matches!(
            write_f32(&mut bytes, 2, 2, &[1.0; 3]),
            Err(NpyError::Size { want: 16, have: 12 })
        ));
        assert!(bytes.is_empty());
    }
}
