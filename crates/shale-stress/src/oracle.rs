//! The oracle log: what the stress process attempted and what was acknowledged, kept in
//! a file outside the process, and the expected state the driver derives from it.
//!
//! Grammar (one line per event, ASCII, written with a single `write(2)` on an `O_APPEND`
//! file so that concurrent threads never interleave inside a line):
//!
//! ```text
//! line    := pending | done | ops
//! pending := ("p " | "n ") tid " " wid (" " entry)+ "\n"
//!                                                  before Db::write; "n": without the WAL
//! done    := "d " tid " " wid "\n"                 after Db::write returned Ok
//! ops     := "o " tid " " count "\n"               operations so far (any kind)
//! entry   := "+" key_index | "-" key_index         put value(key, wid) | delete
//! ```
//!
//! Each writer thread owns the keys whose index is `tid` modulo the thread count, so per
//! key the log is in program order and each thread has at most one write pending. A last
//! line without its newline was cut by the kill before its `write(2)` finished; the write
//! it announces had not been issued, and the line is ignored.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::Path;

/// A put (`true`) or a delete (`false`) of a key index.
pub type Entry = (u32, bool);

/// One logged write: a single put or delete, or a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoggedWrite {
    pub tid: u32,
    pub wid: u64,
    pub entries: Vec<Entry>,
    /// Written to the WAL (`false`: `WriteOptions::no_wal`, durable only once flushed).
    pub wal: bool,
}

/// Appends lines to the oracle log.
#[derive(Debug)]
pub struct OracleWriter {
    file: File,
}

impl OracleWriter {
    /// Open `path` for appending, creating it.
    pub fn open(path: &Path) -> io::Result<OracleWriter> {
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        Ok(OracleWriter { file })
    }

    fn line(&self, line: &str) -> io::Result<()> {
        // One write call per line: `&File` writes straight to the descriptor.
        (&self.file).write_all(line.as_bytes())
    }

    /// Announce a write before it is issued; `wal: false` for one that skips the WAL.
    pub fn pending(&self, tid: u32, wid: u64, entries: &[Entry], wal: bool) -> io::Result<()> {
        let tag = if wal { "p" } else { "n" };
        let mut line = format!("{tag} {tid} {wid}");
        for &(k, put) in entries {
            line.push_str(if put { " +" } else { " -" });
            line.push_str(&k.to_string());
        }
        line.push('\n');
        self.line(&line)
    }

    /// Record that write `wid` of thread `tid` was acknowledged.
    pub fn done(&self, tid: u32, wid: u64) -> io::Result<()> {
        self.line(&format!("d {tid} {wid}\n"))
    }

    /// Record how many operations thread `tid` has completed.
    pub fn ops(&self, tid: u32, count: u64) -> io::Result<()> {
        self.line(&format!("o {tid} {count}\n"))
    }
}

/// What one run of the stress process left in its log.
#[derive(Debug, Default)]
pub struct RunLog {
    /// Acknowledged writes, per thread in program order (threads one after another).
    pub acked: Vec<LoggedWrite>,
    /// At most one write per thread that was issued and not acknowledged.
    pub pending: Vec<LoggedWrite>,
    /// Operations completed (the last count each thread logged).
    pub ops: u64,
}

impl RunLog {
    /// Parse the log at `path`.
    ///
    /// # Errors
    /// A line that is malformed, a done without its pending, or two pending writes in one
    /// thread: the log itself is wrong, so the run cannot be judged.
    pub fn read(path: &Path) -> Result<RunLog, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("read oracle: {e}"))?;
        RunLog::parse(&text)
    }

    pub fn parse(text: &str) -> Result<RunLog, String> {
        let mut open: BTreeMap<u32, LoggedWrite> = BTreeMap::new();
        let mut acked: BTreeMap<u32, Vec<LoggedWrite>> = BTreeMap::new();
        let mut ops: BTreeMap<u32, u64> = BTreeMap::new();
        // Only whole lines: the tail after the last newline was never finished.
        let whole = text.rfind('\n').map_or("", |end| &text[..end]);
        for line in whole.lines() {
            let bad = || format!("bad oracle line {line:?}");
            let mut parts = line.split(' ');
            let tag = parts.next().ok_or_else(bad)?;
            let tid: u32 = parts.next().and_then(|t| t.parse().ok()).ok_or_else(bad)?;
            let n: u64 = parts.next().and_then(|t| t.parse().ok()).ok_or_else(bad)?;
            match tag {
                "p" | "n" => {
                    let entries = parts
                        .map(|e| {
                            let (put, k) = match e.split_at_checked(1) {
                                Some(("+", k)) => (true, k),
                                Some(("-", k)) => (false, k),
                                _ => return None,
                            };
                            Some((k.parse().ok()?, put))
                        })
                        .collect::<Option<Vec<Entry>>>()
                        .ok_or_else(bad)?;
                    let w = LoggedWrite {
                        tid,
                        wid: n,
                        entries,
                        wal: tag == "p",
                    };
                    if let Some(old) = open.insert(tid, w) {
                        return Err(format!("thread {tid} has two pending writes: {old:?}"));
                    }
                }
                "d" => match open.remove(&tid) {
                    Some(w) if w.wid == n => acked.entry(tid).or_default().push(w),
                    other => return Err(format!("done {n} of thread {tid} after {other:?}")),
                },
                "o" => {
                    ops.insert(tid, n);
                }
                _ => return Err(bad()),
            }
        }
        Ok(RunLog {
            acked: acked.into_values().flatten().collect(),
            pending: open.into_values().collect(),
            ops: ops.values().sum(),
        })
    }
}

/// The state the database must hold: per key index, the write id of its live value.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Expected {
    pub live: BTreeMap<u32, u64>,
}

impl Expected {
    /// Apply one write.
    pub fn apply(&mut self, w: &LoggedWrite) {
        for &(k, put) in &w.entries {
            if put {
                self.live.insert(k, w.wid);
            } else {
                self.live.remove(&k);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_pending_done_and_a_cut_last_line() {
        let log = "p 0 10 +3 -5\nn 1 11 +4\nd 0 10\no 0 7\np 0 12 +3\nd 0 12\no 1 2\np 0 13 -";
        let run = RunLog::parse(log).unwrap();
        assert_eq!(run.acked.len(), 2);
        assert_eq!(run.acked[0].entries, vec![(3, true), (5, false)]);
        assert!(run.acked[0].wal);
        assert_eq!(
            run.pending,
            vec![LoggedWrite {
                tid: 1,
                wid: 11,
                entries: vec![(4, true)],
                wal: false,
            }]
        );
        assert_eq!(run.ops, 9);
        assert!(RunLog::parse("p 0 1 +1\np 0 2 +2\n").is_err());
        assert!(RunLog::parse("d 0 1\n").is_err());
        assert!(RunLog::parse("p 0 1 *1\n").is_err());
    }
}
