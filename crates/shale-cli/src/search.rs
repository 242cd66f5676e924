//! `search`: the values of the semantic index nearest to a text or a vector, printing rank,
//! score, key and document (the text of a text value, the payload of a vector value); with
//! `--keyword`, the best BM25 matches of the text index of the same name; with `--hybrid`,
//! both rankings fused. `define-text-index` makes a text index.

use std::io::Write;

use shale_search::semantic::SearchOptions;
use shale_search::text::snippet;
use shale_search::{
    Analyzer, Fusion, HybridOptions, KeywordOptions, Match, TextIndex, TextIndexOptions,
};

use crate::args::{Cli, SearchArgs};
use crate::error::{CliError, Result};
use crate::escape::{escape, json_bytes};
use crate::kv::KeyRange;
use crate::vectors;

pub fn run(cli: &Cli, out: &mut impl Write, args: &SearchArgs) -> Result<()> {
    if args.keyword || args.hybrid {
        return keyword(cli, out, args);
    }
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

/// `search --keyword` and `search --hybrid`.
fn keyword(cli: &Cli, out: &mut impl Write, args: &SearchArgs) -> Result<()> {
    let Some(text) = &args.text else {
        return Err(CliError::Usage(
            "keyword and hybrid search need TEXT".into(),
        ));
    };
    let range = KeyRange::new(cli, &args.from, &args.to, &args.prefix)?;
    let db = cli.open(false, args.hybrid)?;
    let name = cli.index_args.name();
    let index = db.text_index(name)?;
    let mut kw = KeywordOptions::k(args.k);
    kw.mode = match args.match_mode.as_str() {
        "all" => Match::All,
        "phrase" => Match::Phrase,
        _ => Match::Any,
    };
    kw.lower_bound = range.lower.clone();
    kw.upper_bound = range.upper.clone();
    kw.highlight = true;
    let mut rows: Vec<(Vec<u8>, f32, Vec<u8>)> = Vec::new();
    if range.is_empty() {
    } else if args.hybrid {
        let vectors = db.index()?;
        let mut opts = HybridOptions::k(args.k);
        opts.fusion = match args.fusion.as_str() {
            "minmax" => Fusion::MinMax,
            _ => Fusion::default(),
        };
        opts.keyword.mode = kw.mode;
        opts.keyword.lower_bound = kw.lower_bound.clone();
        opts.keyword.upper_bound = kw.upper_bound.clone();
        opts.vector.lower_bound = kw.lower_bound.clone();
        opts.vector.upper_bound = kw.upper_bound.clone();
        opts.vector.ef = args.ef;
        opts.vector.exact = args.exact;
        let query = crate::vectors::query(args.vector.as_deref(), args.vector_file.as_deref())?;
        let vector = query.as_ref().map(|(_, v)| v.as_slice());
        let terms = index.analyzer().terms(text);
        for hit in shale_search::hybrid::search(index, vectors, text, vector, &opts)? {
            let value = db.get(&hit.key)?.unwrap_or_default();
            let document = String::from_utf8_lossy(&value).into_owned();
            let document = match args.highlight {
                true => mark(&document, &index.analyzer(), &terms),
                false => document,
            };
            rows.push((hit.key, hit.score as f32, document.into_bytes()));
        }
    } else {
        for hit in index.search(text, &kw)? {
            let document = hit.text.unwrap_or_default();
            let document = match args.highlight {
                true => snippet(&document, &hit.highlights, usize::MAX, "«", "»"),
                false => document,
            };
            rows.push((hit.key, hit.score as f32, document.into_bytes()));
        }
    }
    db.close()?;
    let rows: Vec<(&[u8], f32, &[u8])> = rows
        .iter()
        .map(|(k, s, d)| (k.as_slice(), *s, d.as_slice()))
        .collect();
    print_hits(out, &rows, args.json)
}

/// `document` with the words whose terms are among `terms` marked.
fn mark(document: &str, analyzer: &Analyzer, terms: &[String]) -> String {
    let spans: Vec<std::ops::Range<usize>> = analyzer
        .tokens(document)
        .into_iter()
        .filter(|t| terms.contains(&t.term))
        .map(|t| t.start..t.end)
        .collect();
    snippet(document, &spans, usize::MAX, "«", "»")
}

/// `define-text-index`: make (or check) the text index --index over --index-prefix.
pub fn define_text_index(cli: &Cli, analyzer: &str) -> Result<()> {
    let analyzer = Analyzer::from_name(analyzer).ok_or_else(|| {
        CliError::Usage(format!(
            "{analyzer:?} is not an analyzer (simple, english or cjk)"
        ))
    })?;
    let db = cli.open(true, false)?;
    let mut opts = TextIndexOptions::new().analyzer(analyzer);
    if let Some(p) = &cli.index_args.index_prefix {
        opts = opts.prefix(cli.bytes(p)?);
    }
    let name = cli.index_args.name();
    let index = TextIndex::open(db.db(), name, opts)?;
    let stats = index.stats();
    eprintln!(
        "text index {name:?}: {} documents, {} terms ({})",
        stats.documents,
        stats.terms,
        analyzer.name()
    );
    drop(index);
    Ok(db.close()?)
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
