//! The `shale` command line's integration tests, one module per subject, in one test
//! binary. One module's tests: `cargo test -p shale-cli --test cli <module>::`.

mod common;
mod files_and_stats;
mod import_export;
mod keyword_search;
mod kv_commands;
mod server;
mod vectors_import_and_search;
