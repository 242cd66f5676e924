//! WordNet 3.0 data files (`data.noun`, `data.verb`, `data.adj`, `data.adv`, see the
//! `wndb(5WN)` manual page): one synset per line,
//!
//! ```text
//! offset lex_filenum ss_type w_cnt (word lex_id){w_cnt} p_cnt (pointer){p_cnt} [frames] | gloss
//! ```
//!
//! with `w_cnt` in hexadecimal and words using `_` for spaces. Lines starting with two spaces
//! are the licence header.

use std::path::Path;

/// One synset: its key in a database of glosses (the demo's, the benches') and the text
/// that is stored and embedded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gloss {
    /// `pos/first_word/offset`, e.g. `noun/dog/02084071`: words of one part of speech
    /// sort together, and a prefix scan finds every sense of a word.
    pub key: String,
    /// `word, synonym: definition; "example"`.
    pub text: String,
}

/// Parse one data line of part of speech `pos`; `None` for header lines and lines that
/// do not follow the format.
pub fn parse_line(pos: &str, line: &str) -> Option<Gloss> {
    if line.starts_with("  ") {
        return None;
    }
    let (head, gloss) = line.split_once(" | ")?;
    let mut fields = head.split_ascii_whitespace();
    let offset = fields.next()?;
    let _lex_filenum = fields.next()?;
    let _ss_type = fields.next()?;
    let count = usize::from_str_radix(fields.next()?, 16).ok()?;
    let mut words = Vec::with_capacity(count);
    for _ in 0..count {
        let word = fields.next()?;
        let _lex_id = fields.next()?;
        // Adjectives may carry a syntactic marker such as `(p)`.
        let word = word.split('(').next().unwrap_or(word);
        words.push(word.replace('_', " "));
    }
    let first = words.first()?.to_lowercase().replace(' ', "_");
    Some(Gloss {
        key: format!("{pos}/{first}/{offset}"),
        text: format!("{}: {}", words.join(", "), gloss.trim()),
    })
}

/// Every synset of the four data files in `dir`, nouns first.
///
/// # Errors
/// A file that cannot be read, with its path.
pub fn load(dir: &Path) -> Result<Vec<Gloss>, String> {
    let mut out = Vec::new();
    for (file, pos) in [
        ("data.noun", "noun"),
        ("data.verb", "verb"),
        ("data.adj", "adj"),
        ("data.adv", "adv"),
    ] {
        let path = dir.join(file);
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        out.extend(text.lines().filter_map(|line| parse_line(pos, line)));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_noun_and_an_adjective() {
        let noun = "02084071 05 n 03 dog 0 domestic_dog 0 Canis_familiaris 0 023 @ 02083346 n \
                    0000 | a member of the genus Canis; \"the dog barked all night\"  ";
        assert_eq!(
            parse_line("noun", noun),
            Some(Gloss {
                key: "noun/dog/02084071".into(),
                text: "dog, domestic dog, Canis familiaris: a member of the genus Canis; \
                       \"the dog barked all night\""
                    .into(),
            })
        );
        let adj = "00001740 00 a 01 able(p) 0 005 = 05207437 n 0000 | (usually followed by `to') \
                   having the necessary means";
        assert_eq!(parse_line("adj", adj).unwrap().key, "adj/able/00001740");
        assert_eq!(parse_line("noun", "  1 This software and database"), None);
        assert_eq!(parse_line("noun", "garbage"), None);
    }
}
