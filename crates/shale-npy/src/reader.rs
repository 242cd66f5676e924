//! Rows of a `.npy` file, in row order: streamed a row at a time from a C-order file, or
//! gathered from a Fortran-order one read whole (each row takes one element from every
//! column).

use std::io::Read;
use std::path::Path;

use crate::error::NpyError;
use crate::format::{read_header, Dtype, Header};

/// A type rows are read as, and the dtypes that are read as it.
pub trait Element: Copy + sealed::Sealed {
    /// What an error about another dtype says is needed.
    const WANT: &'static str;

    /// Whether elements of `dtype` are read as this type.
    fn accepts(dtype: Dtype) -> bool;

    /// The elements of `raw` (in `dtype`'s width and byte order), appended to `out`.
    fn decode(raw: &[u8], dtype: Dtype, big_endian: bool, out: &mut Vec<Self>);
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for u32 {}
}

/// `float32`, and `float64` rounded to the nearest `f32` (one out of `f32`'s range becomes
/// an infinity, which a vector index refuses by row).
impl Element for f32 {
    const WANT: &'static str = "vectors must be float32 or float64 ('<f4', '<f8')";

    fn accepts(dtype: Dtype) -> bool {
        matches!(dtype, Dtype::F32 | Dtype::F64)
    }

    fn decode(raw: &[u8], dtype: Dtype, big: bool, out: &mut Vec<f32>) {
        match dtype {
            Dtype::F64 => out.extend(
                raw.chunks_exact(8)
                    .filter_map(|c| <[u8; 8]>::try_from(c).ok())
                    .map(|b| {
                        if big {
                            f64::from_be_bytes(b)
                        } else {
                            f64::from_le_bytes(b)
                        }
                    })
                    .map(|x| x as f32),
            ),
            // `U32` is never accepted as `f32`; its width is the same as `F32`'s.
            Dtype::F32 | Dtype::U32 => out.extend(
                raw.chunks_exact(4)
                    .filter_map(|c| <[u8; 4]>::try_from(c).ok())
                    .map(|b| {
                        if big {
                            f32::from_be_bytes(b)
                        } else {
                            f32::from_le_bytes(b)
                        }
                    }),
            ),
        }
    }
}

/// `uint32`: labels, such as the ids of each query's true neighbours.
impl Element for u32 {
    const WANT: &'static str = "labels must be uint32 ('<u4')";

    fn accepts(dtype: Dtype) -> bool {
        dtype == Dtype::U32
    }

    fn decode(raw: &[u8], _dtype: Dtype, big: bool, out: &mut Vec<u32>) {
        out.extend(
            raw.chunks_exact(4)
                .filter_map(|c| <[u8; 4]>::try_from(c).ok())
                .map(|b| {
                    if big {
                        u32::from_be_bytes(b)
                    } else {
                        u32::from_le_bytes(b)
                    }
                }),
        );
    }
}

/// Rows of a `.npy` file, in order, as `T`.
pub struct NpyReader<T: Element = f32> {
    header: Header,
    source: Source<T>,
    /// Rows handed out so far.
    next: usize,
    /// One row's bytes (C order).
    raw: Vec<u8>,
}

enum Source<T> {
    /// C order: the remaining data, read a row at a time.
    Rows(Box<dyn Read>),
    /// Fortran order: the whole array, column-major, decoded.
    Columns(Vec<T>),
}

impl<T: Element> NpyReader<T> {
    /// Read the header from `input`, whose total length is `len` if known (a file's: the
    /// data's length is then checked now, before any row is read; without it, a short file
    /// is found at its end).
    ///
    /// # Errors
    /// Any [`NpyError`]; a dtype not read as `T` is a `Dtype` error, a 3-D (or 0-D) array
    /// a `Shape` error.
    pub fn new(mut input: Box<dyn Read>, len: Option<u64>) -> Result<NpyReader<T>, NpyError> {
        let (header, start) = read_header(&mut input, T::accepts, T::WANT)?;
        let data = header.data_bytes()?;
        if let Some(len) = len {
            let have = len.saturating_sub(start);
            if have != data as u64 {
                return Err(NpyError::Size {
                    want: data as u64,
                    have,
                });
            }
        }
        let source = if header.fortran_order && header.rows > 1 && header.cols > 1 {
            let mut raw = Vec::new();
            input.take(data as u64).read_to_end(&mut raw)?;
            if raw.len() != data {
                return Err(NpyError::Size {
                    want: data as u64,
                    have: raw.len() as u64,
                });
            }
            let mut columns = Vec::with_capacity(header.rows * header.cols);
            T::decode(&raw, header.dtype, header.big_endian, &mut columns);
            Source::Columns(columns)
        } else {
            // A single row or a single column is laid out the same in both orders.
            Source::Rows(input)
        };
        Ok(NpyReader {
            header,
            source,
            next: 0,
            raw: Vec::new(),
        })
    }

