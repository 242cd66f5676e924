//! Shared by the text index tests: the brute-force BM25 reference and a search helper.
#![allow(dead_code)]

use std::collections::{BTreeMap, HashSet};

use shale_search::{Analyzer, KeywordOptions, Match, TextIndex};

/// BM25 as the index documents it, written out again: the reference.
pub fn brute_force(
    docs: &BTreeMap<Vec<u8>, String>,
    query: &str,
    mode: Match,
    k: usize,
) -> Vec<(Vec<u8>, f64)> {
    brute_force_with(Analyzer::English, docs, query, mode, k)
}

/// [`brute_force`] with another analyzer.
pub fn brute_force_with(
    analyzer: Analyzer,
    docs: &BTreeMap<Vec<u8>, String>,
    query: &str,
    mode: Match,
    k: usize,
) -> Vec<(Vec<u8>, f64)> {
    let (k1, b) = (1.2f64, 0.75f64);
    let analyzed: BTreeMap<&Vec<u8>, Vec<String>> = docs
        .iter()
        .map(|(key, text)| (key, analyzer.terms(text)))
        .collect();
    let n = analyzed.len() as u32;
    if n == 0 {
        return Vec::new();
    }
    let total: u64 = analyzed.values().map(|t| t.len() as u64).sum();
    let avg_len = total as f64 / f64::from(n);
    let mut seen = HashSet::new();
    let terms: Vec<String> = analyzer
        .terms(query)
        .into_iter()
        .filter(|t| seen.insert(t.clone()))
        .collect();
    let df = |t: &str| {
        analyzed
            .values()
            .filter(|d| d.iter().any(|x| x == t))
            .count() as u32
    };
    let mut scored = Vec::new();
    for (key, doc) in &analyzed {
        let mut score = 0.0f64;
        let mut held = 0;
        for t in &terms {
            let tf = doc.iter().filter(|x| *x == t).count() as u32;
            if tf == 0 {
                continue;
            }
            held += 1;
            let (nn, dff) = (f64::from(n), f64::from(df(t)));
            let idf = (1.0 + (nn - dff + 0.5) / (dff + 0.5)).ln();
            let tf = f64::from(tf);
            let len = doc.len() as f64;
            score += idf * (tf * (k1 + 1.0)) / (tf + k1 * (1.0 - b + b * len / avg_len));
        }
        let matched = match mode {
            Match::Any => held > 0,
            _ => held == terms.len() && !terms.is_empty(),
        };
        if matched {
            scored.push(((*key).clone(), score));
        }
    }
    scored.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    scored.truncate(k);
    scored
}

/// The keys and scores of a search.
pub fn hits(index: &TextIndex, query: &str, opts: &KeywordOptions) -> Vec<(Vec<u8>, f64)> {
    index
        .search(query, opts)
        .expect("search")
        .into_iter()
        .map(|h| (h.key, h.score))
        .collect()
}
