//! Analyzers: how a text becomes the terms a text index stores and a query looks up.
//!
//! Every analyzer starts from Unicode word boundaries (UAX #29, through the
//! `unicode-segmentation` crate) and lower-cases each word. Then:
//!
//! | analyzer  | what it adds                                                            |
//! |-----------|-------------------------------------------------------------------------|
//! | `Simple`  | nothing                                                                 |
//! | `English` | drops Lucene's 33 English stop words, stems with Snowball's English (Porter2) stemmer (`rust-stemmers`) |
//! | `Cjk`     | a run of Chinese, Japanese or Korean characters becomes its overlapping bigrams ("全文検索" → 全文, 文検, 検索), a lone one itself |
//!
//! Word boundaries alone find no words in Chinese or Japanese text (UAX #29 splits Han
//! text into single characters), so `Cjk` indexes character bigrams, as Lucene's
//! `CJKAnalyzer` and Elasticsearch's `cjk_bigram` do: a query's bigrams must appear in the
//! document, with no dictionary to ship or keep current.
//!
//! A token carries its term, the byte span of the text it came from (for highlights) and
//! its position (for phrase queries). A dropped stop word still takes a position, so
//! "engine of the year" does not match the phrase "engine year".
//!
//! Pure functions: any thread may analyze at any time. Each thread keeps the stems of the
//! words it stemmed lately (a cache, not state: a stem is a function of its word), since
//! stemming is most of the cost of analyzing English and a text's words repeat.

use std::cell::RefCell;
use std::collections::HashMap;

use rust_stemmers::{Algorithm, Stemmer};
use unicode_segmentation::UnicodeSegmentation;

use super::short::ShortBytes;
use super::term_hash::TermHashing;

/// Which analyzer an index uses; stored in the index's definition (`format.rs`), so the
/// tag of each is fixed forever.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Analyzer {
    /// Unicode words, lower-cased.
    Simple,
    /// Unicode words, lower-cased, English stop words dropped, Porter2-stemmed.
    #[default]
    English,
    /// Unicode words, lower-cased; Chinese, Japanese and Korean runs as bigrams.
    Cjk,
}

/// One term of a text, where it came from, and its position.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token {
    pub term: String,
    /// The byte span of the text the term came from.
    pub start: usize,
    pub end: usize,
    /// The token's ordinal in the text (a dropped stop word takes one too).
    pub position: u32,
}

/// Whether `word` (lower case) is one of Lucene's 33 English stop words
/// (`EnglishAnalyzer.ENGLISH_STOP_WORDS_SET`).
fn is_english_stop_word(word: &str) -> bool {
    matches!(
        word,
        "a" | "an"
            | "and"
            | "are"
            | "as"
            | "at"
            | "be"
            | "but"
            | "by"
            | "for"
            | "if"
            | "in"
            | "into"
            | "is"
            | "it"
            | "no"
            | "not"
            | "of"
            | "on"
            | "or"
            | "such"
            | "that"
            | "the"
            | "their"
            | "then"
            | "there"
            | "these"
            | "they"
            | "this"
            | "to"
            | "was"
            | "will"
            | "with"
    )
}

/// The most words a thread's stem cache holds (with their stems, inline: about 4 MiB); it
/// is emptied when full. English text holds tens of thousands of distinct words, and a
/// cache that holds them halves the cost of analysis.
const STEM_CACHE_WORDS: usize = 1 << 16;
/// Longer words are stemmed every time (they are rare, and their stems would not be
/// inline).
const STEM_CACHE_WORD_BYTES: usize = super::short::INLINE;

/// A thread's stemmer and the stems it found lately, by word.
struct Stems {
    stemmer: Stemmer,
    cache: HashMap<ShortBytes, ShortBytes, TermHashing>,
}

thread_local! {
    static STEMS: RefCell<Stems> = RefCell::new(Stems {
        stemmer: Stemmer::create(Algorithm::English),
        cache: HashMap::default(),
    });
}

/// The Porter2 stem of `word` (lower case) into `out`.
fn stem_into(word: &str, out: &mut String) {
    out.clear();
    STEMS.with(|stems| {
        let mut stems = stems.borrow_mut();
        let cached = stems.cache.get(word.as_bytes());
        if let Some(stem) = cached.and_then(|s| std::str::from_utf8(s.as_bytes()).ok()) {
            out.push_str(stem);
            return;
        }
        out.push_str(&stems.stemmer.stem(word));
        if word.len() <= STEM_CACHE_WORD_BYTES {
            if stems.cache.len() >= STEM_CACHE_WORDS {
                stems.cache.clear();
            }
            stems
                .cache
                .insert(word.as_bytes().into(), out.as_bytes().into());
        }
    });
}

