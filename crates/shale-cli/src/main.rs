//! `shale`: a thin command-line shell over the Shale library, in the spirit of LevelDB's
//! `leveldbutil` and RocksDB's `ldb`. Every command is a few library calls; the only logic
//! here is parsing arguments and formatting output.
//!
//! - `kv.rs`: put, get, del, cas, scan, export, flush, compact; `remote.rs`: put, get,
//!   del, cas, scan, search, import, index definitions and membership over a replicated
//!   server (`--server`)
//! - `import.rs`: bulk load in write batches, with a progress bar; `vectors.rs`: vectors
//!   in (`.npy` and JSON lines imports, query vectors; the `.npy` reader is `shale-npy`)
//! - `index.rs`: which semantic index a command opens, and `index-stats`; `search.rs`:
//!   search it by text or vector, by keywords (a text index) or both (hybrid);
//!   `embedder.rs`: which model embeds its text
//! - `stats.rs`: the tree's shape and the engine's counters
//! - `dump.rs`: SSTable, WAL and MANIFEST contents; `verify` and `repair`
//! - `escape.rs`: the text form of keys and values; `error.rs`: errors and exit codes
//!
//! Exit codes: 0 success, 1 a negative answer (missing key, a `cas` that found another
//! value, damage found by `verify`),
//! 2 an error (bad usage, I/O, corruption), with one line on stderr.

// Arguments and bytes from disk never reach an unchecked unwrap.
#![deny(clippy::unwrap_used)]

mod dump;
mod embedder;
mod error;
mod escape;
mod import;
mod index;
mod kv;
mod remote;
mod search;
mod stats;
mod vectors;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand, ValueEnum};

use error::{CliError, Result};

#[derive(Parser, Debug)]
#[command(
    name = "shale",
    version,
    about = "Command-line tool for Shale databases",
    after_help = "Exit status: 0 success, 1 missing key or damage found by verify, 2 error."
)]
pub struct Cli {
    /// The database directory.
    #[arg(long, global = true, value_name = "DIR", conflicts_with = "server")]
    db: Option<PathBuf>,

    /// Speak to a replicated Shale server (`shale-server`) at ADDR (host:port; several,
    /// comma-separated, for the replicas of a cluster) instead of a directory: put, get,
    /// del, scan, search and import. A cluster's token is read from SHALE_TOKEN.
    #[arg(long, global = true, value_name = "ADDR", value_delimiter = ',')]
    server: Vec<String>,

    /// With --server: connect over TLS, trusting the cluster's certificate authority in
    /// FILE (PEM).
    #[arg(long, global = true, value_name = "FILE", requires = "server")]
    tls_ca: Option<PathBuf>,

    /// Read KEY, VALUE, --from, --to, --prefix and --index-prefix with the escapes scan
    /// prints (\\ \t \n \r \xNN), so binary keys can be typed and scan output pasted back.
    #[arg(long, short = 'e', global = true)]
    escaped: bool,

    /// Open the database with its semantic index (see --index) on, so writes (put, import)
    /// are embedded and indexed. `search`, `index-stats` and vector imports turn it on by
    /// themselves.
    #[arg(long, global = true)]
    semantic: bool,

    /// Open the database read-only (`Options::read_only`): no lock, nothing written, so
    /// reads work beside a process that has it open; commands that write fail.
    #[arg(long, global = true)]
    read_only: bool,

    /// Work on keyspace NAME instead of the default one (put, get, del, del-range, scan,
    /// compact, stats; put makes the keyspace if it does not exist).
    #[arg(long, global = true, value_name = "NAME")]
    keyspace: Option<String>,

    /// Print the per-stage timings (perf context) of this command's reads and writes on
    /// stderr when it ends.
    #[arg(long, global = true)]
    perf: bool,

