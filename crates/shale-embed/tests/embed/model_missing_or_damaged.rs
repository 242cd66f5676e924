//! A model directory that is missing, incomplete or damaged gives `Error::Index` with a
//! message that says how to fetch the model, never a panic.
//!
//! The damaged cases copy the real model (fetched by `scripts/fetch-model.sh`, which
//! `scripts/test.sh` runs first) and break one file of the copy.

use std::path::{Path, PathBuf};

use shale::error::Error;
use shale_embed::MiniLm;

const FILES: [&str; 3] = ["config.json", "tokenizer.json", "model.safetensors"];

fn expect_fetch_hint(dir: &Path, must_mention: &str) {
    let err = MiniLm::load(dir).expect_err("a broken model must not load");
    let msg = err.to_string();
    assert!(matches!(err, Error::Index(_)), "{msg}");
    assert!(msg.contains("scripts/fetch-model.sh"), "{msg}");
    assert!(msg.contains(must_mention), "{msg}");
}

fn real_model_dir() -> PathBuf {
    let dir = shale_embed::model_dir_from_env().unwrap();
    assert!(
        dir.join("model.safetensors").is_file(),
        "the model is not at {}: run scripts/fetch-model.sh (scripts/test.sh does)",
        dir.display()
    );
    dir
}

fn copy_of_real_model() -> tempfile::TempDir {
    let src = real_model_dir();
    let copy = tempfile::tempdir().unwrap();
    for name in FILES {
        std::fs::copy(src.join(name), copy.path().join(name)).unwrap();
    }
    copy
}

#[test]
fn missing_dir_is_an_embedding_error() {
    let dir = tempfile::tempdir().unwrap();
    expect_fetch_hint(&dir.path().join("no-such-model"), "config.json");
}

#[test]
fn each_missing_file_is_named() {
    for name in FILES {
        let copy = copy_of_real_model();
        std::fs::remove_file(copy.path().join(name)).unwrap();
        expect_fetch_hint(copy.path(), name);
    }
}

#[test]
fn truncated_weights_are_refused() {
    let copy = copy_of_real_model();
    let path = copy.path().join("model.safetensors");
    let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    file.set_len(1 << 20).unwrap();
    expect_fetch_hint(copy.path(), "1048576 bytes, expected 90868376");
}

#[test]
fn flipped_byte_in_weights_is_a_sha256_mismatch() {
    let copy = copy_of_real_model();
    let path = copy.path().join("model.safetensors");
    let mut bytes = std::fs::read(&path).unwrap();
    // Inside the JSON header: without the sha256 check this would be a parse error at best.
    bytes[20] ^= 0x01;
    std::fs::write(&path, bytes).unwrap();
    expect_fetch_hint(copy.path(), "sha256");
}

#[test]
fn damaged_tokenizer_is_a_sha256_mismatch() {
    let copy = copy_of_real_model();
    let path = copy.path().join("tokenizer.json");
    let mut bytes = std::fs::read(&path).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0x20;
    std::fs::write(&path, bytes).unwrap();
    expect_fetch_hint(copy.path(), "tokenizer.json: sha256");
}
