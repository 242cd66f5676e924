//! The records of a text index, encode and decode side by side (docs/format.md, "Text
//! index records"). The only place in this crate that packs bytes.
//!
//! A text index keeps its records in a keyspace of its own, `text.<name>`:
//!
//! ```text
//! key                      value
//! 0x00                     definition := version:u8(1) analyzer:u8 keyspace:varbytes prefix:varbytes
//! 0x01 ++ document key     document   := hash:u64 length:varint count:varint term{count}
//!                          term       := text:varbytes tf:varint      (terms in byte order, distinct)
//! varbytes := len:varint bytes[len];  varint: LEB128, at most 10 bytes;  u64: little-endian
//! ```
//!
//! A document record is the document's postings seen from the document: each distinct
//! term with its frequency, the document's length in tokens, and the xxh3-64 hash of the
//! value it was analyzed from. It is written in the same batch as the value (the write
//! hook derives it), keyed by the value's own key, so a delete, an overwrite or a range
//! delete of values is the same delete, overwrite or range delete of records. Index-wide
//! statistics (N, the total length, each term's document frequency) are sums over the
//! records, kept exactly in memory; none is stored, so no record is shared by two
//! documents and no write reads another's.

use std::ops::Range;

use crate::text::analyzer::Analyzer;

/// The key of the definition record.
pub const DEFINITION_KEY: &[u8] = &[0x00];
/// The byte before every document key.
pub const DOC_TAG: u8 = 0x01;
/// The definition's version.
const DEFINITION_VERSION: u8 = 1;
/// The longest term an index stores, in bytes: a longer word is cut at a character
/// boundary (a term is a word, and keys and records stay small).
pub const MAX_TERM_BYTES: usize = 255;

/// Why bytes are not a record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError {
    pub offset: usize,
    pub reason: String,
}

impl DecodeError {
    fn new(offset: usize, reason: impl Into<String>) -> DecodeError {
        DecodeError {
            offset,
            reason: reason.into(),
        }
    }
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "at byte {}: {}", self.offset, self.reason)
    }
}

/// The key of document `key`'s record.
pub fn doc_key(key: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(key.len() + 1);
    out.push(DOC_TAG);
    out.extend_from_slice(key);
    out
}

/// The document key of a record key, if it is one.
pub fn doc_key_of(record_key: &[u8]) -> Option<&[u8]> {
    match record_key.split_first() {
        Some((&DOC_TAG, key)) => Some(key),
        _ => None,
    }
}

/// An index's definition: what its records were made with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Definition {
    pub analyzer: Analyzer,
    /// The keyspace of the documents (`None`: the default keyspace).
    pub keyspace: Option<String>,
    pub prefix: Vec<u8>,
}

impl Definition {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = vec![DEFINITION_VERSION, self.analyzer.tag()];
        put_bytes(&mut out, self.keyspace.as_deref().unwrap_or("").as_bytes());
        put_bytes(&mut out, &self.prefix);
        out
    }

    /// # Errors
    /// Bytes that are not a definition of a known version.
    pub fn decode(bytes: &[u8]) -> Result<Definition, DecodeError> {
        let mut d = Decoder::new(bytes);
        let version = d.u8("version")?;
        if version != DEFINITION_VERSION {
            return Err(DecodeError::new(0, format!("unknown version {version}")));
        }
        let tag = d.u8("analyzer")?;
        let analyzer = Analyzer::from_tag(tag)
            .ok_or_else(|| DecodeError::new(1, format!("unknown analyzer {tag}")))?;
        let at = d.at;
        let keyspace = std::str::from_utf8(d.bytes("keyspace")?)
            .map_err(|_| DecodeError::new(at, "keyspace name is not UTF-8"))?;
        let prefix = d.bytes("prefix")?.to_vec();
        d.finish()?;
        Ok(Definition {
            analyzer,
            keyspace: (!keyspace.is_empty()).then(|| keyspace.to_owned()),
            prefix,
        })
    }
}

/// A document record: what the index holds of one value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DocRecord {
    /// xxh3-64 of the value it was made from.
    pub hash: u64,
    /// Tokens in the document (the BM25 document length).
    pub length: u32,
    /// Each distinct term and its frequency, in byte order of the terms.
    pub terms: Vec<(String, u32)>,
}

impl DocRecord {
    /// The record of `text` under `analyzer`, made from a value hashing to `hash`.
    pub fn analyze(analyzer: Analyzer, text: &str, hash: u64) -> DocRecord {
        let counted = Counted::of(analyzer, text);
        DocRecord {
            hash,
            length: counted.length(),
            terms: counted
                .distinct()
                .map(|(term, tf)| (term.to_owned(), tf))
                .collect(),
        }
    }

