//! The `.npy` header, decoded and encoded side by side: the magic, the version, the header
//! length and the header dict (`descr`, `fortran_order`, `shape`) that NumPy writes.

use std::io::Read;

use crate::error::{shape_text, NpyError};

/// The magic bytes every `.npy` file starts with.
const MAGIC: &[u8; 6] = b"\x93NUMPY";

/// The longest header accepted (NumPy writes a few hundred bytes at most); a longer one is
/// damage, not something to allocate for.
const MAX_HEADER_BYTES: usize = 1 << 20;

/// The header is padded so that the data starts at a multiple of this (NumPy's `np.save`).
const ALIGN: usize = 64;

/// An element type the reader knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dtype {
    /// `f4`: `float32`.
    F32,
    /// `f8`: `float64`.
    F64,
    /// `u4`: `uint32`.
    U32,
}

impl Dtype {
    /// Bytes of one element.
    pub fn bytes(self) -> usize {
        match self {
            Dtype::F32 | Dtype::U32 => 4,
            Dtype::F64 => 8,
        }
    }

    /// The type and whether it is big-endian, of a `descr` such as `'<f4'`.
    fn from_descr(descr: &str) -> Option<(Dtype, bool)> {
        let (order, kind) = descr.split_at_checked(1)?;
        let big_endian = match order {
            "<" | "=" => false,
            ">" => true,
            _ => return None,
        };
        let dtype = match kind {
            "f4" => Dtype::F32,
            "f8" => Dtype::F64,
            "u4" => Dtype::U32,
            _ => return None,
        };
        Some((dtype, big_endian))
    }

