//! `shale`: a thin command-line shell over the Shale library, in the spirit of LevelDB's
//! `leveldbutil` and RocksDB's `ldb`. Every command is a few library calls; the only logic
//! here is parsing arguments and formatting output.
//!
//! - `args.rs`: the command line as clap parses it, which every command reads; `open.rs`:
//!   opening the database it names
//! - `kv.rs`: put, get, del, cas, scan, export; `admin.rs`: keyspaces, define-index, flush,
//!   compact, checkpoint; `remote.rs`: put, get, del, cas, scan, search, import, index
//!   definitions and membership over a replicated server (`--server`)
//! - `import.rs`: bulk load in write batches, with a progress bar; `vectors.rs`: vectors
//!   in (`.npy` and JSON lines imports, query vectors; the `.npy` reader is `shale-npy`)
//! - `index.rs`: which semantic index a command opens; `index_stats.rs`: `index-stats`;
//!   `search.rs`: search it by text or vector, by keywords (a text index) or both
//!   (hybrid); `embedder.rs`: which model embeds its text
//! - `stats.rs`: the tree's shape and the engine's counters
//! - `dump.rs`: SSTable, WAL and MANIFEST contents; `verify` and `repair`
//! - `escape.rs`: the text form of keys and values; `error.rs`: errors and exit codes
//!
//! Exit codes: 0 success, 1 a negative answer (missing key, a `cas` that found another
//! value, damage found by `verify`),
//! 2 an error (bad usage, I/O, corruption), with one line on stderr.

// Arguments and bytes from disk never reach an unchecked unwrap.
#![deny(clippy::unwrap_used)]

mod admin;
mod args;
mod dump;
mod embedder;
mod error;
mod escape;
mod import;
mod index;
mod index_stats;
mod kv;
mod open;
mod remote;
mod search;
mod stats;
mod vectors;

use std::io::Write;
use std::process::ExitCode;

use clap::{CommandFactory, Parser};

use args::{Cli, Command};
use error::{CliError, Result};

fn run(cli: &Cli) -> Result<()> {
    let out = &mut std::io::BufWriter::new(std::io::stdout().lock());
    if !cli.server.is_empty() {
        remote::run(cli, out, &cli.server)?;
        return out.flush().map_err(CliError::Stdout);
    }
    if cli.keyspace.is_some() && !cli.keyspace_aware() {
        return Err(CliError::Usage(
            "--keyspace works with put, get, del, del-range, scan, compact and stats".into(),
        ));
    }
    match &cli.command {
        Command::Keyspaces => admin::keyspaces(cli, out),
        Command::DropKeyspace { name } => admin::drop_keyspace(cli, name),
        Command::Put { key, value, ttl } => kv::put(cli, key, value, *ttl),
        Command::Get { keys, raw, json } => kv::get(cli, out, keys, *raw, *json),
        Command::Del { key } => kv::del(cli, key),
        Command::DelRange { start, end } => kv::del_range(cli, start, end),
        Command::Cas(args) => kv::cas(cli, out, args),
        Command::Scan(args) => kv::scan(cli, out, args),
        Command::Import(args) => import::run(cli, args),
        Command::Export(args) => kv::export(cli, out, args),
        Command::Search(args) => search::run(cli, out, args),
        Command::DefineIndex => admin::define_index(cli),
        Command::DefineTextIndex { analyzer } => search::define_text_index(cli, analyzer),
        Command::IndexStats { json } => index_stats::run(cli, out, *json),
        Command::Stats { json } => stats::run(cli, out, *json),
        Command::Flush => admin::flush(cli),
        Command::Compact => admin::compact(cli),
        Command::Checkpoint { dir } => admin::checkpoint(cli, dir),
        Command::Verify { json } => dump::verify(cli, out, *json),
        Command::Repair => dump::repair(cli, out),
        Command::DumpSst { file, json } => dump::sst(out, file, *json),
        Command::DumpWal { file, json } => dump::wal(out, file, *json),
        Command::DumpManifest { file, json } => dump::manifest(cli, out, file.as_deref(), *json),
        Command::ClusterStatus
        | Command::Shards
        | Command::Backup { .. }
        | Command::AddLearner { .. }
        | Command::AddVoters { .. }
        | Command::RemoveVoters { .. }
        | Command::SetAddress { .. }
        | Command::TransferLeader { .. }
        | Command::MoveReplica { .. }
        | Command::Split { .. } => Err(CliError::Usage(
            "this command speaks to a cluster: it needs --server ADDR".into(),
        )),
        Command::Completions { shell } => {
            clap_complete::generate(*shell, &mut Cli::command(), "shale", out);
            Ok(())
        }
        Command::Man => clap_mangen::Man::new(Cli::command())
            .render(out)
            .map_err(CliError::Stdout),
    }?;
    out.flush().map_err(CliError::Stdout)
}

fn main() -> ExitCode {
    shale_embed::quiet_candle_threads();
    let cli = Cli::parse();
    shale::perf::enable(cli.perf);
    let result = run(&cli);
    if cli.perf {
        eprintln!("{:#?}", shale::perf::take());
    }
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // A reader that went away (`shale scan | head`) is not an error.
        Err(CliError::Stdout(e)) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("shale: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}