    /// `DocRecord::analyze(analyzer, text, hash).encode()`, without a string per term: what
    /// a write derives for each value.
    pub fn analyze_encoded(analyzer: Analyzer, text: &str, hash: u64) -> Vec<u8> {
        let counted = Counted::of(analyzer, text);
        let mut out = Vec::with_capacity(12 + counted.arena.len() + 2 * counted.spans.len());
        out.extend_from_slice(&hash.to_le_bytes());
        put_varint(&mut out, u64::from(counted.length()));
        put_varint(&mut out, counted.distinct().count() as u64);
        for (term, tf) in counted.distinct() {
            put_bytes(&mut out, term.as_bytes());
            put_varint(&mut out, u64::from(tf));
        }
        out
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut out =
            Vec::with_capacity(12 + self.terms.iter().map(|(t, _)| t.len() + 2).sum::<usize>());
        out.extend_from_slice(&self.hash.to_le_bytes());
        put_varint(&mut out, u64::from(self.length));
        put_varint(&mut out, self.terms.len() as u64);
        for (term, tf) in &self.terms {
            put_bytes(&mut out, term.as_bytes());
            put_varint(&mut out, u64::from(*tf));
        }
        out
    }

    /// # Errors
    /// As [`DocView::decode`].
    pub fn decode(bytes: &[u8]) -> Result<DocRecord, DecodeError> {
        DocView::decode(bytes).map(|v| v.to_owned())
    }

    /// The record, borrowed.
    pub fn view(&self) -> DocView<'_> {
        DocView {
            hash: self.hash,
            length: self.length,
            terms: self.terms.iter().map(|(t, tf)| (t.as_str(), *tf)).collect(),
        }
    }
}

/// A document record decoded in place: its terms borrow the bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DocView<'a> {
    pub hash: u64,
    pub length: u32,
    pub terms: Vec<(&'a str, u32)>,
}

