//! `search`: semantic search, printing rank, score, key and text.

use std::io::Write;

use crate::error::{CliError, Result};
use crate::escape::{escape, json_bytes};
use crate::Cli;

#[derive(clap::Args, Debug)]
pub struct SearchArgs {
    /// The query text.
    text: String,
    /// Number of results.
    #[arg(short, long, default_value_t = 10)]
    k: usize,
    /// Exact (brute-force) k-nearest-neighbour search.
    #[arg(long)]
    exact: bool,
    /// A JSON array of {rank, score, key, text} instead of tab-separated lines.
    #[arg(long)]
    json: bool,
}

pub fn run(cli: &Cli, out: &mut impl Write, args: &SearchArgs) -> Result<()> {
    let db = cli.open(false, true)?;
    let opts = shale::semantic::SearchOptions {
        exact: args.exact,
        ..shale::semantic::SearchOptions::k(args.k)
    };
    let hits = db.index()?.search(&args.text, &opts)?;
    db.close()?;
    let write = |out: &mut dyn Write| -> std::io::Result<()> {
        if args.json {
            let rows: Vec<serde_json::Value> = hits
                .iter()
                .enumerate()
                .map(|(i, hit)| {
                    let mut obj = serde_json::Map::new();
                    obj.insert("rank".into(), (i + 1).into());
                    obj.insert("score".into(), f64::from(hit.score).into());
                    json_bytes(&mut obj, "key", &hit.key);
                    obj.insert(
                        "text".into(),
                        String::from_utf8_lossy(&hit.document).into_owned().into(),
                    );
                    serde_json::Value::Object(obj)
                })
                .collect();
            writeln!(out, "{}", serde_json::Value::Array(rows))
        } else {
            for (i, hit) in hits.iter().enumerate() {
                writeln!(
                    out,
                    "{}\t{:.4}\t{}\t{}",
                    i + 1,
                    hit.score,
                    escape(&hit.key),
                    escape(&hit.document)
                )?;
            }
            Ok(())
        }
    };
    write(out).map_err(CliError::Stdout)
}