/// `word` in lower case, into `out`.
fn lower_case_into(word: &str, out: &mut String) {
    out.clear();
    match word.is_ascii() {
        true => {
            out.push_str(word);
            out.make_ascii_lowercase();
        }
        // `str::to_lowercase`, not per character: a final capital sigma becomes `ς`.
        false => out.push_str(&word.to_lowercase()),
    }
}

impl Analyzer {
    /// The analyzer's tag in the index definition.
    pub(crate) fn tag(self) -> u8 {
        match self {
            Analyzer::Simple => 1,
            Analyzer::English => 2,
            Analyzer::Cjk => 3,
        }
    }

    pub(crate) fn from_tag(tag: u8) -> Option<Analyzer> {
        match tag {
            1 => Some(Analyzer::Simple),
            2 => Some(Analyzer::English),
            3 => Some(Analyzer::Cjk),
            _ => None,
        }
    }

    /// The analyzer's name, as the CLI and Python spell it.
    pub fn name(self) -> &'static str {
        match self {
            Analyzer::Simple => "simple",
            Analyzer::English => "english",
            Analyzer::Cjk => "cjk",
        }
    }

    /// The analyzer named `name` ("simple", "english", "cjk").
    pub fn from_name(name: &str) -> Option<Analyzer> {
        [Analyzer::Simple, Analyzer::English, Analyzer::Cjk]
            .into_iter()
            .find(|a| a.name() == name)
    }

    /// The tokens of `text`, in order.
    pub fn tokens(self, text: &str) -> Vec<Token> {
        let mut out = Vec::new();
        self.for_each_token(text, |t| out.push(t));
        out
    }

    /// The terms of `text`, in order (a term once per occurrence).
    pub fn terms(self, text: &str) -> Vec<String> {
        let mut out = Vec::new();
        self.for_each_token(text, |t| out.push(t.term));
        out
    }

    /// Call `f` with each token of `text`, in order.
    pub fn for_each_token(self, text: &str, mut f: impl FnMut(Token)) {
        self.scan(text, |term, start, end, position| {
            f(Token {
                term: term.to_owned(),
                start,
                end,
                position,
            })
        });
    }

    /// Call `f` with each term of `text`, in order, borrowed: what a document record
    /// counts, without a string per token.
    pub(crate) fn for_each_term(self, text: &str, mut f: impl FnMut(&str)) {
        self.scan(text, |term, _, _, _| f(term));
    }

    /// Call `f` with each token of `text` as (term, start, end, position), in order.
    fn scan(self, text: &str, mut f: impl FnMut(&str, usize, usize, u32)) {
        let mut position = 0u32;
        let (mut lower, mut stemmed) = (String::with_capacity(32), String::with_capacity(32));
        let mut words = text.unicode_word_indices().peekable();
        while let Some((start, word)) = words.next() {
            if self == Analyzer::Cjk && word.chars().all(is_cjk) {
                // Join the run of CJK words that touch one another: UAX #29 splits Han
                // text into single characters.
                let mut end = start + word.len();
                while let Some(&(next, w)) = words.peek() {
                    if next != end || !w.chars().all(is_cjk) {
                        break;
                    }
                    end = next + w.len();
                    words.next();
                }
                let run = text.get(start..end).unwrap_or("");
                for_each_bigram(run, start, &mut position, &mut f);
                continue;
            }
            lower_case_into(word, &mut lower);
            let at = position;
            position = position.saturating_add(1);
            let term = match self {
                Analyzer::English if is_english_stop_word(&lower) => continue,
                Analyzer::English => {
                    stem_into(&lower, &mut stemmed);
                    &stemmed
                }
                Analyzer::Simple | Analyzer::Cjk => &lower,
            };
            f(term, start, start + word.len(), at);
        }
    }
}

/// The bigrams of a run of CJK characters that starts at byte `base` of the text (the run
/// itself if it is one character), each at the next position.
fn for_each_bigram(
    run: &str,
    base: usize,
    position: &mut u32,
    f: &mut impl FnMut(&str, usize, usize, u32),
) {
    let chars: Vec<(usize, char)> = run.char_indices().collect();
    let end_of = |i: usize| chars.get(i).map_or(run.len(), |&(at, _)| at);
    let windows = chars.len().saturating_sub(1).max(1);
    for i in 0..windows {
        let (from, to) = (end_of(i), end_of(i + 2));
        let Some(term) = run.get(from..to) else {
            continue;
        };
        f(term, base + from, base + to, *position);
        *position = position.saturating_add(1);
    }
}

