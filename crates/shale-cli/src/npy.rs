//! Reading NumPy `.npy` files of vectors: `import --format npy` and `search --vector-file`.
//!
//! ```text
//!   npy := "\x93NUMPY" major:u8 minor:u8 header_len:(u16 if major = 1 else u32)
//!          header:(Python dict literal, header_len bytes) data
//!   header: {'descr': '<f4', 'fortran_order': False, 'shape': (rows, cols), }
//! ```
//!
//! What is read: arrays of `float32` or `float64` (`descr` `<f4`, `<f8`, or big-endian
//! `>f4`, `>f8`), in C (row-major) or Fortran (column-major) order, of shape `(rows, cols)`
//! (one vector per row) or `(cols,)` (one vector). Rows always come out as `f32` in row
//! order. A C-order file is streamed a row at a time; a Fortran-order file is read whole,
//! since each row gathers one element from every column.
//!
//! Every length comes from the header and is checked against the bytes there are before
//! anything is read: a truncated or padded file, another dtype or shape is a [`NpyError`],
//! never a panic or a huge allocation.
//!
//! (`shale-bench` has a reader of its own for its data sets, which also reads `uint32`
//! labels and writes files; one shared copy is a follow-up.)

use std::fmt;
use std::io::Read;

/// The magic bytes every `.npy` file starts with.
const MAGIC: &[u8; 6] = b"\x93NUMPY";

/// The longest header accepted (NumPy writes a few hundred bytes at most); a longer one is
/// damage, not something to allocate for.
const MAX_HEADER_BYTES: usize = 1 << 20;

/// What is wrong with a `.npy` file.
#[derive(Debug)]
pub enum NpyError {
    /// Reading the file failed.
    Io(std::io::Error),
    /// It does not start with the `.npy` magic bytes.
    NotNpy,
    /// A format version other than 1.0, 2.0 or 3.0.
    Version(u8, u8),
    /// The header ends early, is too long, or is not the dict NumPy writes.
    Header(String),
    /// An element type other than float32 or float64 (its `descr`).
    Dtype(String),
    /// An array of a shape that is not wanted here.
    Shape { shape: Vec<u64>, need: &'static str },
    /// The data is not as long as the shape says.
    Size { want: u64, have: u64 },
}

impl fmt::Display for NpyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NpyError::Io(e) => write!(f, "{e}"),
            NpyError::NotNpy => write!(f, "not a .npy file (no \\x93NUMPY magic)"),
            NpyError::Version(major, minor) => {
                write!(
                    f,
                    ".npy format version {major}.{minor} is not supported (1.0 to 3.0)"
                )
            }
            NpyError::Header(why) => write!(f, "bad .npy header: {why}"),
            NpyError::Dtype(descr) => write!(
                f,
                "dtype {descr} is not supported: vectors must be float32 or float64 ('<f4', '<f8')"
            ),
            NpyError::Shape { shape, need } => {
                write!(f, "an array of shape {}; need {need}", shape_text(shape))
            }
            NpyError::Size { want, have } => write!(
                f,
                "the data is {have} bytes, but the header's shape and dtype need {want}"
            ),
        }
    }
}

impl std::error::Error for NpyError {}

impl From<std::io::Error> for NpyError {
    fn from(e: std::io::Error) -> Self {
        match e.kind() {
            // read_exact's "failed to fill whole buffer": the file ends inside the header.
            std::io::ErrorKind::UnexpectedEof => NpyError::Header("the file ends early".into()),
            _ => NpyError::Io(e),
        }
    }
}

/// A shape as Python prints it: `(3, 4)`, `(4,)`.
fn shape_text(shape: &[u64]) -> String {
    match shape {
        [one] => format!("({one},)"),
        _ => {
            let dims: Vec<String> = shape.iter().map(u64::to_string).collect();
            format!("({})", dims.join(", "))
        }
    }
}

/// An element type the reader accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dtype {
    F32,
    F64,
}

