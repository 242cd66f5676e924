//! Fuzz entry points for the text index's decoders. Whatever the bytes, a decoder returns
//! a value or a typed error, never panics, and what it decodes encodes to bytes that decode
//! to the same value.

use crate::text::{Definition, DocRecord};

/// A document record and a definition, from the same bytes.
pub fn text_records(data: &[u8]) {
    if let Ok(record) = DocRecord::decode(data) {
        assert_eq!(DocRecord::decode(&record.encode()).as_ref(), Ok(&record));
        assert!(record
            .terms
            .windows(2)
            .all(|w| matches!(w, [a, b] if a.0 < b.0)));
        assert!(record.terms.iter().all(|(_, tf)| *tf > 0));
    }
    if let Ok(definition) = Definition::decode(data) {
        assert_eq!(
            Definition::decode(&definition.encode()).as_ref(),
            Ok(&definition)
        );
    }
}
