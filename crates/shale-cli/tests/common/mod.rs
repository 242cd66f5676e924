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