    /// Open the file at `path`.
    ///
    /// # Errors
    /// As [`NpyReader::new`]; `Io` if the file cannot be opened.
    pub fn open(path: &Path) -> Result<NpyReader<T>, NpyError> {
        let file = std::fs::File::open(path).map_err(NpyError::Io)?;
        let len = file.metadata().map_err(NpyError::Io)?.len();
        NpyReader::new(
            Box::new(std::io::BufReader::with_capacity(1 << 20, file)),
            Some(len),
        )
    }

    pub fn header(&self) -> &Header {
        &self.header
    }

    /// The next row into `row` (replacing its contents); `false` after the last.
    ///
    /// # Errors
    /// `Io`, or `Size` if the data ends early (only possible when the length was unknown).
    pub fn next_row(&mut self, row: &mut Vec<T>) -> Result<bool, NpyError> {
        if self.next >= self.header.rows {
            return Ok(false);
        }
        let (rows, cols) = (self.header.rows, self.header.cols);
        row.clear();
        match &mut self.source {
            Source::Rows(input) => {
                self.raw.resize(cols * self.header.dtype.bytes(), 0);
                if let Err(e) = input.read_exact(&mut self.raw) {
                    return Err(match e.kind() {
                        // Whole rows were there; the one being read was not.
                        std::io::ErrorKind::UnexpectedEof => NpyError::Size {
                            want: self.header.data_bytes()? as u64,
                            have: (self.next * self.raw.len()) as u64,
                        },
                        _ => NpyError::Io(e),
                    });
                }
                T::decode(&self.raw, self.header.dtype, self.header.big_endian, row);
            }
            Source::Columns(data) => {
                // Element (r, c) of a column-major array is at c * rows + r.
                let r = self.next;
                row.extend((0..cols).filter_map(|c| data.get(c * rows + r).copied()));
            }
        }
        self.next += 1;
        Ok(true)
    }

    /// Every remaining row, as one array.
    ///
    /// # Errors
    /// As [`NpyReader::next_row`].
    pub fn read_all(mut self) -> Result<Array<T>, NpyError> {
        let (rows, cols) = (self.header.rows, self.header.cols);
        let mut data = Vec::with_capacity(rows.saturating_sub(self.next) * cols);
        let mut row = Vec::with_capacity(cols);
        while self.next_row(&mut row)? {
            data.extend_from_slice(&row);
        }
        Ok(Array { rows, cols, data })
    }
}

/// The whole file at `path` as one array of rows.
///
/// # Errors
/// As [`NpyReader::open`] and [`NpyReader::next_row`].
pub fn read<T: Element>(path: &Path) -> Result<Array<T>, NpyError> {
    NpyReader::open(path)?.read_all()
}

/// A 2-D array in row order: `rows * cols` elements.
#[derive(Debug, Clone, PartialEq)]
pub struct Array<T> {
    pub rows: usize,
    pub cols: usize,
    pub data: Vec<T>,
}

