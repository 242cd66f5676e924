//! The demo's keyword and hybrid searches: the same glosses found by their words (BM25, a
//! text index kept exact at every write) and by words and meaning fused, beside meaning
//! alone, on queries that hinge on a rare name.

use std::time::Instant;

use shale_search::semantic::{SearchOptions, VectorIndex};
use shale_search::{hybrid, HybridOptions, KeywordOptions, Match, TextIndex};

use crate::report::clip;

/// Queries that name something: meaning alone may blur the name, its words do not.
const NAMED: [&str; 4] = [
    "Fibonacci",
    "the constant named after Hubble",
    "Linnaeus the botanist",
    "Pythagoras of Samos",
];

/// Synsets a sample (`--semantic-sample`) always includes, so that the queries above have
/// their answers in it.
pub const ANSWERS: [&str; 5] = [
    "noun/fibonacci_sequence/",
    "noun/fibonacci_number/",
    "noun/hubble's_constant/",
    "noun/linnaeus/",
    "noun/pythagoras/",
];

fn show(rank: usize, score: f64, key: &[u8], text: &str) {
    println!(
        "      {}. {:>7.3}  {:<28} {}",
        rank + 1,
        score,
        String::from_utf8_lossy(key),
        clip(text, 56)
    );
}

/// Keyword, meaning and hybrid top 3 for each of `NAMED`, then a phrase and a write seen by
/// the text index at once; returns the queries where hybrid found a gloss that meaning alone
/// did not have in its top 3.
pub fn tour(db: &shale::Db, vectors: &VectorIndex, text: &TextIndex) -> Result<usize, String> {
    let stats = text.stats();
    println!(
        "\n3. Keyword and hybrid search: a text index over the same glosses ({} documents, {} \
         terms), exact at every write",
        stats.documents, stats.terms
    );
    let mut hybrid_found_more = 0;
    for query in NAMED {
        hybrid_found_more += usize::from(three_ways(db, vectors, text, query)?);
    }
    phrase(text)?;
    write_seen_at_once(db, text)?;
    Ok(hybrid_found_more)
}

/// An error as the demo reports it.
fn message(e: shale::Error) -> String {
    e.to_string()
}

/// `query` by keywords, by meaning and by both fused, each top 3 printed; true if hybrid
/// found a gloss that meaning alone did not.
fn three_ways(
    db: &shale::Db,
    vectors: &VectorIndex,
    text: &TextIndex,
    query: &str,
) -> Result<bool, String> {
    let t = Instant::now();
    let words = text
        .search(query, &KeywordOptions::k(3).highlight())
        .map_err(message)?;
    let keyword_ms = t.elapsed().as_secs_f64() * 1e3;
    let meaning = vectors
        .search(query, &SearchOptions::k(3))
        .map_err(message)?;
    let t = Instant::now();
    let fused =
        hybrid::search(text, vectors, query, None, &HybridOptions::k(3)).map_err(message)?;
    let hybrid_ms = t.elapsed().as_secs_f64() * 1e3;
    println!("\n  \"{query}\"");
    println!("    by keywords ({keyword_ms:.2} ms), matches marked:");
    for (i, h) in words.iter().enumerate() {
        let marked = h.text.as_deref().map_or(String::new(), |t| {
            shale_search::text::snippet(t, &h.highlights, 200, "[", "]")
        });
        show(i, h.score, &h.key, &marked);
    }
    println!("    by meaning:");
    for (i, h) in meaning.iter().enumerate() {
        show(i, f64::from(h.score), &h.key, h.text().unwrap_or_default());
    }
    println!("    hybrid, reciprocal rank fusion ({hybrid_ms:.1} ms with the embedding):");
    let mut new = Vec::new();
    for (i, h) in fused.iter().enumerate() {
        let value = db.get(&h.key).map_err(message)?.unwrap_or_default();
        show(i, h.score, &h.key, &String::from_utf8_lossy(&value));
        if !meaning.iter().any(|m| m.key == h.key) {
            new.push(String::from_utf8_lossy(&h.key).into_owned());
        }
    }
    if !new.is_empty() {
        println!(
            "    hybrid found what meaning alone did not: {}",
            new.join(", ")
        );
    }
    Ok(!new.is_empty())
}

/// The glosses that hold a phrase.
fn phrase(text: &TextIndex) -> Result<(), String> {
    let phrase = text
        .search(
            "sum of the two preceding",
            &KeywordOptions::k(3).mode(Match::Phrase),
        )
        .map_err(message)?;
    println!(
        "\n  the phrase \"sum of the two preceding\": {}",
        phrase
            .iter()
            .map(|h| String::from_utf8_lossy(&h.key).into_owned())
            .collect::<Vec<_>>()
            .join(", ")
    );
    Ok(())
}

/// A gloss put is found by its words as the put returns, and gone as its delete returns.
fn write_seen_at_once(db: &shale::Db, text: &TextIndex) -> Result<(), String> {
    let key = "noun/zzz_demo/00000000";
    db.put(key, "a made-up word: shalequartz, for the demo")
        .map_err(message)?;
    let found = text
        .search("shalequartz", &KeywordOptions::k(1))
        .map_err(message)?;
    db.delete(key).map_err(message)?;
    let gone = text
        .search("shalequartz", &KeywordOptions::k(1))
        .map_err(message)?;
    println!(
        "  a gloss put is found by its words as the put returns ({}), and gone as its delete \
         returns ({})",
        if found.len() == 1 {
            "found"
        } else {
            "NOT FOUND (bug)"
        },
        if gone.is_empty() {
            "gone"
        } else {
            "STILL FOUND (bug)"
        }
    );
    Ok(())
}
