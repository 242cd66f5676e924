//! `index-reopen-{ds}` and `index-restart-{ds}`: how long an index of the data set's
//! vectors takes to open again, after a clean close and after SIGKILL.
//!
//! The filtered workloads leave a database with a semantic index over every vector. It is
//! closed (which checkpoints the graph) and opened again: `index-reopen`. Then a child
//! process (`shale-bench index-crash-child`, this binary) opens it, writes `EXTRA` more
//! vectors, waits until they are indexed, says so and is killed with SIGKILL before it
//! closes: its inserts are in the database and the vector file but not in the graph's last
//! checkpoint (its background checkpoints wait for 50,000 inserts or 60 s). The parent opens
//! the index again: `index-restart`, whose note gives `VectorIndexRecovery` (nodes taken over from
//! the checkpoint, vectors inserted again) and the open's index work (`open_micros`).

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Instant;

use shale::{Db, WriteBatch, WriteOptions};
use shale_search::semantic::{vector_value, VectorIndex, VectorIndexOptions, VectorIndexRecovery};

use super::dataset::Dataset;
use super::filter::{key, FilterIndex, INDEX};
use super::record::{Emit, VectorRecord};
use crate::engine::BenchResult;

/// Vectors the child writes after the last checkpoint.
const EXTRA: usize = 1_000;

/// What the child is told.
#[derive(clap::Args, Debug)]
pub struct ChildArgs {
    /// The database with index `bench`.
    #[arg(long)]
    dir: PathBuf,
    /// The vectors' dimension.
    #[arg(long)]
    dim: usize,
    /// The first key to write (the parent's vectors are below it).
    #[arg(long)]
    first: u32,
}

/// The child: write `EXTRA` vectors past `first`, wait until they are indexed, print
/// `indexed` and wait to be killed.
pub fn child(args: &ChildArgs) -> BenchResult<()> {
    let db = Arc::new(Db::open(&args.dir, shale::Options::default())?);
    let index = VectorIndex::open_existing(&db, INDEX, None)?;
    let mut batch = WriteBatch::new();
    for (i, v) in extra_vectors(args.dim).iter().enumerate() {
        let id = args.first + u32::try_from(i).unwrap_or(0);
        batch.put(key(id), vector_value(v, b""));
    }
    db.write(batch, WriteOptions::default())?;
    index.wait_indexed()?;
    println!("indexed");
    // The parent kills this process; the sleep only bounds a parent that never does.
    std::thread::sleep(std::time::Duration::from_secs(120));
    Err("the parent did not kill the crash child".into())
}

/// `EXTRA` deterministic vectors of `dim` components in [-0.5, 0.5).
fn extra_vectors(dim: usize) -> Vec<Vec<f32>> {
    let mut s = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        (s >> 40) as f32 / (1u64 << 24) as f32 - 0.5
    };
    (0..EXTRA)
        .map(|_| (0..dim).map(|_| next()).collect())
        .collect()
}

/// Close the filtered workloads' index and database, open them again, then crash a child
/// on them and open them once more, recording both opens.
pub fn run(
    ds: &Dataset,
    filtered: FilterIndex,
    note_params: &str,
    emit: &mut Emit<'_>,
) -> BenchResult<()> {
    let FilterIndex {
        db,
        index,
        dir,
        opts,
    } = filtered;
    close(db, index)?;
    reopen(ds, &dir, opts.clone(), note_params, emit)?;
    crash_child(ds, &dir)?;
    restart(ds, &dir, opts, note_params, emit)
}

