//! The text form of keys and values: how `scan`, `export --format tsv` and the dump
//! commands print bytes, and how `--escaped` arguments and `import --format tsv` read them.
//!
//! Printable text stays as it is (including UTF-8 beyond ASCII); `\` becomes `\\`, tab,
//! newline and carriage return become `\t`, `\n`, `\r`, and every other control byte or
//! byte that is not part of valid UTF-8 becomes `\xNN`. So a printed key or value never
//! contains a tab or a newline, and `unescape(escape(b)) == b` for all bytes `b`.
//!
//! For JSON, bytes that are valid UTF-8 are written as a plain string and anything else as
//! hex under a `_hex` field name (see [`json_bytes`]), so JSON output is lossless too.

use std::fmt::Write as _;

/// The printable form of `bytes`.
pub fn escape(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '\\' => out.push_str("\\\\"),
                '\t' => out.push_str("\\t"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                c if c.is_control() => {
                    let mut buf = [0u8; 4];
                    for b in c.encode_utf8(&mut buf).bytes() {
                        let _ = write!(out, "\\x{b:02x}");
                    }
                }
                c => out.push(c),
            }
        }
        for b in chunk.invalid() {
            let _ = write!(out, "\\x{b:02x}");
        }
    }
    out
}

/// The bytes of an escaped string; `Err` says what is wrong and where.
pub fn unescape(text: &str) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(text.len());
    let bytes = text.as_bytes();
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        if b != b'\\' {
            out.push(b);
            i += 1;
            continue;
        }
        let at = i;
        match bytes.get(i + 1) {
            Some(b'\\') => out.push(b'\\'),
            Some(b't') => out.push(b'\t'),
            Some(b'n') => out.push(b'\n'),
            Some(b'r') => out.push(b'\r'),
            Some(b'x') => {
                let hex = bytes
                    .get(i + 2..i + 4)
                    .and_then(hex_byte)
                    .ok_or_else(|| format!("bad \\x escape at byte {at} (want \\xNN)"))?;
                out.push(hex);
                i += 2;
            }
            Some(_) => {
                return Err(format!(
                    "unknown escape at byte {at} (known: \\\\ \\t \\n \\r \\xNN)"
                ))
            }
            None => return Err(format!("lone backslash at byte {at}")),
        }
        i += 2;
    }
    Ok(out)
}

/// Lower-case hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(out, "{b:02x}");
    }
    out
}

/// Bytes from hex; `Err` names the problem.
pub fn from_hex(text: &str) -> Result<Vec<u8>, String> {
    if !text.len().is_multiple_of(2) {
        return Err(format!("hex of odd length {}", text.len()));
    }
    text.as_bytes()
        .chunks(2)
        .map(|pair| {
            hex_byte(pair)
                .ok_or_else(|| format!("bad hex digits {:?}", String::from_utf8_lossy(pair)))
        })
        .collect()
}

/// Put `bytes` into `obj` as `field` (a UTF-8 string) or `field_hex` (anything else).
pub fn json_bytes(obj: &mut serde_json::Map<String, serde_json::Value>, field: &str, bytes: &[u8]) {
    match std::str::from_utf8(bytes) {
        Ok(s) => obj.insert(field.to_owned(), s.into()),
        Err(_) => obj.insert(format!("{field}_hex"), hex(bytes).into()),
    };
}

/// Read `field` or `field_hex` back from `obj`.
pub fn json_field(
    obj: &serde_json::Map<String, serde_json::Value>,
    field: &str,
) -> Result<Vec<u8>, String> {
    if let Some(v) = obj.get(field) {
        return v
            .as_str()
            .map(|s| s.as_bytes().to_vec())
            .ok_or_else(|| format!("\"{field}\" is not a string"));
    }
    match obj.get(&format!("{field}_hex")) {
        Some(v) => from_hex(
            v.as_str()
                .ok_or_else(|| format!("\"{field}_hex\" is not a string"))?,
        ),
        None => Err(format!("no \"{field}\" (or \"{field}_hex\") field")),
    }
}

/// The byte two hex digits spell, if `pair` is exactly two hex digits (`from_str_radix`
/// alone would also take a sign, as in `+1`).
fn hex_byte(pair: &[u8]) -> Option<u8> {
    match pair {
        [hi, lo] if hi.is_ascii_hexdigit() && lo.is_ascii_hexdigit() => {
            u8::from_str_radix(std::str::from_utf8(pair).ok()?, 16).ok()
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_control_and_binary_bytes() {
        assert_eq!(escape(b"a\tb\nc\\d\re"), "a\\tb\\nc\\\\d\\re");
        assert_eq!(escape(b"\x00\x7f\xff"), "\\x00\\x7f\\xff");
        assert_eq!(escape("héllo".as_bytes()), "héllo");
    }

    #[test]
    fn round_trips_every_byte() {
        let all: Vec<u8> = (0..=255u8).chain("ünï\\x".bytes()).collect();
        assert_eq!(unescape(&escape(&all)).unwrap(), all);
    }

    #[test]
    fn rejects_bad_escapes() {
        assert!(unescape("a\\").is_err());
        assert!(unescape("\\q").is_err());
        assert!(unescape("\\x4").is_err());
        assert!(unescape("\\xzz").is_err());
        assert!(unescape("k\\x+1").is_err());
        assert!(from_hex("+1").is_err());
        assert_eq!(from_hex("0aFf").unwrap(), [0x0a, 0xff]);
    }

    #[test]
    fn hex_round_trip() {
        assert_eq!(from_hex(&hex(b"\x00\xffA")).unwrap(), b"\x00\xffA");
        assert!(from_hex("abc").is_err());
    }
}
