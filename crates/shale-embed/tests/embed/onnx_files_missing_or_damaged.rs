//! The ONNX Runtime embedder's files (`tokenizer.json`, `model.onnx`,
//! `libonnxruntime.so.1.31.1`) missing or damaged give `Error::Index` naming the file and
//! saying to run `scripts/fetch-model.sh`, never a panic, and never load a library that is
//! not the pinned one.
//!
//! No test in this file loads ONNX Runtime successfully: the runtime, once loaded, serves
//! the whole process (see `onnx.rs`), and a missing library must be noticed here.

use std::path::Path;

use shale::error::Error;
use shale_embed::OnnxMiniLm;

const TOKENIZER: &str = "tokenizer.json";
const MODEL: &str = "model.onnx";
const LIBRARY: &str = "libonnxruntime.so.1.31.1";

fn expect_fetch_hint(dir: &Path, must_mention: &str) {
    let err = OnnxMiniLm::load(dir).expect_err("broken files must not load");
    let msg = err.to_string();
    assert!(matches!(err, Error::Index(_)), "{msg}");
    assert!(msg.contains("scripts/fetch-model.sh"), "{msg}");
    assert!(msg.contains(must_mention), "{msg}");
}

/// A directory with `names` copied from the real model directory (scripts/fetch-model.sh,
/// which scripts/test.sh runs first).
fn copy_of(names: &[&str]) -> tempfile::TempDir {
    let src = shale_embed::model_dir_from_env().unwrap();
    let copy = tempfile::tempdir().unwrap();
    for name in names {
        let from = src.join(name);
        assert!(
            from.is_file(),
            "{} is missing: run scripts/fetch-model.sh (scripts/test.sh does)",
            from.display()
        );
        std::fs::copy(from, copy.path().join(name)).unwrap();
    }
    copy
}

#[test]
fn empty_dir_names_the_tokenizer() {
    let dir = tempfile::tempdir().unwrap();
    expect_fetch_hint(dir.path(), TOKENIZER);
}

#[test]
fn missing_model_is_named() {
    let copy = copy_of(&[TOKENIZER, LIBRARY]);
    expect_fetch_hint(copy.path(), MODEL);
}

#[test]
fn missing_library_is_named() {
    let copy = copy_of(&[TOKENIZER, MODEL]);
    expect_fetch_hint(copy.path(), LIBRARY);
}

#[test]
fn flipped_byte_in_model_is_a_sha256_mismatch() {
    let copy = copy_of(&[TOKENIZER, MODEL, LIBRARY]);
    let path = copy.path().join(MODEL);
    let mut bytes = std::fs::read(&path).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x01;
    std::fs::write(&path, bytes).unwrap();
    expect_fetch_hint(copy.path(), "model.onnx: sha256");
}

#[test]
fn truncated_library_is_refused_before_it_is_loaded() {
    let copy = copy_of(&[TOKENIZER, MODEL, LIBRARY]);
    let path = copy.path().join(LIBRARY);
    let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    file.set_len(4096).unwrap();
    expect_fetch_hint(copy.path(), "4096 bytes, expected 29352200");
}
