//! Running the built `shale` binary on a temporary database.

#![allow(dead_code)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    fn from(out: Output) -> Run {
        Run {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8(out.stdout).expect("stdout is UTF-8"),
            stderr: String::from_utf8(out.stderr).expect("stderr is UTF-8"),
        }
    }

    /// Assert success and return stdout.
    pub fn ok(self) -> String {
        assert_eq!(self.code, 0, "stderr: {}", self.stderr);
        self.stdout
    }
}

/// A temporary directory with a database path inside it.
pub struct TestDb {
    pub tmp: tempfile::TempDir,
    pub db: PathBuf,
}

impl TestDb {
    pub fn new() -> TestDb {
        let tmp = tempfile::tempdir().unwrap();
        let db = tmp.path().join("db");
        TestDb { tmp, db }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.tmp.path().join(name)
    }

    /// `shale --db DIR args...`
    pub fn run(&self, args: &[&str]) -> Run {
        let mut full = vec!["--db", self.db.to_str().unwrap()];
        full.extend_from_slice(args);
        shale(&full)
    }

    /// `shale --db DIR args...` with `input` on stdin.
    pub fn run_stdin(&self, args: &[&str], input: &[u8]) -> Run {
        let mut full = vec!["--db", self.db.to_str().unwrap()];
        full.extend_from_slice(args);
        let mut child = Command::new(env!("CARGO_BIN_EXE_shale"))
            .args(&full)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(input).unwrap();
        Run::from(child.wait_with_output().unwrap())
    }

    /// The files of the database directory with `ext`, sorted.
    pub fn files(&self, ext: &str) -> Vec<PathBuf> {
        files(&self.db, ext)
    }
}

pub fn files(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .collect();
    v.sort();
    v
}

/// `shale args...`
pub fn shale(args: &[&str]) -> Run {
    Run::from(
        Command::new(env!("CARGO_BIN_EXE_shale"))
            .args(args)
            .output()
            .unwrap(),
    )
}

/// Write `rows` as a version 1.0 `.npy` file, as NumPy's `np.save` lays it out: `descr` one of
/// `<f4`, `<f8`, `>f4`, `>f8`, `<i4` (each value cast); Fortran order writes column by
/// column. `shape` defaults to `(rows, cols)`.
pub fn write_npy(path: &Path, descr: &str, fortran: bool, shape: Option<&str>, rows: &[Vec<f32>]) {
    let cols = rows.first().map_or(0, Vec::len);
    let shape = shape.map_or_else(|| format!("({}, {cols})", rows.len()), str::to_owned);
    let order = if fortran { "True" } else { "False" };
    let mut header =
        format!("{{'descr': '{descr}', 'fortran_order': {order}, 'shape': {shape}, }}");
    let unpadded = 10 + header.len() + 1;
    header.push_str(&" ".repeat(unpadded.next_multiple_of(64) - unpadded));
    header.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&u16::try_from(header.len()).unwrap().to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    let elements: Vec<f32> = if fortran {
        (0..cols)
            .flat_map(|c| rows.iter().map(move |r| r[c]))
            .collect()
    } else {
        rows.iter().flatten().copied().collect()
    };
    for x in elements {
        match descr {
            "<f4" => out.extend_from_slice(&x.to_le_bytes()),
            ">f4" => out.extend_from_slice(&x.to_be_bytes()),
            "<f8" => out.extend_from_slice(&f64::from(x).to_le_bytes()),
            ">f8" => out.extend_from_slice(&f64::from(x).to_be_bytes()),
            "<i4" => out.extend_from_slice(&(x as i32).to_le_bytes()),
            other => panic!("write_npy: no {other}"),
        }
    }
    std::fs::write(path, out).unwrap();
}

/// `n` vectors of `dim` dimensions, the same every run, components in `[-1, 1)`: each is a
/// hash of its position (SplitMix64's finaliser), so no two rows point the same way.
pub fn test_vectors(n: usize, dim: usize) -> Vec<Vec<f32>> {
    let component = |i: usize, j: usize| {
        let mut h = ((i as u64) << 32 | j as u64).wrapping_add(0x9e37_79b9_7f4a_7c15);
        h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        h ^= h >> 31;
        (h >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    };
    (0..n)
        .map(|i| (0..dim).map(|j| component(i, j)).collect())
        .collect()
}

/// A vector as the JSON array `search --vector` reads.
pub fn json_vector(v: &[f32]) -> String {
    serde_json::to_string(v).unwrap()
}

/// The options of a text index `notes` over `n:` with the hash embedder (no model needed).
pub const NOTES_HASH: [&str; 6] = [
    "--index",
    "notes",
    "--index-prefix",
    "n:",
    "--embedder",
    "hash",
];

/// `args` after the index options `index`.
pub fn with_index<'a>(index: &[&'a str], args: &[&'a str]) -> Vec<&'a str> {
    let mut full = index.to_vec();
    full.extend_from_slice(args);
    full
}

/// Keys of a search's tab-separated output, best first.
pub fn keys(out: &str) -> Vec<String> {
    out.lines()
        .map(|l| l.split('\t').nth(2).expect("a key column").to_owned())
        .collect()
}