impl<'a> DocView<'a> {
    /// # Errors
    /// Bytes that are not a well-formed record: truncated, a term not UTF-8, terms out of
    /// order or repeated, a frequency of 0, or bytes left over.
    pub fn decode(bytes: &'a [u8]) -> Result<DocView<'a>, DecodeError> {
        let mut d = Decoder::new(bytes);
        let hash = d.u64("hash")?;
        let length = d.u32("length")?;
        let count = d.varint("term count")?;
        // Each term takes at least two bytes: a claimed count is checked before allocating.
        if count > (d.remaining() / 2) as u64 {
            return Err(DecodeError::new(d.at, format!("{count} terms cannot fit")));
        }
        let mut terms: Vec<(&'a str, u32)> = Vec::with_capacity(count as usize);
        for _ in 0..count {
            let at = d.at;
            let term = std::str::from_utf8(d.bytes("term")?)
                .map_err(|_| DecodeError::new(at, "term is not UTF-8"))?;
            if terms.last().is_some_and(|(last, _)| *last >= term) {
                return Err(DecodeError::new(at, "terms out of order or repeated"));
            }
            let tf = d.u32("term frequency")?;
            if tf == 0 {
                return Err(DecodeError::new(at, "a term frequency of 0"));
            }
            terms.push((term, tf));
        }
        d.finish()?;
        Ok(DocView {
            hash,
            length,
            terms,
        })
    }

    pub fn to_owned(&self) -> DocRecord {
        DocRecord {
            hash: self.hash,
            length: self.length,
            terms: self
                .terms
                .iter()
                .map(|(t, tf)| ((*t).to_owned(), *tf))
                .collect(),
        }
    }
}

/// `term` cut to at most [`MAX_TERM_BYTES`], at a character boundary.
pub(crate) fn clip_term(mut term: String) -> String {
    let len = clipped(&term).len();
    term.truncate(len);
    term
}

/// `term`, cut to at most [`MAX_TERM_BYTES`] at a character boundary.
fn clipped(term: &str) -> &str {
    let mut end = term.len().min(MAX_TERM_BYTES);
    while !term.is_char_boundary(end) {
        end -= 1;
    }
    term.get(..end).unwrap_or("")
}

/// A text's terms side by side in one string, each a span of it, sorted by term: a
/// document's terms counted with no string per token.
struct Counted {
    arena: String,
    spans: Vec<Range<usize>>,
}

impl Counted {
    fn of(analyzer: Analyzer, text: &str) -> Counted {
        // Terms are about as long as the words they come from: one allocation each, mostly.
        let mut arena = String::with_capacity(text.len());
        let mut spans: Vec<Range<usize>> = Vec::with_capacity(text.len() / 4);
        analyzer.for_each_term(text, |term| {
            let start = arena.len();
            arena.push_str(clipped(term));
            spans.push(start..arena.len());
        });
        let term = |span: &Range<usize>| arena.get(span.clone()).unwrap_or("");
        spans.sort_unstable_by(|a, b| term(a).cmp(term(b)));
        Counted { arena, spans }
    }

    /// The number of tokens (the BM25 document length).
    fn length(&self) -> u32 {
        u32::try_from(self.spans.len()).unwrap_or(u32::MAX)
    }

    /// Each distinct term and its frequency, in byte order.
    fn distinct(&self) -> impl Iterator<Item = (&str, u32)> + '_ {
        let term = |span: &Range<usize>| self.arena.get(span.clone()).unwrap_or("");
        self.spans
            .chunk_by(move |a, b| term(a) == term(b))
            .filter_map(move |run| {
                let tf = u32::try_from(run.len()).unwrap_or(u32::MAX);
                run.first().map(|span| (term(span), tf))
            })
    }
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// Reads a record front to back; every length is checked before it is used.
struct Decoder<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Decoder<'a> {
    fn new(bytes: &'a [u8]) -> Decoder<'a> {
        Decoder { bytes, at: 0 }
    }

    fn remaining(&self) -> usize {
        self.bytes.len().saturating_sub(self.at)
    }

    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], DecodeError> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.bytes.len());
        match end.and_then(|end| self.bytes.get(self.at..end)) {
            Some(s) => {
                self.at += n;
                Ok(s)
            }
            None => Err(DecodeError::new(self.at, format!("{what}: truncated"))),
        }
    }

    fn u8(&mut self, what: &str) -> Result<u8, DecodeError> {
        Ok(self.take(1, what)?.first().copied().unwrap_or(0))
    }

    fn u64(&mut self, what: &str) -> Result<u64, DecodeError> {
        let b = self.take(8, what)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }

    fn varint(&mut self, what: &str) -> Result<u64, DecodeError> {
        let start = self.at;
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = self.u8(what)?;
            let bits = u64::from(byte & 0x7f);
            if shift == 63 && bits > 1 {
                return Err(DecodeError::new(start, format!("{what}: varint overflows")));
            }
            v |= bits << shift;
            if byte & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(DecodeError::new(start, format!("{what}: varint too long")))
    }

    fn u32(&mut self, what: &str) -> Result<u32, DecodeError> {
        let at = self.at;
        u32::try_from(self.varint(what)?)
            .map_err(|_| DecodeError::new(at, format!("{what}: over 32 bits")))
    }

    fn bytes(&mut self, what: &str) -> Result<&'a [u8], DecodeError> {
        let at = self.at;
        let len = usize::try_from(self.varint(what)?)
            .map_err(|_| DecodeError::new(at, format!("{what}: length too large")))?;
        self.take(len, what)
    }

    fn finish(&self) -> Result<(), DecodeError> {
        match self.remaining() {
            0 => Ok(()),
            n => Err(DecodeError::new(self.at, format!("{n} bytes left over"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doc_record_round_trips_and_counts_terms() {
        let r = DocRecord::analyze(Analyzer::English, "Cats chase cats; the dog sleeps", 7);
        assert_eq!(r.length, 5);
        assert_eq!(
            r.terms,
            [
                ("cat".to_owned(), 2),
                ("chase".to_owned(), 1),
                ("dog".to_owned(), 1),
                ("sleep".to_owned(), 1)
            ]
        );
        assert_eq!(DocRecord::decode(&r.encode()), Ok(r));
    }

    #[test]
    fn every_flipped_byte_and_truncation_is_refused_or_decodes_cleanly() {
        let r = DocRecord::analyze(Analyzer::Simple, "a b c rfc 9110", 0x0102_0304_0506_0708);
        let bytes = r.encode();
        for cut in 0..bytes.len() {
            assert!(
                DocRecord::decode(&bytes[..cut]).is_err(),
                "truncated at {cut}"
            );
        }
        for i in 0..bytes.len() {
            for bit in 0..8 {
                let mut b = bytes.clone();
                b[i] ^= 1 << bit;
                // Never a panic; a decode that succeeds is well-formed by construction.
                if let Ok(d) = DocRecord::decode(&b) {
                    assert!(d.terms.windows(2).all(|w| w[0].0 < w[1].0));
                }
            }
        }
    }

    #[test]
    fn definition_round_trips_and_refuses_unknown_versions() {
        let d = Definition {
            analyzer: Analyzer::Cjk,
            keyspace: Some("docs".into()),
            prefix: b"p/".to_vec(),
        };
        assert_eq!(Definition::decode(&d.encode()), Ok(d.clone()));
        let mut bytes = d.encode();
        bytes[0] = 9;
        assert!(Definition::decode(&bytes).is_err());
        bytes[0] = 1;
        bytes[1] = 0;
        assert!(Definition::decode(&bytes).is_err());
    }

    #[test]
    fn long_terms_are_clipped_at_a_character_boundary() {
        let word = "é".repeat(200);
        let r = DocRecord::analyze(Analyzer::Simple, &word, 0);
        assert_eq!(r.terms[0].0.len(), 254);
        assert_eq!(doc_key_of(&doc_key(b"k")), Some(&b"k"[..]));
        assert_eq!(doc_key_of(DEFINITION_KEY), None);
    }

    #[test]
    fn a_derived_record_is_the_encoded_record() {
        let long = format!("{} tail", "é".repeat(200));
        for text in [
            "",
            "Cats chase cats; the dog sleeps",
            "全文検索 RFC 9110",
            &long,
        ] {
            for a in [Analyzer::Simple, Analyzer::English, Analyzer::Cjk] {
                assert_eq!(
                    DocRecord::analyze_encoded(a, text, 42),
                    DocRecord::analyze(a, text, 42).encode(),
                    "{a:?} {text:?}"
                );
            }
        }
    }
}