    /// The `descr` NumPy writes for this type in little-endian order.
    fn little_endian_descr(self) -> &'static str {
        match self {
            Dtype::F32 => "<f4",
            Dtype::F64 => "<f8",
            Dtype::U32 => "<u4",
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
    /// Rows in the file (1 for a 1-D array).
    pub rows: usize,
    /// Elements of each row.
    pub cols: usize,
}

impl Header {
    /// Bytes of data the shape and dtype call for.
    ///
    /// # Errors
    /// `Shape` if that number does not fit in a `usize`.
    pub fn data_bytes(&self) -> Result<usize, NpyError> {
        self.rows
            .checked_mul(self.cols)
            .and_then(|n| n.checked_mul(self.dtype.bytes()))
            .ok_or_else(|| NpyError::Shape {
                shape: self.shape.clone(),
                need: "an array that fits in memory",
            })
    }
}

/// Read the header from `input`: the header and the offset of the first data byte. A dtype
/// for which `accepts` is false is a `Dtype` error naming `want`.
pub(crate) fn read_header(
    input: &mut dyn Read,
    accepts: fn(Dtype) -> bool,
    want: &'static str,
) -> Result<(Header, u64), NpyError> {
    let mut prefix = [0u8; 8];
    match input.read_exact(&mut prefix) {
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Err(NpyError::NotNpy),
        other => other?,
    }
    let (magic, [major, minor]) = prefix.split_at(6) else {
        return Err(NpyError::NotNpy);
    };
    if magic != MAGIC.as_slice() {
        return Err(NpyError::NotNpy);
    }
    let (header_len, start) = match (*major, *minor) {
        (1, 0) => {
            let mut b = [0u8; 2];
            input.read_exact(&mut b)?;
            (usize::from(u16::from_le_bytes(b)), 10u64)
        }
        (2 | 3, 0) => {
            let mut b = [0u8; 4];
            input.read_exact(&mut b)?;
            (
                usize::try_from(u32::from_le_bytes(b)).unwrap_or(usize::MAX),
                12,
            )
        }
        (major, minor) => return Err(NpyError::Version(major, minor)),
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
    let header = parse_header(&text, accepts, want)?;
    Ok((header, start + header_len as u64))
}

/// The bytes before the data of a C-order or Fortran-order array of `dtype` (little-endian)
/// and `shape`, as NumPy's `np.save` lays them out: version 1.0, or 2.0 when the header is
/// too long for 1.0's 16-bit length, padded with spaces and a newline to 64 bytes.
pub(crate) fn encode_header(dtype: Dtype, fortran_order: bool, shape: &[u64]) -> Vec<u8> {
    encode_header_raw(dtype.little_endian_descr(), fortran_order, shape)
}

/// [`encode_header`] with any `descr`, for tests that write what the reader refuses.
pub(crate) fn encode_header_raw(descr: &str, fortran_order: bool, shape: &[u64]) -> Vec<u8> {
    let order = if fortran_order { "True" } else { "False" };
    let mut dict = format!(
        "{{'descr': '{descr}', 'fortran_order': {order}, 'shape': {}, }}",
        shape_text(shape)
    );
    // The dict's length once padded (a newline included) behind a prelude of `prelude` bytes.
    let padded = |prelude: usize| (prelude + dict.len() + 1).next_multiple_of(ALIGN) - prelude;
    let (prelude, len) = match u16::try_from(padded(10)) {
        Ok(len) => (10, u32::from(len)),
        // A header over 4 GiB would need a shape of hundreds of millions of dimensions.
        Err(_) => (12, u32::try_from(padded(12)).unwrap_or(u32::MAX)),
    };
    let spaces = padded(prelude) - dict.len() - 1;
    dict.push_str(&" ".repeat(spaces));
    dict.push('\n');
    let mut out = Vec::with_capacity(prelude + dict.len());
    out.extend_from_slice(MAGIC);
    match u16::try_from(len) {
        Ok(len) if prelude == 10 => {
            out.extend_from_slice(&[1, 0]);
            out.extend_from_slice(&len.to_le_bytes());
        }
        _ => {
            out.extend_from_slice(&[2, 0]);
            out.extend_from_slice(&len.to_le_bytes());
        }
    }
    out.extend_from_slice(dict.as_bytes());
    out
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

/// Parse the header dict and check it holds what a file of rows needs.
fn parse_header(
    text: &str,
    accepts: fn(Dtype) -> bool,
    want: &'static str,
) -> Result<Header, NpyError> {
    let entries = parse_dict(text).map_err(NpyError::Header)?;
    let get = |name: &str| {
        entries
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v)
            .ok_or_else(|| NpyError::Header(format!("no '{name}' in {}", text.trim_end())))
    };
    let refused = |descr: String| NpyError::Dtype { descr, want };
    let (dtype, big_endian) = match get("descr")? {
        Literal::Str(s) => match Dtype::from_descr(s) {
            Some((dtype, big)) if accepts(dtype) => (dtype, big),
            _ => return Err(refused(format!("'{s}'"))),
        },
        Literal::Other(s) => return Err(refused(s.clone())),
        other => return Err(refused(format!("{other:?}"))),
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
        let mut chars = self.rest.chars();
        let quote = match chars.next() {
            Some(q @ ('\'' | '"')) => q,
            _ => return Err(format!("expected a quoted name at {:?}", self.rest)),
        };
        let body = chars.as_str();
        let (s, rest) = body
            .split_once(quote)
            .ok_or_else(|| format!("unterminated string at {:?}", self.rest))?;
        let s = s.to_owned();
        self.rest = rest;
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
            return self.tuple().map(Literal::Tuple);
        }
        Ok(Literal::Other(self.other()))
    }

    /// The dimensions of a tuple of integers, after its `(`.
    fn tuple(&mut self) -> Result<Vec<u64>, String> {
        let mut dims = Vec::new();
        loop {
            self.skip_space();
            if self.eat(')') {
                return Ok(dims);
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
                return Ok(dims);
            }
        }
    }

    /// Something else (a list, a number): up to the next top-level comma or brace.
    fn other(&mut self) -> String {
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
        value.trim().to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn encoded_header_is_numpys_and_decodes() {
        // np.zeros((2, 3), dtype='<f4') as np.save lays it out (without the spaces it adds
        // for the shape to grow): the dict, spaces, a newline, the data at byte 128.
        let bytes = encode_header(Dtype::F32, false, &[2, 3]);
        let dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
        assert_eq!(bytes.len(), 128);
        assert_eq!(&bytes[..10], b"\x93NUMPY\x01\x00\x76\x00");
        assert_eq!(&bytes[10..10 + dict.len()], dict.as_bytes());
        assert!(bytes[10 + dict.len()..127].iter().all(|&b| b == b' '));
        assert_eq!(bytes[127], b'\n');
        let (header, start) = read_header(&mut bytes.as_slice(), |_| true, "").unwrap();
        assert_eq!(start, 128);
        assert_eq!(
            header,
            Header {
                dtype: Dtype::F32,
                big_endian: false,
                fortran_order: false,
                shape: vec![2, 3],
                rows: 2,
                cols: 3,
            }
        );
        let (header, _) = read_header(
            &mut encode_header(Dtype::U32, true, &[7]).as_slice(),
            |_| true,
            "",
        )
        .unwrap();
        assert_eq!((header.dtype, header.fortran_order), (Dtype::U32, true));
        assert_eq!((header.rows, header.cols), (1, 7));
    }

    #[test]
    fn header_too_long_for_version_1_is_version_2() {
        let descr = "x".repeat(70_000);
        let bytes = encode_header_raw(&descr, false, &[1]);
        assert_eq!(&bytes[..8], b"\x93NUMPY\x02\x00");
        assert_eq!(bytes.len() % ALIGN, 0);
        let len = u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]);
        assert_eq!(len as usize, bytes.len() - 12);
        let e = read_header(&mut bytes.as_slice(), |_| true, "").unwrap_err();
        assert!(matches!(e, NpyError::Dtype { .. }), "{e}");
    }

    #[test]
    fn descr_names_type_and_byte_order() {
        assert_eq!(Dtype::from_descr(">f8"), Some((Dtype::F64, true)));
        assert_eq!(Dtype::from_descr("=u4"), Some((Dtype::U32, false)));
        assert_eq!(Dtype::from_descr("|u1"), None);
        assert_eq!(Dtype::from_descr("<i4"), None);
        assert_eq!(Dtype::from_descr(""), None);
    }
}