    #[command(flatten)]
    index_args: index::IndexArgs,

    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Set KEY to VALUE.
    Put {
        key: String,
        value: String,
        /// Expire the value SECONDS from now: reads find nothing after that, and the
        /// next compaction that rewrites it removes it. Makes a new database a TTL
        /// database (a `TTL` file in DIR, `shale::TtlDb`); a TTL database takes every
        /// command's reads and writes through that layer, its puts without --ttl never
        /// expiring.
        #[arg(long, value_name = "SECONDS")]
        ttl: Option<u64>,
    },
    /// Print the value of KEY (escaped); exit 1 if it is missing. Given several keys,
    /// read them all at one moment and print a tab-separated key and value per key found,
    /// in the order given; exit 1 if any is missing (each named on stderr).
    Get {
        #[arg(required = true, num_args = 1..)]
        keys: Vec<String>,
        /// Write the value's bytes exactly, with no escaping and no newline (one key only).
        #[arg(long, conflicts_with = "json")]
        raw: bool,
        /// One JSON object per key found, as `scan --json` prints them.
        #[arg(long)]
        json: bool,
    },
    /// Delete KEY (deleting a missing key is not an error).
    Del { key: String },
    /// Delete every key from START up to END (END itself is kept), in one write.
    DelRange { start: String, end: String },
    /// Set KEY to VALUE (or delete it, --delete) only if it holds --expect VALUE now (or,
    /// with --expect-absent, is missing): one atomic compare-and-set. Otherwise change
    /// nothing, print the value KEY holds (escaped; nothing if missing) and exit 1.
    Cas(kv::CasArgs),
    /// Print a tab-separated key and value per line, in key order, escaped.
    Scan(kv::ScanArgs),
    /// Print the name of every keyspace, one per line, `default` first.
    Keyspaces,
    /// Drop keyspace NAME and everything in it.
    DropKeyspace { name: String },
    /// Load key-value pairs from FILE ("-" for stdin).
    Import(import::ImportArgs),
    /// Write every key-value pair to stdout (or --output).
    Export(kv::ExportArgs),
    /// Semantic search: the K values of the index closest in meaning to TEXT, or closest
    /// to a vector. With --keyword, by keywords (BM25) in the text index --index; with
    /// --hybrid, both, fused.
    Search(search::SearchArgs),
    /// Make the text index --index (default "default") over the keys under --index-prefix,
    /// analyzed by --analyzer: keyword search (`search --keyword`, `--hybrid`). Every
    /// command that opens the database for writing keeps its text indexes exact.
    DefineTextIndex {
        /// simple, english or cjk (Chinese, Japanese and Korean as character bigrams).
        #[arg(long, default_value = "english")]
        analyzer: String,
    },
    /// Make the semantic index --index (default "default") as --index-prefix, --metric,
    /// --dim and --embedder describe it, or check that it is as they say. On a directory
    /// any command with --index does this first; over --server the definition goes through
    /// the log to every replica (--index-prefix is then required).
    DefineIndex,
    /// The semantic index: what it is, its counters, and what opening it found.
    IndexStats {
        #[arg(long)]
        json: bool,
    },
    /// The tree's shape (levels, files, sizes, amplification) and engine counters.
    Stats {
        #[arg(long)]
        json: bool,
    },
    /// Write the memtable to an SSTable.
    Flush,
    /// Compact the whole key range down the levels (flushes first).
    Compact,
    /// Write an openable copy of the database as of now into DIR, which must not exist:
    /// SSTables hard-linked, so it is fast whatever the size. The index the command opens
    /// (--semantic, --index) comes along; another one is rebuilt when the copy opens it.
    Checkpoint { dir: PathBuf },
    /// Check every checksum of every SSTable, WAL and the MANIFEST without opening the
    /// database; exit 1 if anything is damaged.
    Verify {
        #[arg(long)]
        json: bool,
    },
    /// Rebuild a damaged database from whatever of its files can still be read (after
    /// `verify` or an open reported damage). Lossy: damaged files move to DIR/lost/, and
    /// the report says what was kept and dropped.
    Repair,
    /// Print an SSTable: properties, index entries and every entry.
    DumpSst {
        file: PathBuf,
        #[arg(long)]
        json: bool,
    },
    /// Print a WAL: every record (write batch) and its puts and deletes.
    DumpWal {
        file: PathBuf,
        #[arg(long)]
        json: bool,
    },
    /// Print every version edit of a MANIFEST (default: the live one, named by CURRENT).
    DumpManifest {
        file: Option<PathBuf>,
        #[arg(long)]
        json: bool,
    },
    /// Over --server: each server's view of the cluster (node id, leader, last applied
    /// log index, term), one line per address given.
    ClusterStatus,
    /// Over --server: add node ID, listening at ADDR, as a learner; returns once it has
    /// caught up. Then `add-voters ID` makes it a voter.
    AddLearner { id: u64, addr: String },
    /// Over --server: make the learners IDS voters.
    AddVoters {
        #[arg(required = true)]
        ids: Vec<u64>,
    },
    /// Over --server: write an online backup of the cluster to FILE (at least every write
    /// acknowledged before it); `shale-server --restore FILE` starts a new cluster from
    /// it.
    Backup { file: PathBuf },
    /// Over --server: remove the voters IDS from the cluster.
    RemoveVoters {
        #[arg(required = true)]
        ids: Vec<u64>,
    },
    /// Over --server: reach member ID at ADDR from now on (it moved to another host or
    /// port).
    SetAddress { id: u64, addr: String },
    /// Over --server: hand the leadership to voter ID (before the leader's host is taken
    /// down, say); prints the term it leads in.
    TransferLeader { id: u64 },
    /// Print a completion script for SHELL (e.g. `shale completions bash >
    /// /etc/bash_completion.d/shale`).
    Completions { shell: clap_complete::Shell },
    /// Print the manual page (roff), e.g. `shale man | man -l -`.
    Man,
}

