//! The command line as clap parses it: the global options (`Cli`), the commands
//! (`Command`), and each command's arguments. Only parsing and the plain questions about
//! the arguments live here; the commands that take them are in their own files, which all
//! read this one.

use std::path::{Path, PathBuf};

use clap::{Parser, Subcommand, ValueEnum};
use shale_search::vector::Metric;

use crate::embedder::EmbedderKind;
use crate::error::{CliError, Result};
use crate::escape;

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
    pub db: Option<PathBuf>,

    /// Speak to a replicated Shale server (`shale-server`) at ADDR (host:port; several,
    /// comma-separated, for the replicas of a cluster) instead of a directory: put, get,
    /// del, scan, search and import. A cluster's token is read from SHALE_TOKEN.
    #[arg(long, global = true, value_name = "ADDR", value_delimiter = ',')]
    pub server: Vec<String>,

    /// With --server: connect over TLS, trusting the cluster's certificate authority in
    /// FILE (PEM).
    #[arg(long, global = true, value_name = "FILE", requires = "server")]
    pub tls_ca: Option<PathBuf>,

    /// Read KEY, VALUE, --from, --to, --prefix and --index-prefix with the escapes scan
    /// prints (\\ \t \n \r \xNN), so binary keys can be typed and scan output pasted back.
    #[arg(long, short = 'e', global = true)]
    pub escaped: bool,

    /// Open the database with its semantic index (see --index) on, so writes (put, import)
    /// are embedded and indexed. `search`, `index-stats` and vector imports turn it on by
    /// themselves.
    #[arg(long, global = true)]
    pub semantic: bool,

    /// Open the database read-only (`Options::read_only`): no lock, nothing written, so
    /// reads work beside a process that has it open; commands that write fail.
    #[arg(long, global = true)]
    pub read_only: bool,

    /// Work on keyspace NAME instead of the default one (put, get, del, del-range, scan,
    /// compact, stats; put makes the keyspace if it does not exist).
    #[arg(long, global = true, value_name = "NAME")]
    pub keyspace: Option<String>,

    /// Print the per-stage timings (perf context) of this command's reads and writes on
    /// stderr when it ends.
    #[arg(long, global = true)]
    pub perf: bool,

    #[command(flatten)]
    pub index_args: IndexArgs,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
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
    Cas(CasArgs),
    /// Print a tab-separated key and value per line, in key order, escaped.
    Scan(ScanArgs),
    /// Print the name of every keyspace, one per line, `default` first.
    Keyspaces,
    /// Drop keyspace NAME and everything in it.
    DropKeyspace { name: String },
    /// Load key-value pairs from FILE ("-" for stdin).
    Import(ImportArgs),
    /// Write every key-value pair to stdout (or --output).
    Export(ExportArgs),
    /// Semantic search: the K values of the index closest in meaning to TEXT, or closest
    /// to a vector. With --keyword, by keywords (BM25) in the text index --index; with
    /// --hybrid, both, fused.
    Search(SearchArgs),
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
    /// Over --server: the shards of the key space as the first server knows them, one
    /// line each: its group, its first key, the key it ends before (`end` for none), its
    /// version and its group's leader.
    Shards,
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
    /// Over --server: move group GROUP's replica from node FROM to node TO, listening at
    /// ADDR (a node started with the cluster's --split flags): TO catches up as a
    /// learner, the leadership leaves FROM, then one membership change replaces FROM by
    /// TO. Prints the group's membership after it.
    MoveReplica {
        #[arg(long)]
        group: u64,
        #[arg(long)]
        from: u64,
        #[arg(long)]
        to: u64,
        #[arg(long)]
        addr: String,
    },
    /// Over --server: split group GROUP's shard at key AT (escapes as for keys): GROUP
    /// keeps the keys below AT, a new group CHILD (an id no group has) serves those from
    /// AT on, on the same replicas. Prints both shards.
    Split {
        #[arg(long)]
        group: u64,
        #[arg(long)]
        at: String,
        #[arg(long)]
        child: u64,
    },
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
    pub fn db_dir(&self) -> Result<&Path> {
        self.db
            .as_deref()
            .ok_or_else(|| CliError::Usage("this command needs --db DIR".into()))
    }

    /// A command-line key or value as bytes (`--escaped` decides how).
    pub fn bytes(&self, arg: &str) -> Result<Vec<u8>> {
        if self.escaped {
            escape::unescape(arg).map_err(|e| CliError::Usage(format!("{arg:?}: {e}")))
        } else {
            Ok(arg.as_bytes().to_vec())
        }
    }

    /// Commands that never read or write a value, so they open a TTL database as a plain
    /// one (its compaction filter is not needed to delete, flush or copy).
    pub fn ttl_agnostic(&self) -> bool {
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
    pub fn keyspace_aware(&self) -> bool {
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
}

#[derive(clap::Args, Debug)]
pub struct ScanArgs {
    /// First key (inclusive).
    #[arg(long, value_name = "A")]
    pub from: Option<String>,
    /// End key (exclusive).
    #[arg(long, value_name = "B")]
    pub to: Option<String>,
    /// Only keys starting with P (combines with --from and --to).
    #[arg(long, value_name = "P")]
    pub prefix: Option<String>,
    /// Descending key order.
    #[arg(long)]
    pub reverse: bool,
    /// Print at most N pairs.
    #[arg(long, value_name = "N")]
    pub limit: Option<usize>,
    /// One JSON object per line instead of a tab-separated key and value.
    #[arg(long)]
    pub json: bool,
}

#[derive(clap::Args, Debug)]
pub struct CasArgs {
    pub key: String,
    /// The new value (or --delete).
    #[arg(required_unless_present = "delete", conflicts_with = "delete")]
    pub value: Option<String>,
    /// Delete KEY instead of setting it.
    #[arg(long)]
    pub delete: bool,
    /// The value KEY must hold now.
    #[arg(
        long,
        value_name = "VALUE",
        required_unless_present = "expect_absent",
        conflicts_with = "expect_absent"
    )]
    pub expect: Option<String>,
    /// KEY must be missing now.
    #[arg(long)]
    pub expect_absent: bool,
}

