//! The search layer's integration tests, one module per subject, in one test binary. One
//! module's tests: `cargo test -p shale-search --test search <module>::`.

mod corruption_matrix;
mod crash_records;
mod format_examples;
#[cfg(feature = "fuzzing")]
mod fuzz_smoke;
mod hybrid_oracle;
mod keyword_oracle;
mod semantic;
mod semantic_engine;
mod semantic_index;
mod semantic_persistence;
mod semantic_restart;
mod semantic_support;
mod split_corpus;
mod support;
mod text_index;
