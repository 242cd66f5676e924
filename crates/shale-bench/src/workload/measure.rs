//! One workload from its name to its record: what it needs before it runs (a fresh or
//! loaded database, a durability mode, threads), the `Runner` method that measures it, and
//! the process's counters around that.

use super::dbbench::{Probe, CHECKPOINTS};
use super::*;

impl Runner {
    /// Run workload `name` and emit its record (`lab`: its records); a workload the engine
    /// cannot run is skipped with a line on stderr.
    pub(super) fn run_one(&mut self, name: &str, emit: &mut dyn FnMut(&Record)) -> BenchResult<()> {
        if name == "lab" {
            return self.lab(emit);
        }
        let Some((durability, threads)) = self.prepare(name)? else {
            return Ok(());
        };
        metrics::reset_peak_rss();
        let io0 = metrics::io_write_bytes();
        let read0 = metrics::io_read_bytes();
        let cpu0 = metrics::cpu_seconds();
        let pb = self.progress(name, self.ops_of(name));
        let Some(out) = self.measure(name, durability, threads, &pb)? else {
            return Ok(());
        };
        pb.finish_and_clear();
        let wrote = out.user_bytes_written > 0;
        let mut settle = None;
        if wrote {
            // Background work caused by the writes counts towards write amplification.
            let t0 = std::time::Instant::now();
            self.engine()?.wait_background()?;
            settle = Some(t0.elapsed().as_secs_f64());
        }
        let io_bytes = metrics::io_write_bytes().saturating_sub(io0);
        let cpu = metrics::cpu_seconds() - cpu0;
        let disk = metrics::dir_bytes(&self.dir);
        let mut rec = self.record(name, durability, threads, &out, wrote, io_bytes, disk, cpu);
        rec.settle_seconds = settle;
        rec.disk_read_bytes = Some(metrics::io_read_bytes().saturating_sub(read0));
        rec.memory_limit_bytes = self.cfg.memory_limit_bytes;
        emit(&rec);
        Ok(())
    }

    /// Get the database `name` runs on ready: fresh, or loaded with what it reads, and the
    /// memory limit entered. Its durability and threads, or `None` (said on stderr) when
    /// the engine has no such durability mode or cannot be shared between the threads.
    fn prepare(&mut self, name: &str) -> BenchResult<Option<(Durability, usize)>> {
        let durability = match name {
            "fillrandom-nowal" => Durability::NoWal,
            n if n == "fillsync" || sync_threads(n).is_some() => Durability::Sync,
            _ => Durability::Buffered,
        };
        if is_fresh(name) {
            self.fresh()?;
        }
        if !self.engine()?.supports(durability) {
            self.skipped(name, &format!("the engine has no {durability:?} mode"));
            return Ok(None);
        }
        let threads = match name {
            n if sync_threads(n).is_some() => sync_threads(n).unwrap_or(1),
            "readwhilewriting" | "snapshotwhilewriting" | "snapshotcreatewhilewriting" => 2,
            "readrandom" | "readmissing" | "multiget" | "seekrandom" | "ycsb-a" | "ycsb-b"
            | "ycsb-c" | "ycsb-d" | "ycsb-e" | "ycsb-f" => self.cfg.threads,
            _ => 1,
        };
        if threads > 1 && self.engine()?.shared().is_none() {
            self.skipped(name, "the engine cannot be shared between threads");
            return Ok(None);
        }
        match name {
            "readrandom"
            | "readmissing"
            | "multiget"
            | "seekrandom"
            | "readseq"
            | "checkpoint"
            | "overwrite"
            | "readwhilewriting"
            | "snapshotwhilewriting"
            | "snapshotcreatewhilewriting"
            | "deleterandom"
            | "deleterange" => self.ensure_keys()?,
            n if n.starts_with("ycsb-") && n != "ycsb-load" => {
                self.ensure_ycsb()?;
            }
            _ => {}
        }
        if !is_fresh(name) {
            self.enter_memory_limit()?;
        }
        Ok(Some((durability, threads)))
    }

    /// The operations workload `name` does: its progress bar's length.
    fn ops_of(&self, name: &str) -> u64 {
        match name {
            "fillsync" => self.cfg.sync_num,
            n if sync_threads(n).is_some() => self.cfg.sync_num,
            n if n.starts_with("ycsb-") && n != "ycsb-load" => self.cfg.ycsb_ops,
            "ycsb-load" => self.cfg.ycsb_records,
            "checkpoint" => CHECKPOINTS as u64,
            _ => self.cfg.num,
        }
    }

    /// Run the method of workload `name`; `None` (said on stderr) when the engine lacks
    /// the call it times.
    fn measure(
        &mut self,
        name: &str,
        durability: Durability,
        threads: usize,
        pb: &ProgressBar,
    ) -> BenchResult<Option<Outcome>> {
        let out = match name {
            "fillseq" => self.fill(false, durability, pb)?,
            "fillrandom" | "fillrandom-nowal" => self.fill(true, durability, pb)?,
            "fillbatch" => self.fill_batch(pb)?,
            "fillkeyspaces" => return self.or_skip(name, "keyspaces", Self::fill_keyspaces, pb),
            "fillsync" => self.fill_sync(1, pb)?,
            n if sync_threads(n).is_some() => self.fill_sync(threads, pb)?,
            "overwrite" => self.overwrite(pb)?,
            "readrandom" => self.read(false, pb)?,
            "readmissing" => self.read(true, pb)?,
            "multiget" => self.multi_get(pb)?,
            "seekrandom" => self.seek_random(pb)?,
            "readseq" => self.read_seq(pb)?,
            "checkpoint" => return self.or_skip(name, "checkpoints", Self::checkpoints, pb),
            "readwhilewriting" => self.read_while_writing(Probe::Get, pb)?,
            "snapshotwhilewriting" | "snapshotcreatewhilewriting" => {
                if self.engine()?.snapshot_create().is_none() {
                    self.skipped(name, "the engine has no snapshots");
                    return Ok(None);
                }
                let probe = if name == "snapshotwhilewriting" {
                    Probe::SnapshotGet
                } else {
                    Probe::SnapshotCreate
                };
                self.read_while_writing(probe, pb)?
            }
            "deleterandom" => self.delete_random(pb)?,
            "deleterange" => return self.or_skip(name, "range delete", Self::delete_ranges, pb),
            "ycsb-load" => self.ycsb_load(pb)?,
            n => match n.strip_prefix("ycsb-").and_then(|c| c.chars().next()) {
                Some(c @ 'a'..='f') => self.ycsb_run(c, pb)?,
                _ => return Err(format!("unknown workload {name:?}").into()),
            },
        };
        Ok(Some(out))
    }

    /// Run `method`, a workload that needs `what` of the engine; if it has none, say that
    /// `name` is skipped.
    fn or_skip(
        &mut self,
        name: &str,
        what: &str,
        method: fn(&mut Runner, &ProgressBar) -> BenchResult<Option<Outcome>>,
        pb: &ProgressBar,
    ) -> BenchResult<Option<Outcome>> {
        let out = method(self, pb)?;
        if out.is_none() {
            self.skipped(name, &format!("the engine has no {what}"));
        }
        Ok(out)
    }

    fn skipped(&self, name: &str, why: &str) {
        eprintln!("[{}] {name}: skipped, {why}", self.engine_name);
    }
}