/// Whether `c` is a Chinese, Japanese or Korean character (Han, kana, Hangul).
fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x3040..=0x30FF      // Hiragana, Katakana
        | 0x31F0..=0x31FF    // Katakana phonetic extensions
        | 0x3400..=0x4DBF    // CJK Extension A
        | 0x4E00..=0x9FFF    // CJK Unified Ideographs
        | 0xAC00..=0xD7AF    // Hangul syllables
        | 0x1100..=0x11FF    // Hangul Jamo
        | 0x3130..=0x318F    // Hangul compatibility Jamo
        | 0xF900..=0xFAFF    // CJK compatibility ideographs
        | 0xFF66..=0xFF9F    // half-width Katakana
        | 0x20000..=0x2FA1F  // CJK Extensions B and later, compatibility supplement
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn terms(a: Analyzer, text: &str) -> Vec<String> {
        a.terms(text)
    }

    #[test]
    fn english_drops_exactly_lucenes_stop_words() {
        let lucene = "a an and are as at be but by for if in into is it no not of on or such \
                      that the their then there these they this to was will with";
        assert_eq!(lucene.split(' ').filter(|w| !w.is_empty()).count(), 33);
        assert!(terms(Analyzer::English, lucene).is_empty());
        let near = "i am an ant on ore thee them those too wa wil witH";
        assert_eq!(
            terms(Analyzer::English, near),
            ["i", "am", "ant", "ore", "thee", "them", "those", "too", "wa", "wil"]
        );
    }

    #[test]
    fn cached_stems_equal_the_stemmer_s() {
        let stemmer = Stemmer::create(Algorithm::English);
        let long = "generalization".repeat(3);
        let words = [
            "running",
            "cats",
            "generously",
            "ponies",
            "a",
            "ÉLAN",
            "ΟΔΟΣ",
            &long,
        ];
        let (mut lower, mut stemmed) = (String::with_capacity(32), String::with_capacity(32));
        for round in 0..3 {
            for w in words {
                lower_case_into(w, &mut lower);
                assert_eq!(lower, w.to_lowercase());
                stem_into(&lower, &mut stemmed);
                assert_eq!(stemmed, stemmer.stem(&lower), "{w} (round {round})");
            }
        }
    }

    #[test]
    fn simple_splits_unicode_words_and_lower_cases() {
        assert_eq!(
            terms(Analyzer::Simple, "The Porter-Stemmer, RFC 9110; ENOSPC!"),
            ["the", "porter", "stemmer", "rfc", "9110", "enospc"]
        );
    }

    #[test]
    fn english_stems_and_drops_stop_words_keeping_positions() {
        let tokens = Analyzer::English.tokens("The engines of running Cats");
        let got: Vec<(&str, u32)> = tokens
            .iter()
            .map(|t| (t.term.as_str(), t.position))
            .collect();
        assert_eq!(got, [("engin", 1), ("run", 3), ("cat", 4)]);
        assert_eq!(
            &"The engines of running Cats"[tokens[0].start..tokens[0].end],
            "engines"
        );
        assert_eq!(
            terms(Analyzer::English, "stemming stemmed stems"),
            ["stem", "stem", "stem"]
        );
    }

    #[test]
    fn cjk_runs_become_bigrams_with_spans() {
        let text = "全文検索とは Shale です";
        let tokens = Analyzer::Cjk.tokens(text);
        let got: Vec<&str> = tokens.iter().map(|t| t.term.as_str()).collect();
        assert_eq!(
            got,
            ["全文", "文検", "検索", "索と", "とは", "shale", "です"]
        );
        for t in &tokens {
            assert_eq!(text[t.start..t.end].to_lowercase(), t.term);
        }
        let positions: Vec<u32> = tokens.iter().map(|t| t.position).collect();
        assert_eq!(positions, [0, 1, 2, 3, 4, 5, 6]);
        assert_eq!(terms(Analyzer::Cjk, "中"), ["中"]);
        assert_eq!(terms(Analyzer::Cjk, "我爱北京"), ["我爱", "爱北", "北京"]);
    }

    #[test]
    fn names_and_tags_round_trip() {
        for a in [Analyzer::Simple, Analyzer::English, Analyzer::Cjk] {
            assert_eq!(Analyzer::from_name(a.name()), Some(a));
            assert_eq!(Analyzer::from_tag(a.tag()), Some(a));
        }
        assert_eq!(Analyzer::from_tag(0), None);
        assert_eq!(Analyzer::from_name("klingon"), None);
    }
}
