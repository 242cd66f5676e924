//! The files of the all-MiniLM-L6-v2 model, where they are looked for, and the check that
//! they are byte for byte the ones `scripts/fetch-model.sh` fetched or made: three for the
//! candle embedder (config, tokenizer, weights), and for the ONNX Runtime one the tokenizer,
//! `model.onnx` (written from the same weights) and the runtime library itself.
//!
//! The sizes and sha256 sums here are the same as in `scripts/fetch-model.sh`; a new model
//! or runtime version changes both places.
//!
//! Every file is read whole and hashed at every load. Measured on the project's 2-core Xeon
//! (which has the SHA extensions `sha2` uses): 77 ms of CPU for the 87 MiB of weights, about
//! 100 ms of wall time on a busy machine, once per load. A cheaper
//! check (size plus a marker file written after one full check) would miss a weight damaged
//! in place, which does not fail to load: it silently gives vectors that no longer match the
//! ones already stored in an index.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use shale::error::{Error, Result};

/// The environment variable that names the model directory.
pub const MODEL_DIR_ENV: &str = "SHALE_MODEL_DIR";

/// The environment variable that names the cache root (as in `scripts/fetch-model.sh`).
pub const CACHE_ENV: &str = "SHALE_CACHE";

/// One file of the model as fetched.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ModelFile {
    pub(crate) name: &'static str,
    pub(crate) size_bytes: u64,
    pub(crate) sha256: &'static str,
}

pub(crate) const CONFIG: ModelFile = ModelFile {
    name: "config.json",
    size_bytes: 612,
    sha256: "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
};

pub(crate) const TOKENIZER: ModelFile = ModelFile {
    name: "tokenizer.json",
    size_bytes: 466_247,
    sha256: "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
};

pub(crate) const WEIGHTS: ModelFile = ModelFile {
    name: "model.safetensors",
    size_bytes: 90_868_376,
    sha256: "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
};

/// all-MiniLM-L6-v2 as an ONNX graph, written from [`WEIGHTS`] by `scripts/minilm-to-onnx.py`.
pub(crate) const ONNX_MODEL: ModelFile = ModelFile {
    name: "model.onnx",
    size_bytes: 90_282_146,
    sha256: "4535dacfe5a89f8b0e50ad492e9a99390626344c2aaea0cc9cdcca1849dca081",
};

/// ONNX Runtime 1.31.1 for x86-64 Linux, from the PyPI wheel `onnxruntime==1.31.1`
/// (cp311, manylinux_2_28). Checked before it is loaded: loading runs its code.
pub(crate) const ORT_LIBRARY: ModelFile = ModelFile {
    name: "libonnxruntime.so.1.31.1",
    size_bytes: 29_352_200,
    sha256: "fc44112fbe06d7d689c57e11d3862031f64711007e4ee020f8eed5185fd2c1d3",
};

/// Where `scripts/fetch-model.sh` puts the model when `SHALE_MODEL_DIR` is not set:
/// `${SHALE_CACHE:-$HOME/.cache/shale}/models/all-MiniLM-L6-v2`. `None` when neither
/// `SHALE_CACHE` nor `HOME` is set.
pub fn default_model_dir() -> Option<PathBuf> {
    let cache = match std::env::var_os(CACHE_ENV) {
        Some(cache) if !cache.is_empty() => PathBuf::from(cache),
        _ => {
            let home = std::env::var_os("HOME").filter(|h| !h.is_empty())?;
            PathBuf::from(home).join(".cache").join("shale")
        }
    };
    Some(cache.join("models").join("all-MiniLM-L6-v2"))
}

/// The model directory to use: `SHALE_MODEL_DIR` if set, else [`default_model_dir`].
///
/// # Errors
/// `Error::Index` when neither can be found.
pub fn model_dir_from_env() -> Result<PathBuf> {
    match std::env::var_os(MODEL_DIR_ENV) {
        Some(dir) if !dir.is_empty() => Ok(PathBuf::from(dir)),
        _ => default_model_dir().ok_or_else(|| {
            Error::Index(format!(
                "no model directory: set {MODEL_DIR_ENV}, {CACHE_ENV} or HOME, \
                 then run scripts/fetch-model.sh"
            ))
        }),
    }
}

/// The error for a model file that is missing or not the one fetched.
pub(crate) fn damaged(path: &Path, problem: impl std::fmt::Display) -> Error {
    Error::Index(format!(
        "{}: {problem}; run scripts/fetch-model.sh to fetch the model \
         (it prints the directory; point {MODEL_DIR_ENV} at it if it is not the default)",
        path.display()
    ))
}

/// Read `file` from `dir` whole, and check its size and sha256.
///
/// # Errors
/// `Error::Index`, saying how to fetch the model, when the file cannot be read or is
/// not the one fetched.
pub(crate) fn read_verified(dir: &Path, file: ModelFile) -> Result<Vec<u8>> {
    let path = dir.join(file.name);
    let bytes = std::fs::read(&path).map_err(|e| damaged(&path, format!("cannot read: {e}")))?;
    let size = u64::try_from(bytes.len()).unwrap_or(u64::MAX);
    if size != file.size_bytes {
        return Err(damaged(
            &path,
            format!("{size} bytes, expected {}", file.size_bytes),
        ));
    }
    let got = hex(&Sha256::digest(&bytes));
    if got != file.sha256 {
        return Err(damaged(
            &path,
            format!("sha256 {got}, expected {}", file.sha256),
        ));
    }
    Ok(bytes)
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes.iter().fold(String::with_capacity(64), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_of_sha256_of_empty_input() {
        assert_eq!(
            hex(&Sha256::digest(b"")),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }

    #[test]
    fn wrong_size_names_the_file_and_the_fix() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(CONFIG.name), b"{}").unwrap();
        let err = read_verified(dir.path(), CONFIG).unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, Error::Index(_)), "{msg}");
        assert!(msg.contains("config.json: 2 bytes, expected 612"), "{msg}");
        assert!(msg.contains("scripts/fetch-model.sh"), "{msg}");
    }

    #[test]
    fn right_size_wrong_bytes_is_a_sha256_mismatch() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(CONFIG.name), [b' '; 612]).unwrap();
        let msg = read_verified(dir.path(), CONFIG).unwrap_err().to_string();
        assert!(msg.contains("sha256"), "{msg}");
        assert!(msg.contains(CONFIG.sha256), "{msg}");
    }
}