#[derive(clap::Args, Debug)]
pub struct ExportArgs {
    #[arg(long, value_enum, default_value_t = Format::Tsv)]
    pub format: Format,
    /// Write to FILE instead of stdout.
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
}

#[derive(clap::Args, Debug)]
pub struct ImportArgs {
    /// The input file; "-" reads stdin.
    pub file: PathBuf,
    #[arg(long, value_enum)]
    pub format: Format,
    /// Keys are this prefix followed by a number zero-padded to 10 digits (so keys sort in
    /// file order): with --format lines the 1-based line number (default prefix: none),
    /// with --format npy the 0-based row (default prefix: the index's, --index-prefix).
    #[arg(long, value_name = "P")]
    pub key_prefix: Option<String>,
    /// With --format npy: a file of keys, one per line, a line per row (instead of
    /// numbered keys).
    #[arg(long, value_name = "FILE", conflicts_with = "key_prefix")]
    pub keys: Option<PathBuf>,
    /// With --format npy: a file of payloads (the documents search prints), one per line,
    /// a line per row. Default: empty payloads.
    #[arg(long, value_name = "FILE")]
    pub payloads: Option<PathBuf>,
    /// Bytes per write batch.
    #[arg(long, value_name = "N", default_value_t = 1 << 20)]
    pub batch_bytes: usize,
}

