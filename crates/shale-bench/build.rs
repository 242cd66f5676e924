//! Records the commit the benchmark binary is built from (results name it), so that a
//! binary run after later commits, or from another directory, still says what it measured.

use std::process::Command;

fn main() {
    let commit = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=SHALE_BENCH_BUILT_FROM={commit}");
    // A commit or checkout rewrites HEAD or the index; nothing else changes the answer.
    for path in ["../../.git/HEAD", "../../.git/index"] {
        println!("cargo:rerun-if-changed={path}");
    }
}