/// `index-reopen`: open the closed index again and close it.
fn reopen(
    ds: &Dataset,
    dir: &Path,
    opts: VectorIndexOptions,
    note_params: &str,
    emit: &mut Emit<'_>,
) -> BenchResult<()> {
    let n = ds.len();
    // A clean reopen: the checkpoint written at close is taken over whole.
    let (db, index, secs, r) = open(dir, opts, "reopen")?;
    emit(
        VectorRecord::new("shale", &format!("index-reopen-{}", ds.name), n as u64, secs).note(
            format!(
                "{note_params}; Db::open + VectorIndex::open of an index of {n} vectors after a clean close (VectorIndex::open took {secs:.3} s; its index work, VectorIndexRecovery::open_micros, {:.3} s); {r:?}",
                r.open_micros as f64 / 1e6
            ),
        ),
    );
    close(db, index)
}

/// Run the crash child on the closed index and kill it once its vectors are indexed.
fn crash_child(ds: &Dataset, dir: &Path) -> BenchResult<()> {
    let n = ds.len();
    // A crash: the child's inserts are past the checkpoint.
    let first = u32::try_from(n).unwrap_or(u32::MAX);
    let mut child = Command::new(std::env::current_exe()?)
        .args(["index-crash-child", "--dir"])
        .arg(dir)
        .args(["--dim", &ds.dim.to_string(), "--first", &first.to_string()])
        .stdout(Stdio::piped())
        .spawn()?;
    let said = {
        let out = child.stdout.take().ok_or("the crash child has no stdout")?;
        let mut lines = std::io::BufReader::new(out).lines();
        lines.any(|l| l.is_ok_and(|l| l == "indexed"))
    };
    child.kill()?;
    child.wait()?;
    if !said {
        return Err("the crash child ended before it indexed its vectors".into());
    }
    Ok(())
}

/// `index-restart`: open the index the crash child left, check what it recovered, close it.
fn restart(
    ds: &Dataset,
    dir: &Path,
    opts: VectorIndexOptions,
    note_params: &str,
    emit: &mut Emit<'_>,
) -> BenchResult<()> {
    let n = ds.len();
    let (db, index, secs, r) = open(dir, opts, "restart after SIGKILL")?;
    let expected = (r.graph_nodes_reused, r.vectors_reinserted, r.texts_to_embed);
    if expected != (n, EXTRA, 0) {
        return Err(format!(
            "after SIGKILL the index took over {} nodes and inserted {} vectors again, not {n} and {EXTRA}: {r:?}",
            r.graph_nodes_reused, r.vectors_reinserted
        )
        .into());
    }
    if index.len()? != n + EXTRA {
        return Err("after SIGKILL the index lost vectors".into());
    }
    emit(
        VectorRecord::new(
            "shale",
            &format!("index-restart-{}", ds.name),
            (n + EXTRA) as u64,
            secs,
        )
        .note(format!(
            "{note_params}; Db::open + VectorIndex::open after SIGKILL of a process that had written {EXTRA} vectors past the graph's last checkpoint, to an index of {n} (VectorIndex::open took {secs:.3} s; its index work, VectorIndexRecovery::open_micros, {:.3} s); {r:?}",
            r.open_micros as f64 / 1e6
        )),
    );
    close(db, index)
}

/// Open the database at `dir` and its index, timing both, and print the time as `what`:
/// the handles, the seconds and what the index recovered.
fn open(
    dir: &Path,
    opts: VectorIndexOptions,
    what: &str,
) -> BenchResult<(Arc<Db>, VectorIndex, f64, VectorIndexRecovery)> {
    let started = Instant::now();
    let db = Arc::new(Db::open(dir, shale::Options::default())?);
    let index = VectorIndex::open(&db, INDEX, opts)?;
    let secs = started.elapsed().as_secs_f64();
    let r = index.recovery();
    eprintln!(
        "   {:<11} {what}: {secs:.3} s (index work {:.3} s), {r:?}",
        "shale",
        r.open_micros as f64 / 1e6
    );
    Ok((db, index, secs, r))
}

/// Close the index, then its database.
fn close(db: Arc<Db>, index: VectorIndex) -> BenchResult<()> {
    drop(index);
    db.close()?;
    drop(db);
    Ok(())
}
