//! The search layer's worked examples of `docs/format.md`, checked against the code in both
//! directions: the document's bytes decode with the crate's real decoders to the values the
//! document states, and the real encoders still write exactly those bytes. `vector.rs` for
//! sections 8 and 9 (the vector store and the HNSW graph), `text.rs` for section 15 (the
//! text index's records). The engine's own sections: `crates/shale/tests/engine/format_examples/`.

mod text;
mod vector;

const DOC: &str = include_str!("../../../../../docs/format.md");

/// The bytes of the one fenced block `hex NAME`: two-digit hex tokens; `#` starts a comment.
pub(crate) fn hex(name: &str) -> Vec<u8> {
    let fence = format!("```hex {name}\n");
    let mut hits = DOC.match_indices(&fence);
    let (at, _) = hits
        .next()
        .unwrap_or_else(|| panic!("docs/format.md has no block ```hex {name}"));
    assert!(
        hits.next().is_none(),
        "docs/format.md has two blocks ```hex {name}"
    );
    let start = at + fence.len();
    let len = DOC[start..]
        .find("```")
        .unwrap_or_else(|| panic!("block ```hex {name} is not closed"));
    DOC[start..start + len]
        .lines()
        .flat_map(|line| line.split('#').next().unwrap_or("").split_whitespace())
        .map(|t| {
            assert_eq!(t.len(), 2, "{name}: token {t:?} is not one byte");
            u8::from_str_radix(t, 16).unwrap_or_else(|_| panic!("{name}: bad hex {t:?}"))
        })
        .collect()
}