/// Output formats of `import` and `export`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// One value per line; keys are line numbers (see --key-prefix). Import only.
    Lines,
    /// A tab-separated key and value, both escaped.
    Tsv,
    /// {"key": .., "value": ..} per line (`key_hex`/`value_hex` for non-UTF-8 bytes).
    Jsonl,
    /// A NumPy .npy file of float32 or float64 vectors, one per row. Import only.
    Npy,
    /// {"key": .., "vector": [..], "payload": ..} per line (`key_hex`, `payload_hex` for
    /// non-UTF-8 bytes; the payload is optional). Import only.
    VectorsJsonl,
}

impl Cli {
    /// The database directory, required by every command that opens one.
    fn db_dir(&self) -> Result<&Path> {
        self.db
            .as_deref()
            .ok_or_else(|| CliError::Usage("this command needs --db DIR".into()))
    }

    /// A command-line key or value as bytes (`--escaped` decides how).
    fn bytes(&self, arg: &str) -> Result<Vec<u8>> {
        if self.escaped {
            escape::unescape(arg).map_err(|e| CliError::Usage(format!("{arg:?}: {e}")))
        } else {
            Ok(arg.as_bytes().to_vec())
        }
    }

    /// Commands that never read or write a value, so they open a TTL database as a plain
    /// one (its compaction filter is not needed to delete, flush or copy).
    fn ttl_agnostic(&self) -> bool {
        matches!(
            self.command,
            Command::Del { .. }
                | Command::DelRange { .. }
                | Command::Flush
                | Command::Stats { .. }
                | Command::Checkpoint { .. }
        )
    }

    /// Commands that take `--keyspace`.
    fn keyspace_aware(&self) -> bool {
        self.server.is_empty()
            && matches!(
                self.command,
                Command::Put { ttl: None, .. }
                    | Command::Get { .. }
                    | Command::Del { .. }
                    | Command::DelRange { .. }
                    | Command::Scan(_)
                    | Command::Compact
                    | Command::Stats { .. }
            )
    }

    /// True if `--db` holds a TTL database (its `TTL` file).
    fn is_ttl(&self) -> bool {
        self.db
            .as_deref()
            .is_some_and(|dir| dir.join(shale::ttl::TTL_MARKER).exists())
    }

    /// The database through the TTL layer if it is a TTL one (or if `create_ttl`, which
    /// makes a new database one); `None` for a plain database.
    fn open_ttl(&self, create_ttl: bool) -> Result<Option<shale::TtlDb>> {
        if !create_ttl && !self.is_ttl() {
            return Ok(None);
        }
        if self.keyspace.is_some() {
            return Err(CliError::Usage(
                "a TTL database's expiring values live in its default keyspace: \
                 --keyspace does not apply"
                    .into(),
            ));
        }
        if self.semantic || self.index_args.index.is_some() {
            return Err(CliError::Usage(
                "a TTL database has no semantic index".into(),
            ));
        }
        let opts = shale::Options {
            create_if_missing: create_ttl,
            read_only: self.read_only,
            ..shale::Options::default()
        };
        Ok(Some(shale::TtlDb::open(self.db_dir()?, opts)?))
    }

    /// Open the database, and its semantic index (`--index`, see `index.rs`) when
    /// `semantic`, `--semantic` or `--index`. Only commands that write may create it, so a
    /// mistyped `--db` on a read is an error, not a new empty database.
    fn open(&self, create: bool, semantic: bool) -> Result<Opened> {
        let dir = self.db_dir()?;
        if self.is_ttl() && !self.ttl_agnostic() {
            // Its values carry their expiry: only the TTL layer reads and writes them.
            return Err(CliError::Usage(format!(
                "{} is a TTL database: this command works on plain databases only \
                 (put, get, del, del-range, scan, flush, compact, stats, checkpoint and \
                 verify work on both)",
                dir.display()
            )));
        }
        let opts = shale::Options {
            create_if_missing: create,
            read_only: self.read_only,
            ..shale::Options::default()
        };
        let db = std::sync::Arc::new(shale::Db::open(dir, opts)?);
        let mut text = Vec::new();
        if !self.read_only {
            for name in shale_search::TextIndex::names(&db) {
                text.extend(shale_search::TextIndex::open_existing(&db, &name)?);
            }
        }
        let index = if semantic || self.semantic || self.index_args.index.is_some() {
            Some(index::open(self, &db)?)
        } else {
            None
        };
        Ok(Opened { db, index, text })
    }
}