impl Dtype {
    fn bytes(self) -> usize {
        match self {
            Dtype::F32 => 4,
            Dtype::F64 => 8,
        }
    }
}

/// What the header says about the array.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    pub dtype: Dtype,
    pub big_endian: bool,
    pub fortran_order: bool,
    /// The shape as written: one or two dimensions.
    pub shape: Vec<u64>,
    /// Vectors in the file (1 for a 1-D array).
    pub rows: usize,
    /// Dimensions of each vector.
    pub cols: usize,
}

impl Header {
    /// Bytes of data the shape and dtype call for.
    fn data_bytes(&self) -> Result<usize, NpyError> {
        self.rows
            .checked_mul(self.cols)
            .and_then(|n| n.checked_mul(self.dtype.bytes()))
            .ok_or_else(|| NpyError::Shape {
                shape: self.shape.clone(),
                need: "an array that fits in memory",
            })
    }
}

/// Rows of a `.npy` file, in order, as `f32`.
pub struct NpyReader {
    header: Header,
    source: Source,
    /// Rows handed out so far.
    next: usize,
    /// One row's bytes (C order).
    raw: Vec<u8>,
}

enum Source {
    /// C order: the remaining data, read a row at a time.
    Rows(Box<dyn Read>),
    /// Fortran order: the whole array, column-major, converted to `f32`.
    Columns(Vec<f32>),
}

