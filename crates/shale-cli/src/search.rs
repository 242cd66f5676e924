//! `search`: the values of the semantic index nearest to a text or a vector, printing rank,
//! score, key and document (the text of a text value, the payload of a vector value).

use std::io::Write;
use std::path::PathBuf;

use shale::semantic::SearchOptions;

use crate::error::{CliError, Result};
use crate::escape::{escape, json_bytes};
use crate::kv::KeyRange;
use crate::vectors;
use crate::Cli;

#[derive(clap::Args, Debug)]
#[command(group(
    clap::ArgGroup::new("query")
        .required(true)
        .args(["text", "vector", "vector_file"])
))]
pub struct SearchArgs {
    /// The query text, embedded by the index's model.
    pub(crate) text: Option<String>,
    /// The query vector as a JSON array of numbers, e.g. '[0.1, -0.2, 0.3]'.
    #[arg(long, value_name = "JSON")]
    pub(crate) vector: Option<String>,
    /// The query vector from a .npy file holding one, of shape (dim,) or (1, dim).
    #[arg(long, value_name = "FILE")]
    pub(crate) vector_file: Option<PathBuf>,
    /// Number of results.
    #[arg(short, long, default_value_t = 10)]
    pub(crate) k: usize,
    /// Only keys starting with P (whole keys, inside the index's prefix; combines with
    /// --from and --to).
    #[arg(long, value_name = "P")]
    pub(crate) prefix: Option<String>,
    /// Only keys from A (inclusive).
    #[arg(long, value_name = "A")]
    pub(crate) from: Option<String>,
    /// Only keys before B (exclusive).
    #[arg(long, value_name = "B")]
    pub(crate) to: Option<String>,
    /// The graph search's candidate list size (default: the index's ef_search): larger
    /// finds more of the true nearest neighbours, and is slower.
    #[arg(long, value_name = "N")]
    pub(crate) ef: Option<usize>,
    /// Exact search: score every candidate instead of walking the HNSW graph.
    #[arg(long)]
    pub(crate) exact: bool,
    /// A JSON array of {rank, score, key, document} instead of tab-separated lines.
    #[arg(long)]
    pub(crate) json: bool,
}

pub fn run(cli: &Cli, out: &mut impl Write, args: &SearchArgs) -> Result<()> {
    let range = KeyRange::new(cli, &args.from, &args.to, &args.prefix)?;
    let query = vectors::query(args.vector.as_deref(), args.vector_file.as_deref())?;
    let db = cli.open(false, true)?;
    let index = db.index()?;
    let opts = SearchOptions {
        exact: args.exact,
        ef: args.ef,
        lower_bound: range.lower.clone(),
        upper_bound: range.upper.clone(),
        ..SearchOptions::k(args.k)
    };
    let hits = match (&query, &args.text) {
        _ if range.is_empty() => Vec::new(),
        (Some((what, vector)), _) => {
            vectors::check_dim(what, vector.len(), index)?;
            index.search_vector(vector, &opts)?
        }
        (None, Some(text)) => index.search(text, &opts)?,
        // clap requires one of the three.
        (None, None) => return Err(CliError::Usage("search needs TEXT or --vector".into())),
    };
    db.close()?;
    let rows: Vec<(&[u8], f32, &[u8])> = hits
        .iter()
        .map(|h| (h.key.as_slice(), h.score, h.document.as_slice()))
        .collect();
    print_hits(out, &rows, args.json)
}

/// Each hit (key, score, document) as a tab-separated line of rank, score, key and
/// document, or all of them as one JSON array.
pub fn print_hits(out: &mut impl Write, hits: &[(&[u8], f32, &[u8])], json: bool) -> Result<()> {
    let write = |out: &mut dyn Write| -> std::io::Result<()> {
        if json {
            let rows: Vec<serde_json::Value> = hits
                .iter()
                .enumerate()
                .map(|(i, (key, score, document))| {
                    let mut obj = serde_json::Map::new();
                    obj.insert("rank".into(), (i + 1).into());
                    obj.insert("score".into(), f64::from(*score).into());
                    json_bytes(&mut obj, "key", key);
                    json_bytes(&mut obj, "document", document);
                    serde_json::Value::Object(obj)
                })
                .collect();
            writeln!(out, "{}", serde_json::Value::Array(rows))
        } else {
            for (i, (key, score, document)) in hits.iter().enumerate() {
                writeln!(
                    out,
                    "{}\t{:.4}\t{}\t{}",
                    i + 1,
                    score,
                    escape(key),
                    escape(document)
                )?;
            }
            Ok(())
        }
    };
    write(out).map_err(CliError::Stdout)
}
