//! Fuzz entry points for the search layer's decoders: the text index's records, the HNSW
//! graph file and the vector store's values. Whatever the bytes, a decoder returns a value
//! or a typed error, never panics, and what it decodes encodes to bytes that decode to the
//! same value. The cargo-fuzz project in `fuzz/` calls these functions, one target each;
//! `tests/search/fuzz_smoke.rs` runs them on every `cargo test` with the engine's shared driver,
//! [`shale::fuzzing::harness`].

mod vector;

use shale::fuzzing::Target;

use crate::text::{Analyzer, Definition, DocRecord};

pub use vector::{vector_graph, vector_value};

/// Every target, by name: the names of the files in `fuzz/fuzz_targets/`.
pub const TARGETS: &[(&str, Target)] = &[
    ("text_records", text_records),
    ("vector_graph", vector_graph),
    ("vector_value", vector_value),
];

/// Valid inputs for `target`, made by the layer's own encoders: the starting corpus of the
/// fuzz targets and of `tests/search/fuzz_smoke.rs`. Unknown names give no seeds.
pub fn seeds(target: &str) -> Vec<Vec<u8>> {
    match target {
        "text_records" => text_seeds(),
        _ => vector::seeds(target),
    }
}

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

/// Records and definitions of a few texts under every analyzer.
fn text_seeds() -> Vec<Vec<u8>> {
    let mut out = vec![Vec::new()];
    for (i, text) in [
        "",
        "a",
        "The cats chase cats",
        "全文検索 RFC 9110 ENOSPC",
        "x y z x",
    ]
    .iter()
    .enumerate()
    {
        for a in [Analyzer::Simple, Analyzer::English, Analyzer::Cjk] {
            out.push(DocRecord::analyze(a, text, i as u64 * 0x9e37_79b9).encode());
            out.push(
                Definition {
                    analyzer: a,
                    keyspace: (i % 2 == 0).then(|| "docs".to_owned()),
                    prefix: text.as_bytes().to_vec(),
                }
                .encode(),
            );
        }
    }
    out
}
