//! The worked examples of `docs/format.md`, checked against the code in both directions.
//!
//! Each example sits in the document in a fenced block whose info string is `hex NAME` (or
//! `text NAME` for the directory listing). For every example this test
//! 1. decodes the document's bytes with the crate's real decoders and asserts the values the
//!    document states, and
//! 2. runs the real encoders again (a real database in a temporary directory, or the block,
//!    filter and edit encoders) and asserts that they still write exactly those bytes.
//!
//! So a change to any on-disk format fails here until the document is updated. To print
//! fresh examples after a deliberate format change (then paste them into the document and
//! add a line to its version history):
//!
//! ```text
//! cargo test -p shale --test engine format_examples::print_examples -- --ignored --nocapture
//! ```
//!
//! The examples are split as the document is: `kv.rs` for sections 1 to 7 (the key-value
//! files), `range_del.rs` for the range delete ones (sections 4 and 6.9), `keyspace.rs` for
//! the keyspace ones. The search layer's sections (8, 9 and 15) are checked by
//! `crates/shale-search/tests/search/format_examples/`.

mod keyspace;
mod kv;
mod range_del;

const DOC: &str = include_str!("../../../../../docs/format.md");

// ---------------------------------------------------------------------------------------
// Reading examples out of the document.

/// The body of the one fenced block whose info string is exactly `info`.
pub(crate) fn fenced(info: &str) -> &'static str {
    let fence = format!("```{info}\n");
    let mut hits = DOC.match_indices(&fence);
    let (at, _) = hits
        .next()
        .unwrap_or_else(|| panic!("docs/format.md has no block ```{info}"));
    assert!(
        hits.next().is_none(),
        "docs/format.md has two blocks ```{info}"
    );
    let start = at + fence.len();
    let len = DOC[start..]
        .find("```")
        .unwrap_or_else(|| panic!("block ```{info} is not closed"));
    &DOC[start..start + len]
}

/// The bytes of a `hex NAME` block: two-digit hex tokens; `#` starts a comment.
pub(crate) fn hex(name: &str) -> Vec<u8> {
    fenced(&format!("hex {name}"))
        .lines()
        .flat_map(|line| line.split('#').next().unwrap_or("").split_whitespace())
        .map(|t| {
            assert_eq!(t.len(), 2, "{name}: token {t:?} is not one byte");
            u8::from_str_radix(t, 16).unwrap_or_else(|_| panic!("{name}: bad hex {t:?}"))
        })
        .collect()
}

pub(crate) fn text(name: &str) -> Vec<String> {
    fenced(&format!("text {name}"))
        .lines()
        .map(|l| l.trim().to_owned())
        .filter(|l| !l.is_empty())
        .collect()
}
