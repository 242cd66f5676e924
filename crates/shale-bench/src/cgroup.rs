//! A memory cgroup per engine process, for the workloads that run with less memory than
//! the data (`--memory-limit-mib`).
//!
//! The parent makes a fresh cgroup for each child; the child moves itself into it once its
//! database is loaded (see `Runner::enter_memory_limit`), after dropping the page cache,
//! and the parent removes the cgroup once the child has exited. From then on the page cache
//! of the files the engine reads, its new allocations and, under cgroup v1 (charges move
//! with the process), its heap count against the limit. When the group passes its limit the kernel reclaims its page cache first,
//! so reads beyond the limit come from the disk: `/proc/self/io`'s `read_bytes` counts them.
//! cgroup v2 (`memory.max`) and the v1 memory controller (`memory.limit_in_bytes`) are both
//! handled; creating a cgroup needs root.

use std::path::{Path, PathBuf};

use crate::engine::BenchResult;

const V2_ROOT: &str = "/sys/fs/cgroup";
const V1_ROOT: &str = "/sys/fs/cgroup/memory";

/// A memory cgroup made by this process, removed on drop.
#[derive(Debug)]
pub struct MemoryCgroup {
    path: PathBuf,
}

impl MemoryCgroup {
    /// Make the cgroup `name` with a memory limit of `limit_bytes` (swap included where
    /// the kernel lets it be limited).
    pub fn create(name: &str, limit_bytes: u64) -> BenchResult<MemoryCgroup> {
        let v2 = std::fs::read_to_string(Path::new(V2_ROOT).join("cgroup.controllers"))
            .is_ok_and(|c| c.split_whitespace().any(|c| c == "memory"));
        let (root, files): (&str, &[&str]) = if v2 {
            (V2_ROOT, &["memory.max", "memory.swap.max"])
        } else {
            (
                V1_ROOT,
                &["memory.limit_in_bytes", "memory.memsw.limit_in_bytes"],
            )
        };
        let path = Path::new(root).join(name);
        std::fs::create_dir(&path).map_err(|e| {
            format!(
                "cannot create the memory cgroup {} ({e}); --memory-limit-mib needs root and \
                 a memory controller",
                path.display()
            )
        })?;
        let group = MemoryCgroup { path };
        let [limit, swap] = files else {
            return Err("cgroup: no limit file".into());
        };
        std::fs::write(group.path.join(limit), limit_bytes.to_string())?;
        if v2 {
            // No swap: a limit that swapping could get round would not be a limit.
            let _ = std::fs::write(group.path.join(swap), "0");
        } else {
            // The joining process's pages (anonymous and file) move into the group.
            let _ = std::fs::write(group.path.join("memory.move_charge_at_immigrate"), "3");
            // memsw (memory + swap) exists only with swap accounting; it must be set after
            // the memory limit and may not be below it.
            let _ = std::fs::write(group.path.join(swap), limit_bytes.to_string());
        }
        Ok(group)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The largest memory use the kernel recorded for the group, if it reports one.
    pub fn peak_bytes(&self) -> Option<u64> {
        ["memory.peak", "memory.max_usage_in_bytes"]
            .iter()
            .find_map(|f| std::fs::read_to_string(self.path.join(f)).ok())
            .and_then(|s| s.trim().parse().ok())
    }
}

impl Drop for MemoryCgroup {
    fn drop(&mut self) {
        // Empty once the child has exited; a failure leaves a directory to remove by hand.
        if let Err(e) = std::fs::remove_dir(&self.path) {
            eprintln!("cgroup: could not remove {}: {e}", self.path.display());
        }
    }
}

/// Move this process into the cgroup at `path` (what a child does first).
pub fn join(path: &Path) -> BenchResult<()> {
    std::fs::write(path.join("cgroup.procs"), std::process::id().to_string())
        .map_err(|e| format!("cannot join the cgroup {}: {e}", path.display()).into())
}