/// An open database, its index when the command asked for one, and every text index it
/// has (opened so that the command's writes keep them exact).
pub struct Opened {
    db: std::sync::Arc<shale::Db>,
    index: Option<index::OpenIndex>,
    text: Vec<shale_search::TextIndex>,
}

impl std::ops::Deref for Opened {
    type Target = shale::Db;
    fn deref(&self) -> &shale::Db {
        &self.db
    }
}

impl Opened {
    /// The index the command opened.
    fn index(&self) -> Result<&shale_search::semantic::Index> {
        Ok(&self.index_handle()?.index)
    }

    /// The database, shared (a text index holds it).
    fn db(&self) -> &std::sync::Arc<shale::Db> {
        &self.db
    }

    /// The text index `name`.
    fn text_index(&self, name: &str) -> Result<&shale_search::TextIndex> {
        self.text.iter().find(|t| t.name() == name).ok_or_else(|| {
            CliError::Usage(format!(
                "no text index {name:?} (define-text-index makes one; a read-only open has none)"
            ))
        })
    }

    /// The index the command opened, and its model.
    fn index_handle(&self) -> Result<&index::OpenIndex> {
        self.index
            .as_ref()
            .ok_or_else(|| CliError::Usage("this command needs the semantic index".into()))
    }
}

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
        Command::Keyspaces => {
            let db = cli.open(false, false)?;
            for name in db.keyspace_names() {
                writeln!(out, "{name}").map_err(CliError::Stdout)?;
            }
            Ok(db.close()?)
        }
        Command::DropKeyspace { name } => {
            let db = cli.open(false, false)?;
            db.drop_keyspace(name)?;
            Ok(db.close()?)
        }
        Command::Put { key, value, ttl } => kv::put(cli, key, value, *ttl),
        Command::Get { keys, raw, json } => kv::get(cli, out, keys, *raw, *json),
        Command::Del { key } => kv::del(cli, key),
        Command::DelRange { start, end } => kv::del_range(cli, start, end),
        Command::Cas(args) => kv::cas(cli, out, args),
        Command::Scan(args) => kv::scan(cli, out, args),
        Command::Import(args) => import::run(cli, args),
        Command::Export(args) => kv::export(cli, out, args),
        Command::Search(args) => search::run(cli, out, args),
        Command::DefineIndex => {
            let db = cli.open(true, true)?;
            Ok(db.close()?)
        }
        Command::DefineTextIndex { analyzer } => search::define_text_index(cli, analyzer),
        Command::IndexStats { json } => index::stats(cli, out, *json),
        Command::Stats { json } => stats::run(cli, out, *json),
        Command::Flush => {
            let db = cli.open(false, false)?;
            db.flush()?;
            Ok(db.close()?)
        }
        Command::Compact => match cli.open_ttl(false)? {
            // The expiry filter runs only when the TTL layer opened the database.
            Some(ttl) => {
                ttl.db().compact_range(None, None)?;
                Ok(ttl.close()?)
            }
            None => {
                let db = cli.open(false, false)?;
                kv::Space::open(cli, &db, false)?.compact_range(None, None)?;
                Ok(db.close()?)
            }
        },
        Command::Checkpoint { dir } => {
            let db = cli.open(false, false)?;
            db.checkpoint(dir)?;
            Ok(db.close()?)
        }
        Command::Verify { json } => dump::verify(cli, out, *json),
        Command::Repair => dump::repair(cli, out),
        Command::DumpSst { file, json } => dump::sst(out, file, *json),
        Command::DumpWal { file, json } => dump::wal(out, file, *json),
        Command::DumpManifest { file, json } => dump::manifest(cli, out, file.as_deref(), *json),
        Command::ClusterStatus
        | Command::Backup { .. }
        | Command::AddLearner { .. }
        | Command::AddVoters { .. }
        | Command::RemoveVoters { .. }
        | Command::SetAddress { .. }
        | Command::TransferLeader { .. } => Err(CliError::Usage(
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