impl NpyReader {
    /// Read the header from `input`, whose total length is `len` if known (a file's: the
    /// data's length is then checked now, before any row is read; without it, a short file
    /// is found at its end).
    ///
    /// # Errors
    /// Any [`NpyError`]; a 3-D (or 0-D) array is a `Shape` error.
    pub fn new(mut input: Box<dyn Read>, len: Option<u64>) -> Result<NpyReader, NpyError> {
        let mut prefix = [0u8; 8];
        read_exact_or(&mut input, &mut prefix, NpyError::NotNpy)?;
        if prefix.get(..6) != Some(MAGIC.as_slice()) {
            return Err(NpyError::NotNpy);
        }
        let (major, minor) = (prefix[6], prefix[7]);
        let header_len = match (major, minor) {
            (1, 0) => {
                let mut b = [0u8; 2];
                input.read_exact(&mut b)?;
                usize::from(u16::from_le_bytes(b))
            }
            (2 | 3, 0) => {
                let mut b = [0u8; 4];
                input.read_exact(&mut b)?;
                usize::try_from(u32::from_le_bytes(b)).unwrap_or(usize::MAX)
            }
            _ => return Err(NpyError::Version(major, minor)),
        };
        if header_len > MAX_HEADER_BYTES {
            return Err(NpyError::Header(format!(
                "a header of {header_len} bytes (at most {MAX_HEADER_BYTES})"
            )));
        }
        let mut text = vec![0u8; header_len];
        input.read_exact(&mut text)?;
        let text = String::from_utf8(text).map_err(|e| {
            NpyError::Header(format!("not text at byte {}", e.utf8_error().valid_up_to()))
        })?;
        let header = parse_header(&text)?;
        let data = header.data_bytes()?;
        if let Some(len) = len {
            let start = (if major == 1 { 10 } else { 12 }) + header_len as u64;
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
            Source::Columns(decode(&raw, &header))
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
    pub fn open(path: &std::path::Path) -> Result<NpyReader, NpyError> {
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
    pub fn next_row(&mut self, row: &mut Vec<f32>) -> Result<bool, NpyError> {
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
                row.extend(decode(&self.raw, &self.header));
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
}

/// `read_exact`, with `short` as the error if the input ends first.
fn read_exact_or(input: &mut dyn Read, buf: &mut [u8], short: NpyError) -> Result<(), NpyError> {
    match input.read_exact(buf) {
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Err(short),
        other => Ok(other?),
    }
}

/// Elements of `header`'s dtype and byte order, as `f32` (a float64 is rounded; one out of
/// `f32`'s range becomes an infinity, which the index refuses by row).
fn decode(raw: &[u8], header: &Header) -> Vec<f32> {
    let big = header.big_endian;
    match header.dtype {
        Dtype::F32 => raw
            .chunks_exact(4)
            .filter_map(|c| <[u8; 4]>::try_from(c).ok())
            .map(|b| {
                if big {
                    f32::from_be_bytes(b)
                } else {
                    f32::from_le_bytes(b)
                }
            })
            .collect(),
        Dtype::F64 => raw
            .chunks_exact(8)
            .filter_map(|c| <[u8; 8]>::try_from(c).ok())
            .map(|b| {
                if big {
                    f64::from_be_bytes(b)
                } else {
                    f64::from_le_bytes(b)
                }
            })
            .map(|x| x as f32)
            .collect(),
    }
}

/// A value of the header dict.
#[derive(Debug, PartialEq)]
enum Literal {
    Str(String),
    Bool(bool),
    Tuple(Vec<u64>),
    /// Anything else (a structured dtype's list, say): kept as text for the error.
    Other(String),
}

/// Parse the header dict and check it holds what a vector file needs.
fn parse_header(text: &str) -> Result<Header, NpyError> {
    let entries = parse_dict(text).map_err(NpyError::Header)?;
    let get = |name: &str| {
        entries
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v)
            .ok_or_else(|| NpyError::Header(format!("no '{name}' in {}", text.trim_end())))
    };
    let descr = get("descr")?;
    let (dtype, big_endian) = match descr {
        Literal::Str(s) => match s.as_str() {
            "<f4" | "=f4" => (Dtype::F32, false),
            "<f8" | "=f8" => (Dtype::F64, false),
            ">f4" => (Dtype::F32, true),
            ">f8" => (Dtype::F64, true),
            other => return Err(NpyError::Dtype(format!("'{other}'"))),
        },
        Literal::Other(s) => return Err(NpyError::Dtype(s.clone())),
        other => return Err(NpyError::Dtype(format!("{other:?}"))),
    };
    let fortran_order = match get("fortran_order")? {
        Literal::Bool(b) => *b,
        other => return Err(NpyError::Header(format!("fortran_order is {other:?}"))),
    };
    let shape = match get("shape")? {
        Literal::Tuple(dims) => dims.clone(),
        other => return Err(NpyError::Header(format!("shape is {other:?}"))),
    };
    let size = |n: u64| {
        usize::try_from(n).map_err(|_| NpyError::Shape {
            shape: shape.clone(),
            need: "an array that fits in memory",
        })
    };
    let (rows, cols) = match shape.as_slice() {
        [cols] => (1, size(*cols)?),
        [rows, cols] => (size(*rows)?, size(*cols)?),
        _ => {
            return Err(NpyError::Shape {
                shape,
                need: "a 2-D array (one vector per row)",
            })
        }
    };
    Ok(Header {
        dtype,
        big_endian,
        fortran_order,
        shape,
        rows,
        cols,
    })
}

/// The entries of the dict literal NumPy writes: `{'key': value, ...}` with string, bool
/// and integer-tuple values (anything else is kept as [`Literal::Other`]).
fn parse_dict(text: &str) -> Result<Vec<(String, Literal)>, String> {
    let mut p = Parser { rest: text.trim() };
    p.expect('{')?;
    let mut entries = Vec::new();
    loop {
        p.skip_space();
        if p.eat('}') {
            break;
        }
        let key = p.string()?;
        p.expect(':')?;
        let value = p.literal()?;
        entries.push((key, value));
        p.skip_space();
        if !p.eat(',') {
            p.expect('}')?;
            break;
        }
    }
    Ok(entries)
}

struct Parser<'a> {
    rest: &'a str,
}

impl Parser<'_> {
    fn skip_space(&mut self) {
        self.rest = self.rest.trim_start();
    }

    fn eat(&mut self, c: char) -> bool {
        self.skip_space();
        match self.rest.strip_prefix(c) {
            Some(rest) => {
                self.rest = rest;
                true
            }
            None => false,
        }
    }

    fn expect(&mut self, c: char) -> Result<(), String> {
        if self.eat(c) {
            Ok(())
        } else {
            Err(format!("expected '{c}' at {:?}", self.rest))
        }
    }

    fn string(&mut self) -> Result<String, String> {
        self.skip_space();
        let quote = match self.rest.chars().next() {
            Some(q @ ('\'' | '"')) => q,
            _ => return Err(format!("expected a quoted name at {:?}", self.rest)),
        };
        let body = &self.rest[1..];
        let end = body
            .find(quote)
            .ok_or_else(|| format!("unterminated string at {:?}", self.rest))?;
        let s = body[..end].to_owned();
        self.rest = &body[end + 1..];
        Ok(s)
    }

    fn literal(&mut self) -> Result<Literal, String> {
        self.skip_space();
        if self.rest.starts_with(['\'', '"']) {
            return self.string().map(Literal::Str);
        }
        for (word, value) in [("True", true), ("False", false)] {
            if let Some(rest) = self.rest.strip_prefix(word) {
                self.rest = rest;
                return Ok(Literal::Bool(value));
            }
        }
        if self.eat('(') {
            let mut dims = Vec::new();
            loop {
                self.skip_space();
                if self.eat(')') {
                    return Ok(Literal::Tuple(dims));
                }
                let digits = self.rest.len()
                    - self
                        .rest
                        .trim_start_matches(|c: char| c.is_ascii_digit())
                        .len();
                let (number, rest) = self.rest.split_at(digits);
                let n = number
                    .parse::<u64>()
                    .map_err(|_| format!("expected a dimension at {:?}", self.rest))?;
                dims.push(n);
                self.rest = rest;
                self.skip_space();
                if !self.eat(',') {
                    self.expect(')')?;
                    return Ok(Literal::Tuple(dims));
                }
            }
        }
        // Something else (a list, a number): up to the next top-level comma or brace.
        let mut depth = 0i32;
        let end = self
            .rest
            .char_indices()
            .find(|&(_, c)| {
                match c {
                    '[' | '(' | '{' => depth += 1,
                    ']' | ')' => depth -= 1,
                    '}' if depth == 0 => return true,
                    '}' => depth -= 1,
                    ',' if depth == 0 => return true,
                    _ => {}
                }
                false
            })
            .map_or(self.rest.len(), |(i, _)| i);
        let (value, rest) = self.rest.split_at(end);
        self.rest = rest;
        Ok(Literal::Other(value.trim().to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `.npy` file as NumPy writes it (version 1.0, header padded to 64 bytes).
    fn npy(descr: &str, fortran: bool, shape: &str, data: &[u8]) -> Vec<u8> {
        let order = if fortran { "True" } else { "False" };
        let mut header =
            format!("{{'descr': '{descr}', 'fortran_order': {order}, 'shape': {shape}, }}");
        let unpadded = 10 + header.len() + 1;
        header.push_str(&" ".repeat(unpadded.next_multiple_of(64) - unpadded));
        header.push('\n');
        let mut out = b"\x93NUMPY\x01\x00".to_vec();
        out.extend_from_slice(&(header.len() as u16).to_le_bytes());
        out.extend_from_slice(header.as_bytes());
        out.extend_from_slice(data);
        out
    }

    fn reader(bytes: Vec<u8>, known_len: bool) -> Result<NpyReader, NpyError> {
        let len = known_len.then_some(bytes.len() as u64);
        NpyReader::new(Box::new(std::io::Cursor::new(bytes)), len)
    }

    fn rows(mut r: NpyReader) -> Vec<Vec<f32>> {
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
        let bytes = npy("<f4", false, "(2, 3)", &le32(&[1., 2., 3., 4., 5., 6.]));
        let r = reader(bytes, true).unwrap();
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
        let r = reader(npy("<f8", true, "(2, 3)", &data), true).unwrap();
        assert_eq!(r.header().dtype, Dtype::F64);
        assert_eq!(rows(r), [[1., 2., 3.], [4., 5., 6.]]);
    }

    #[test]
    fn big_endian_and_one_dimensional() {
        let data: Vec<u8> = [0.5f32, -2.0]
            .iter()
            .flat_map(|x| x.to_be_bytes())
            .collect();
        let r = reader(npy(">f4", false, "(2,)", &data), true).unwrap();
        assert_eq!((r.header().rows, r.header().cols), (1, 2));
        assert_eq!(rows(r), [[0.5, -2.0]]);
    }

    #[test]
    fn version_2_header() {
        let mut bytes = npy("<f4", false, "(1, 1)", &le32(&[7.0]));
        // Rewrite as version 2.0: a 4-byte header length.
        let len = u16::from_le_bytes([bytes[8], bytes[9]]);
        bytes[6] = 2;
        bytes.splice(8..10, u32::from(len).to_le_bytes());
        assert_eq!(rows(reader(bytes, true).unwrap()), [[7.0]]);
    }

    #[test]
    fn damaged_files_are_errors() {
        let good = npy("<f4", false, "(2, 2)", &le32(&[1., 2., 3., 4.]));
        let short = good[..good.len() - 1].to_vec();
        assert!(matches!(
            reader(short.clone(), true),
            Err(NpyError::Size { want: 16, have: 15 })
        ));
        // Without the length, the short row is found when it is read.
        let mut r = reader(short, false).unwrap();
        let mut row = Vec::new();
        assert!(r.next_row(&mut row).unwrap());
        assert!(matches!(r.next_row(&mut row), Err(NpyError::Size { .. })));
        let mut long = good.clone();
        long.push(0);
        assert!(matches!(reader(long, true), Err(NpyError::Size { .. })));
        assert!(matches!(
            reader(b"PK\x03\x04 a zip".to_vec(), true),
            Err(NpyError::NotNpy)
        ));
        assert!(matches!(
            reader(b"\x93NU".to_vec(), true),
            Err(NpyError::NotNpy)
        ));
        assert!(matches!(
            reader(good[..20].to_vec(), true),
            Err(NpyError::Header(_))
        ));
        let mut v9 = good.clone();
        v9[6] = 9;
        assert!(matches!(reader(v9, true), Err(NpyError::Version(9, 0))));
        let ints = npy("<i4", false, "(2, 2)", &[0; 16]);
        let e = reader(ints, true).err().unwrap();
        assert!(e.to_string().contains("'<i4'"), "{e}");
        let cube = npy("<f4", false, "(1, 2, 2)", &le32(&[1., 2., 3., 4.]));
        let e = reader(cube, true).err().unwrap();
        assert!(e.to_string().contains("(1, 2, 2)"), "{e}");
        let huge = npy("<f8", false, "(18446744073709551615, 4)", &[]);
        assert!(matches!(reader(huge, true), Err(NpyError::Shape { .. })));
        let mut garbled = good.clone();
        garbled[11] = b'[';
        assert!(matches!(reader(garbled, true), Err(NpyError::Header(_))));
    }

    #[test]
    fn header_dict_parses_what_numpy_writes() {
        let d =
            parse_dict("{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }  \n").unwrap();
        assert_eq!(d[0], ("descr".into(), Literal::Str("<f4".into())));
        assert_eq!(d[1], ("fortran_order".into(), Literal::Bool(false)));
        assert_eq!(d[2], ("shape".into(), Literal::Tuple(vec![3, 4])));
        let d = parse_dict("{\"shape\": (5,), 'descr': [('a', '<f4')]}").unwrap();
        assert_eq!(d[0].1, Literal::Tuple(vec![5]));
        assert_eq!(d[1].1, Literal::Other("[('a', '<f4')]".into()));
        assert_eq!(
            parse_dict("{'shape': ()}").unwrap()[0].1,
            Literal::Tuple(vec![])
        );
        assert!(parse_dict("{'shape': (3, 4}").is_err());
        assert!(parse_dict("'descr': '<f4'").is_err());
    }
}
