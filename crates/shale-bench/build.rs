//! Records the commit the benchmark binary is built from (results name it), so that a
//! binary run after later commits, or from another directory, still says what it measured.
//! "-dirty" when tracked files differed from that commit at build time (as far as a build
//! script can see: it runs again when HEAD, the branch or the index moves, not on every
//! edit, so an edit made after the last of those and never staged is not seen).

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    Command::new("git")
        .args(args)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
}

fn main() {
    let commit = git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".into());
    let dirty =
        git(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty());
    let suffix = if dirty { "-dirty" } else { "" };
    println!("cargo:rustc-env=SHALE_BENCH_BUILT_FROM={commit}{suffix}");
    // What a commit, a checkout or a staging rewrites (paths as git resolves them, which
    // also holds in a worktree, where `.git` is a file).
    let branch = git(&["symbolic-ref", "-q", "HEAD"]);
    let watched = ["HEAD", "index", "packed-refs"]
        .into_iter()
        .map(str::to_string)
        .chain(branch);
    for name in watched {
        // Only files that exist: cargo runs this script on every build for a missing one.
        let path = git(&["rev-parse", "--path-format=absolute", "--git-path", &name]);
        if let Some(path) = path.filter(|p| std::path::Path::new(p).exists()) {
            println!("cargo:rerun-if-changed={path}");
        }
    }
}