impl<T> Array<T> {
    /// Row `i`.
    ///
    /// # Panics
    /// If `i >= self.rows`, as slice indexing does.
    pub fn row(&self, i: usize) -> &[T] {
        &self.data[i * self.cols..(i + 1) * self.cols]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::encode_header_raw;

    /// A `.npy` file as NumPy writes it: the header, then `data`.
    fn npy(descr: &str, fortran: bool, shape: &[u64], data: &[u8]) -> Vec<u8> {
        let mut out = encode_header_raw(descr, fortran, shape);
        out.extend_from_slice(data);
        out
    }

    fn reader<T: Element>(bytes: Vec<u8>, known_len: bool) -> Result<NpyReader<T>, NpyError> {
        let len = known_len.then_some(bytes.len() as u64);
        NpyReader::new(Box::new(std::io::Cursor::new(bytes)), len)
    }

    fn rows<T: Element>(mut r: NpyReader<T>) -> Vec<Vec<T>> {
        let mut out = Vec::new();
        let mut row = Vec::new();
        while r.next_row(&mut row).unwrap() {
            out.push(row.clone());
        }
        out
    }

    fn le32(xs: &[f32]) -> Vec<u8> {
        xs.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    #[test]
    fn c_order_float32_rows() {
        let bytes = npy("<f4", false, &[2, 3], &le32(&[1., 2., 3., 4., 5., 6.]));
        let r = reader::<f32>(bytes, true).unwrap();
        assert_eq!((r.header().rows, r.header().cols), (2, 3));
        assert_eq!(rows(r), [[1., 2., 3.], [4., 5., 6.]]);
    }

    #[test]
    fn fortran_order_float64_is_transposed_to_rows() {
        // np.asfortranarray([[1, 2, 3], [4, 5, 6]], dtype='<f8'): column by column.
        let data: Vec<u8> = [1f64, 4., 2., 5., 3., 6.]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect();
        let r = reader::<f32>(npy("<f8", true, &[2, 3], &data), true).unwrap();
        assert_eq!(r.header().dtype, Dtype::F64);
        assert_eq!(rows(r), [[1., 2., 3.], [4., 5., 6.]]);
    }

    #[test]
    fn fortran_order_uint32_labels_read_whole() {
        // np.asfortranarray([[1, 2], [3, 4], [5, 6]], dtype='<u4').
        let data: Vec<u8> = [1u32, 3, 5, 2, 4, 6]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect();
        let a = reader::<u32>(npy("<u4", true, &[3, 2], &data), true)
            .unwrap()
            .read_all()
            .unwrap();
        assert_eq!((a.rows, a.cols), (3, 2));
        assert_eq!(a.data, [1, 2, 3, 4, 5, 6]);
        assert_eq!(a.row(2), [5, 6]);
        let big: Vec<u8> = [7u32, 8].iter().flat_map(|x| x.to_be_bytes()).collect();
        assert_eq!(
            rows(reader::<u32>(npy(">u4", false, &[1, 2], &big), true).unwrap()),
            [[7, 8]]
        );
    }

    #[test]
    fn element_type_is_checked() {
        let labels = npy("<u4", false, &[1, 2], &[0; 8]);
        let e = reader::<f32>(labels, true).err().unwrap();
        assert_eq!(
            e.to_string(),
            "dtype '<u4' is not supported: vectors must be float32 or float64 ('<f4', '<f8')"
        );
        let floats = npy("<f4", false, &[1, 2], &[0; 8]);
        let e = reader::<u32>(floats, true).err().unwrap();
        assert!(matches!(e, NpyError::Dtype { .. }), "{e}");
    }

    #[test]
    fn big_endian_and_one_dimensional() {
        let data: Vec<u8> = [0.5f32, -2.0]
            .iter()
            .flat_map(|x| x.to_be_bytes())
            .collect();
        let r = reader::<f32>(npy(">f4", false, &[2], &data), true).unwrap();
        assert_eq!((r.header().rows, r.header().cols), (1, 2));
        assert_eq!(rows(r), [[0.5, -2.0]]);
    }

    #[test]
    fn version_2_header() {
        let mut bytes = npy("<f4", false, &[1, 1], &le32(&[7.0]));
        // Rewrite as version 2.0: a 4-byte header length.
        let len = u16::from_le_bytes([bytes[8], bytes[9]]);
        bytes[6] = 2;
        bytes.splice(8..10, u32::from(len).to_le_bytes());
        assert_eq!(rows(reader::<f32>(bytes, true).unwrap()), [[7.0]]);
    }

    #[test]
    fn damaged_files_are_errors() {
        let good = npy("<f4", false, &[2, 2], &le32(&[1., 2., 3., 4.]));
        let short = good[..good.len() - 1].to_vec();
        assert!(matches!(
            reader::<f32>(short.clone(), true),
            Err(NpyError::Size { want: 16, have: 15 })
        ));
        // Without the length, the short row is found when it is read.
        let mut r = reader::<f32>(short, false).unwrap();
        let mut row = Vec::new();
        assert!(r.next_row(&mut row).unwrap());
        assert!(matches!(r.next_row(&mut row), Err(NpyError::Size { .. })));
        let mut long = good.clone();
        long.push(0);
        assert!(matches!(
            reader::<f32>(long, true),
            Err(NpyError::Size { .. })
        ));
        assert!(matches!(
            reader::<f32>(b"PK\x03\x04 a zip".to_vec(), true),
            Err(NpyError::NotNpy)
        ));
        assert!(matches!(
            reader::<f32>(b"\x93NU".to_vec(), true),
            Err(NpyError::NotNpy)
        ));
        assert!(matches!(
            reader::<f32>(good[..20].to_vec(), true),
            Err(NpyError::Header(_))
        ));
        let mut v9 = good.clone();
        v9[6] = 9;
        assert!(matches!(
            reader::<f32>(v9, true),
            Err(NpyError::Version(9, 0))
        ));
        let ints = npy("<i4", false, &[2, 2], &[0; 16]);
        let e = reader::<f32>(ints, true).err().unwrap();
        assert!(e.to_string().contains("'<i4'"), "{e}");
        let cube = npy("<f4", false, &[1, 2, 2], &le32(&[1., 2., 3., 4.]));
        let e = reader::<f32>(cube, true).err().unwrap();
        assert!(e.to_string().contains("(1, 2, 2)"), "{e}");
        let huge = npy("<f8", false, &[u64::MAX, 4], &[]);
        assert!(matches!(
            reader::<f32>(huge, true),
            Err(NpyError::Shape { .. })
        ));
        let mut garbled = good.clone();
        garbled[11] = b'[';
        assert!(matches!(
            reader::<f32>(garbled, true),
            Err(NpyError::Header(_))
        ));
    }

    #[test]
    fn every_flipped_header_byte_is_an_error_or_a_valid_header() {
        let good = npy("<f4", true, &[2, 2], &le32(&[1., 3., 2., 4.]));
        let header_end = good.len() - 16;
        for i in 0..header_end {
            for bit in 0..8 {
                let mut bytes = good.clone();
                bytes[i] ^= 1 << bit;
                // Either refused, or a header that still fits the 16 data bytes.
                if let Ok(r) = reader::<f32>(bytes, true) {
                    let a = r.read_all().unwrap();
                    assert_eq!(a.data.len(), a.rows * a.cols);
                }
            }
        }
    }
}
