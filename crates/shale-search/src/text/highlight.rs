//! What a hit's text shows of the query: the spans of its matching terms, a snippet around
//! them, and whether it holds the query as a phrase. Each analyzes the hit's text again
//! with the index's analyzer (positions and spans are not stored: a hit's text is read at
//! the search's snapshot, so it is the text that was scored).

use std::collections::HashSet;
use std::ops::Range;

use super::analyzer::{Analyzer, Token};

/// Byte spans of `text` whose terms are among `terms`, in order.
pub(crate) fn spans(analyzer: Analyzer, text: &str, terms: &[String]) -> Vec<Range<usize>> {
    let wanted: HashSet<&str> = terms.iter().map(String::as_str).collect();
    let mut out: Vec<Range<usize>> = Vec::new();
    analyzer.for_each_token(text, |t| {
        if wanted.contains(t.term.as_str()) {
            match out.last_mut() {
                // Overlapping bigrams of one run of CJK text merge into one span.
                Some(last) if t.start <= last.end => last.end = last.end.max(t.end),
                _ => out.push(t.start..t.end),
            }
        }
    });
    out
}

/// Whether `text` holds the terms of `phrase` (a query's tokens) at the same distances
/// from one another as in the query.
pub(crate) fn has_phrase(analyzer: Analyzer, text: &str, phrase: &[Token]) -> bool {
    let Some(first) = phrase.first() else {
        return false;
    };
    let tokens = analyzer.tokens(text);
    let at: std::collections::HashMap<(&str, u32), ()> = tokens
        .iter()
        .map(|t| ((t.term.as_str(), t.position), ()))
        .collect();
    tokens.iter().filter(|t| t.term == first.term).any(|start| {
        phrase.iter().all(|q| {
            let offset = q.position - first.position;
            start
                .position
                .checked_add(offset)
                .is_some_and(|p| at.contains_key(&(q.term.as_str(), p)))
        })
    })
}

/// A snippet of `text` of about `width` bytes around its first span, with each span in
/// it wrapped in `open` and `close` ("…" where the text was cut).
pub fn snippet(
    text: &str,
    spans: &[Range<usize>],
    width: usize,
    open: &str,
    close: &str,
) -> String {
    let first = spans.first().map_or(0, |s| s.start);
    let mut start = first.saturating_sub(width / 4);
    while start > 0 && !text.is_char_boundary(start) {
        start -= 1;
    }
    let mut end = (start + width).min(text.len());
    while end < text.len() && !text.is_char_boundary(end) {
        end += 1;
    }
    let mut out = String::with_capacity(end - start + 16);
    if start > 0 {
        out.push('…');
    }
    let mut at = start;
    for s in spans.iter().filter(|s| s.start >= start && s.end <= end) {
        out.push_str(text.get(at..s.start).unwrap_or(""));
        out.push_str(open);
        out.push_str(text.get(s.start..s.end).unwrap_or(""));
        out.push_str(close);
        at = s.end;
    }
    out.push_str(text.get(at..end).unwrap_or(""));
    if end < text.len() {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_mark_stemmed_matches_and_merge_cjk_bigrams() {
        let text = "Stemmers stem; the stemming stemmed.";
        let s = spans(Analyzer::English, text, &["stem".into()]);
        let words: Vec<&str> = s.iter().map(|r| &text[r.clone()]).collect();
        assert_eq!(words, ["stem", "stemming", "stemmed"]);
        let cjk = "我爱北京天安门";
        let s = spans(Analyzer::Cjk, cjk, &["北京".into(), "京天".into()]);
        assert_eq!(
            s.iter().map(|r| &cjk[r.clone()]).collect::<Vec<_>>(),
            ["北京天"]
        );
    }

    #[test]
    fn phrases_need_the_query_order_and_distance() {
        let q = Analyzer::English.tokens("Porter stemmer");
        assert!(has_phrase(
            Analyzer::English,
            "the porter stemmers of 1980",
            &q
        ));
        assert!(!has_phrase(Analyzer::English, "a stemmer by porter", &q));
        assert!(!has_phrase(
            Analyzer::English,
            "porter's famous stemmer",
            &q
        ));
        let gap = Analyzer::English.tokens("engine of the year");
        assert!(has_phrase(
            Analyzer::English,
            "Engine of the Year 2026",
            &gap
        ));
        assert!(!has_phrase(Analyzer::English, "engine year", &gap));
    }

    #[test]
    fn snippets_wrap_spans_and_cut_at_character_boundaries() {
        let text = "ééééé keyword ééééé";
        let s = spans(Analyzer::Simple, text, &["keyword".into()]);
        assert_eq!(snippet(text, &s, 200, "[", "]"), "ééééé [keyword] ééééé");
        let short = snippet(text, &s, 12, "[", "]");
        assert!(short.contains("[keyword"), "{short}");
    }
}