#[derive(clap::Args, Debug)]
#[command(group(
    clap::ArgGroup::new("query")
        .required(true)
        .args(["text", "vector", "vector_file"])
))]
pub struct SearchArgs {
    /// The query text, embedded by the index's model.
    pub text: Option<String>,
    /// The query vector as a JSON array of numbers, e.g. '[0.1, -0.2, 0.3]'.
    #[arg(long, value_name = "JSON")]
    pub vector: Option<String>,
    /// The query vector from a .npy file holding one, of shape (dim,) or (1, dim).
    #[arg(long, value_name = "FILE")]
    pub vector_file: Option<PathBuf>,
    /// Number of results.
    #[arg(short, long, default_value_t = 10)]
    pub k: usize,
    /// Only keys starting with P (whole keys, inside the index's prefix; combines with
    /// --from and --to).
    #[arg(long, value_name = "P")]
    pub prefix: Option<String>,
    /// Only keys from A (inclusive).
    #[arg(long, value_name = "A")]
    pub from: Option<String>,
    /// Only keys before B (exclusive).
    #[arg(long, value_name = "B")]
    pub to: Option<String>,
    /// The graph search's candidate list size (default: the index's ef_search): larger
    /// finds more of the true nearest neighbours, and is slower.
    #[arg(long, value_name = "N")]
    pub ef: Option<usize>,
    /// Exact search: score every candidate instead of walking the HNSW graph.
    #[arg(long)]
    pub exact: bool,
    /// A JSON array of {rank, score, key, document} instead of tab-separated lines.
    #[arg(long)]
    pub json: bool,
    /// Search by keywords: BM25 over the text index --index (see define-text-index).
    #[arg(long, conflicts_with_all = ["hybrid", "vector", "vector_file"])]
    pub keyword: bool,
    /// Search by keywords and by meaning, the two rankings fused (--fusion): the text index
    /// and the semantic index named --index, over the same keys.
    #[arg(long)]
    pub hybrid: bool,
    /// Keyword and hybrid: mark the matching words of each document «like this».
    #[arg(long)]
    pub highlight: bool,
    /// Keyword search: documents with any of the words (ranked), all of them, or the
    /// words as a phrase.
    #[arg(long = "match", value_name = "MODE", default_value = "any", value_parser = ["any", "all", "phrase"])]
    pub match_mode: String,
    /// Hybrid: reciprocal rank fusion (rrf) or min-max scaled scores (minmax).
    #[arg(long, default_value = "rrf", value_parser = ["rrf", "minmax"])]
    pub fusion: String,
}

/// The index opened when `--index` is not given, over every key (the one Python's
/// `semantic=True` opens too).
pub const DEFAULT_INDEX: &str = "default";

/// The global options that choose and describe the index.
#[derive(clap::Args, Debug)]
#[command(next_help_heading = "Semantic index (search, index-stats, --semantic)")]
pub struct IndexArgs {
    /// The semantic index to open ([A-Za-z0-9_-], default "default"). Naming one turns
    /// --semantic on.
    #[arg(long, global = true, value_name = "NAME")]
    pub index: Option<String>,

    /// The keys the index covers: those that start with P (default: the index's recorded
    /// prefix, or every key for a new index). Values under it must be UTF-8 text or
    /// vectors; keys outside it hold any bytes.
    #[arg(long, global = true, value_name = "P")]
    pub index_prefix: Option<String>,

    /// How the index scores: cosine, dot or l2 (higher is closer: cosine similarity, inner
    /// product, or minus the squared distance) [default: the index's recorded metric, or
    /// cosine for a new index].
    #[arg(long, global = true, value_name = "METRIC", value_parser = parse_metric)]
    pub metric: Option<Metric>,

    /// The dimension of the index's vectors (needed with --embedder none for a new index;
    /// with a model, it must be the model's).
    #[arg(long, global = true, value_name = "N")]
    pub dim: Option<usize>,

    /// The embedding model for the index [default: minilm; an index of the user's vectors
    /// keeps none]. `hash` is a word-hashing stand-in with no model files: it matches shared
    /// words, not meanings. `none`: an index of vectors given by the user, with --dim.
    #[arg(long, global = true, value_enum)]
    pub embedder: Option<EmbedderKind>,
}

fn parse_metric(name: &str) -> std::result::Result<Metric, String> {
    Metric::parse(name).map_err(|_| format!("{name:?} is not a metric (cosine, dot or l2)"))
}

impl IndexArgs {
    /// The index's name.
    pub fn name(&self) -> &str {
        self.index.as_deref().unwrap_or(DEFAULT_INDEX)
    }
}
