//! Keyword queries over the inverted index: BM25 scores, the top k by MaxScore pruning,
//! conjunctions, and the candidates of a phrase.
//!
//! BM25, as Lucene defines it since 8.0 (and tantivy, bm25s), with N the live documents,
//! `df` a term's live documents, `len` a document's tokens and `avg_len` their mean:
//!
//! ```text
//!   idf(t)    = ln(1 + (N - df + 0.5) / (df + 0.5))
//!   w(t, d)   = idf(t) * (tf * (k1 + 1)) / (tf + k1 * (1 - b + b * len / avg_len))
//!   score(d)  = sum of w(t, d) over the query's distinct terms that d holds, in query order
//! ```
//!
//! computed in `f64` in exactly that order, so the same document gets the same score
//! bit for bit whichever way it was found (pruned or exhaustive) and wherever it is
//! stored. Hits are ordered by score, then by key.
//!
//! **MaxScore** (Turtle and Flood, 1995). Each term has an upper bound on its weight, from
//! its largest `tf` and its shortest document (`w` grows with `tf` and shrinks with `len`).
//! Sort the terms by bound; once the top k are full with a k-th score θ, the terms whose
//! bounds add up to less than θ are *non-essential*: a document that holds only those
//! cannot enter the top k. Candidates come from the essential terms alone; a candidate
//! gets the non-essential terms' weights by a seek into their lists, from the largest
//! bound down, and is dropped as soon as its score so far plus the bounds left is below θ.
//!
//! ```text
//!   bounds (sorted)   0.4  0.9 | 2.1  3.0        θ = 1.5: 0.4 + 0.9 < θ
//!                    non-essential | essential: only these lists are walked
//! ```
//!
//! **Windows** (as Lucene's MaxScore bulk scorer does). The essential lists are walked a
//! window of documents at a time, from the first document any of them holds to the end of
//! the first of their current blocks of 64 postings (at most 4096 documents). Within a
//! window each essential list is scored term at a time into an array of partial scores
//! and a bitset; then each document the bitset names, in order, takes the non-essential
//! terms' weights. Only a document that can still reach θ gets its exact score, summed in
//! query order; the partial sums serve pruning alone.
//!
//! **Block bounds** (block-max MaxScore, after Ding and Suel's block-max WAND): each term
//! also bounds every block of 64 postings (`inverted.rs`). A window lies within each
//! essential list's current block, so when those blocks' bounds and the non-essential
//! terms' bounds cannot reach θ, the whole window is skipped unscored.
//!
//! **A starting k-th score** (after Kane and Tompa's initial thresholds, 2018). Until the
//! top k is full nothing is pruned, and its first k-th score is low. Each term keeps a few
//! of its postings with large weights (`Term::best_postings`, a hint kept as documents
//! are put); a query scores the documents among them that are live and admitted by the
//! weights of the terms they are found under, a lower bound on each one's score, and
//! prunes from the start with the k-th largest: k documents reach it, so the final k-th
//! score does too.
//!
//! Hits that tie on score are ordered by key, and short texts tie often. A block also
//! records the first eight bytes of its smallest key: when a window holds one term alone,
//! its block bound is exactly the weight the block's best posting would get, so if that
//! bound is at most the k-th score and every key of the block comes after the k-th hit's
//! (by those eight bytes), nothing in the window can enter, ties included. The top k
//! compares ties by those eight bytes too (`Inverted::prefix_of`), reading a whole key
//! only when they are equal.
//!
//! The pruning compares with a margin of 1e-9 relative, so a rounding difference between
//! a sum of bounds and a score can never drop a document that belongs in the top k: the
//! result is the exhaustive one (tests/search/keyword_oracle.rs checks it on every query).

mod cursor;
mod scoring;
mod top;

use cursor::{window_end, Cursor, Window};
use top::TopK;

pub use scoring::{Scored, Scoring};

use super::inverted::{DocId, BEST};

impl Scoring<'_> {
    /// Every admitted document holding any term, scored, unordered: the exhaustive
    /// reference.
    pub fn all_any(&self) -> Vec<Scored> {
        let mut weights: std::collections::BTreeMap<DocId, Vec<Option<f64>>> = Default::default();
        for (qi, (term, idf)) in self.terms.iter().enumerate() {
            for (&id, &tf) in term.ids.iter().zip(&term.tfs) {
                if !self.admits(id) {
                    continue;
                }
                let w = self.bm25.weight(*idf, tf, self.ix.len_of(id), self.avg_len);
                let slot = weights
                    .entry(id)
                    .or_insert_with(|| vec![None; self.terms.len()]);
                if let Some(s) = slot.get_mut(qi) {
                    *s = Some(w);
                }
            }
        }
        weights
            .into_iter()
            .map(|(id, w)| Scored {
                id,
                score: Self::total(&w),
            })
            .collect()
    }

    /// The top `k` documents holding any term, by MaxScore over windows of documents.
    pub fn top_any(&self, k: usize) -> Vec<Scored> {
        let mut cursors: Vec<Cursor<'_>> = self
            .terms
            .iter()
            .enumerate()
            .map(|(qi, (term, idf))| Cursor::new(qi, term, *idf, self.bound(term, *idf)))
            .collect();
        cursors.sort_by(|a, b| a.bound.total_cmp(&b.bound));
        // prefix[i]: the sum of the bounds of cursors 0..=i.
        let prefix: Vec<f64> = cursors
            .iter()
            .scan(0.0, |sum, c| {
                *sum += c.bound;
                Some(*sum)
            })
            .collect();
        // by_query[qi]: the cursor of query term qi.
        let mut by_query = vec![0; cursors.len()];
        for (i, c) in cursors.iter().enumerate() {
            if let Some(slot) = by_query.get_mut(c.qi) {
                *slot = i;
            }
        }
        let mut top = TopK::new(k);
        if let Some(theta) = self.starting_kth(k) {
            top.start_at(theta);
        }
        let mut essential: usize = 0;
        let mut window = Window::default();
        let mut weights = vec![None; self.terms.len()];
        loop {
            while essential < cursors.len()
                && top.below(prefix.get(essential).copied().unwrap_or(f64::MAX))
            {
                essential += 1;
            }
            let rest = essential
                .checked_sub(1)
                .and_then(|i| prefix.get(i))
                .copied()
                .unwrap_or(0.0);
            {
                let essentials = cursors.get_mut(essential..).unwrap_or(&mut []);
                let Some(base) = essentials.iter().filter_map(Cursor::doc).min() else {
                    break;
                };
                let end = window_end(essentials, base);
                if self.window_cannot_enter(essentials, end, rest, essential == 0, &top) {
                    for c in essentials.iter_mut() {
                        c.seek(end);
                    }
                    continue;
                }
                window.start(base, end);
                for c in essentials.iter_mut() {
                    self.score_window(c, &mut window);
                }
            }
            for (doc, partial) in window.drain() {
                let non_essential = cursors.get_mut(..essential).unwrap_or(&mut []);
                let full = self.add_non_essential(non_essential, &prefix, doc, partial, &top);
                if full.is_some_and(|score| !top.below(score)) {
                    let score =
                        self.exact_score(&mut cursors, &by_query, essential, doc, &mut weights);
                    top.offer(self.ix, doc, score);
                }
            }
        }
        top.into_sorted()
    }

    /// A k-th score the top k surely reaches, from the terms' best postings: each admitted
    /// document among them scores at least the sum of the weights of the terms it is
    /// found under, so the k-th largest such sum is a lower bound on the final k-th score.
    /// `None` if they name fewer than `k` admitted documents.
    fn starting_kth(&self, k: usize) -> Option<f64> {
        let mut found: Vec<(DocId, f64)> = Vec::with_capacity(self.terms.len() * 2 * BEST);
        for (term, idf) in &self.terms {
            for (id, tf) in term.best_postings() {
                if let Some(len) = self.admitted_len(id) {
                    found.push((id, self.bm25.weight(*idf, tf, len, self.avg_len)));
                }
            }
        }
        if found.len() < k || k == 0 {
            return None;
        }
        found.sort_unstable_by_key(|&(id, _)| id);
        found.dedup_by(|next, kept| {
            let same = next.0 == kept.0;
            if same {
                kept.1 += next.1;
            }
            same
        });
        let kth = k.checked_sub(1).filter(|&i| i < found.len())?;
        found.select_nth_unstable_by(kth, |a, b| b.1.total_cmp(&a.1));
        found.get(kth).map(|&(_, w)| w)
    }

    /// The top `k` documents holding every term (all of them, when `k` is `usize::MAX`),
    /// `required` being the number of distinct query terms: if the index lacks one, none.
    pub fn top_all(&self, k: usize, required: usize) -> Vec<Scored> {
        if self.terms.len() < required || self.terms.is_empty() {
            return Vec::new();
        }
        let mut cursors: Vec<Cursor<'_>> = self
            .terms
            .iter()
            .enumerate()
            .map(|(qi, (term, idf))| Cursor::new(qi, term, *idf, 0.0))
            .collect();
        // Drive by the shortest list; seek the others.
        cursors.sort_by_key(|c| c.term.ids.len());
        let mut top = TopK::new(k);
        let mut weights = vec![None; self.terms.len()];
        let Some((lead, rest)) = cursors.split_first_mut() else {
            return Vec::new();
        };
        'docs: while let Some(doc) = lead.doc() {
            lead.at += 1;
            if !self.admits(doc) {
                continue;
            }
            for c in rest.iter_mut() {
                c.seek(doc);
                if c.doc() != Some(doc) {
                    continue 'docs;
                }
            }
            weights.iter_mut().for_each(|w| *w = None);
            lead.at -= 1;
            let w = lead.weight(self, doc);
            set(&mut weights, lead.qi, w);
            lead.at += 1;
            for c in rest.iter_mut() {
                let w = c.weight(self, doc);
                set(&mut weights, c.qi, w);
            }
            top.offer(self.ix, doc, Self::total(&weights));
        }
        top.into_sorted()
    }

    /// Whether no document of the window `[.., end)` can enter the full top k: the
    /// essential cursors with postings in it (all within their current blocks, see
    /// [`window_end`]) have block bounds that, with `rest` (the non-essential terms' bounds;
    /// `alone`: there are none), stay below the k-th score, or, for one term alone, at most
    /// tie it with later keys.
    fn window_cannot_enter(
        &self,
        essentials: &mut [Cursor<'_>],
        end: DocId,
        rest: f64,
        alone: bool,
        top: &TopK<'_>,
    ) -> bool {
        let (mut on_window, mut blocks, mut min_key) = (0, 0.0, 0);
        for c in essentials
            .iter_mut()
            .filter(|c| c.doc().is_some_and(|d| d < end))
        {
            on_window += 1;
            blocks += c.block_bound(self);
            min_key = c.block_min_key();
        }
        // One term and nothing else: the block bound is that term's weight at the block's
        // largest tf and shortest document, computed as a score is, so a score never
        // exceeds it, and equal scores are decided by key.
        let exact = on_window == 1 && alone;
        top.below(blocks + rest) || (exact && top.loses_tie(blocks, min_key))
    }

    /// Add the weights of `c`'s postings in the window to its partial scores, leaving `c`
    /// at the window's end.
    fn score_window(&self, c: &mut Cursor<'_>, window: &mut Window) {
        c.window_start = c.at;
        let term = c.term;
        for &doc in term.ids.get(c.at..).unwrap_or(&[]) {
            if doc >= window.end {
                break;
            }
            if let Some(len) = self.admitted_len(doc) {
                let w = c.weight_at(self, c.at, len);
                window.add(doc, w);
            }
            c.at += 1;
        }
    }

    /// `doc`'s score from the essential terms' `partial` and the non-essential terms'
    /// weights (summed in cursor order: for pruning), their cursors seeking `doc` from the
    /// largest bound down (`prefix[i]`: the bounds of cursors `0..=i`); `None` as soon as
    /// the score so far and the bounds left cannot reach the k-th score.
    fn add_non_essential(
        &self,
        non_essential: &mut [Cursor<'_>],
        prefix: &[f64],
        doc: DocId,
        mut partial: f64,
        top: &TopK<'_>,
    ) -> Option<f64> {
        for (i, c) in non_essential.iter_mut().enumerate().rev() {
            if top.below(partial + prefix.get(i).copied().unwrap_or(0.0)) {
                return None;
            }
            c.seek(doc);
            if c.doc() == Some(doc) {
                partial += c.weight_at(self, c.at, self.ix.len_of(doc));
            }
        }
        Some(partial)
    }

    /// `doc`'s score, summed in query order as every score is (the window's partial sums
    /// are in cursor order): the essential cursors (from `essential` on) find it among their
    /// window's postings, the non-essential ones are on it or past it.
    fn exact_score(
        &self,
        cursors: &mut [Cursor<'_>],
        by_query: &[usize],
        essential: usize,
        doc: DocId,
        weights: &mut [Option<f64>],
    ) -> f64 {
        let len = self.ix.len_of(doc);
        for (qi, slot) in weights.iter_mut().enumerate() {
            let i = by_query.get(qi).copied().unwrap_or(usize::MAX);
            *slot = cursors.get_mut(i).and_then(|c| {
                let at = if i >= essential {
                    let window = c.term.ids.get(c.window_start..c.at).unwrap_or(&[]);
                    c.window_start + window.binary_search(&doc).ok()?
                } else {
                    Some(c.at).filter(|_| c.doc() == Some(doc))?
                };
                Some(c.weight_at(self, at, len))
            });
        }
        Self::total(weights)
    }

    /// `doc`'s length if it is live and its key in the range.
    fn admitted_len(&self, doc: DocId) -> Option<u32> {
        let len = self.ix.len_of(doc);
        (len != 0 && (self.lower.is_empty() && self.upper.is_none() || self.admits(doc)))
            .then_some(len)
    }
}

fn set(weights: &mut [Option<f64>], qi: usize, w: f64) {
    if let Some(slot) = weights.get_mut(qi) {
        *slot = Some(w);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::analyzer::Analyzer;
    use crate::text::bm25::Bm25;
    use crate::text::format::DocRecord;
    use crate::text::inverted::Inverted;

    /// `top_any(k)` for each of `ks` equals the first k of every scored document sorted.
    fn assert_top_equals_exhaustive(ix: &Inverted, terms: &[&str], ks: &[usize]) {
        let terms: Vec<String> = terms.iter().map(|s| s.to_string()).collect();
        let s = Scoring::new(ix, Bm25::default(), &terms, None)
            .expect("valid")
            .expect("not empty");
        let mut all = s.all_any();
        all.sort_by(|a, b| {
            b.score
                .total_cmp(&a.score)
                .then_with(|| ix.key_of(a.id).cmp(&ix.key_of(b.id)))
        });
        for &k in ks {
            let got: Vec<(DocId, f64)> = s.top_any(k).iter().map(|x| (x.id, x.score)).collect();
            let want: Vec<(DocId, f64)> = all.iter().take(k).map(|x| (x.id, x.score)).collect();
            assert_eq!(got, want, "{terms:?} k = {k}");
        }
    }

    #[test]
    fn the_starting_kth_score_is_reached_and_mostly_given() {
        // Overwrites and removals leave removed documents among the terms' best.
        let mut ix = Inverted::default();
        let mut rng = shale_rng::SplitMix64::new(5);
        let mut next = |n: u64| rng.below(n);
        for _ in 0..20_000 {
            let len = 1 + next(10);
            let text: Vec<String> = (0..len).map(|_| format!("w{}", next(60))).collect();
            let key = format!("k{:05}", next(8_000));
            ix.put(
                key.as_bytes(),
                &DocRecord::analyze(Analyzer::Simple, &text.join(" "), 0).view(),
            );
            if next(5) == 0 {
                ix.remove(format!("k{:05}", next(8_000)).as_bytes());
            }
        }
        let mut given = 0;
        for q in 0..60 {
            let terms: Vec<String> = (0..1 + q % 3).map(|i| format!("w{}", q + 7 * i)).collect();
            let s = Scoring::new(&ix, Bm25::default(), &terms, None)
                .expect("valid")
                .expect("not empty");
            let mut all: Vec<f64> = s.all_any().iter().map(|x| x.score).collect();
            all.sort_by(|a, b| b.total_cmp(a));
            for k in [1, 10] {
                if let Some(start) = s.starting_kth(k) {
                    given += 1;
                    assert!(start <= all[k - 1], "{terms:?} k = {k}");
                }
            }
        }
        assert!(given >= 100, "a start for most queries: {given} of 120");
    }

    #[test]
    fn idf_and_weight_follow_the_formula() {
        let idf = Bm25::idf(10, 2);
        assert!((idf - (1.0f64 + 8.5 / 2.5).ln()).abs() < 1e-15);
        let w = Bm25::default().weight(idf, 3, 10, 5.0);
        let expected = idf * (3.0 * 2.2) / (3.0 + 1.2 * (1.0 - 0.75 + 0.75 * 10.0 / 5.0));
        assert_eq!(w, expected);
    }

    #[test]
    fn max_score_equals_exhaustive_with_ties_and_keys_out_of_order() {
        // Short texts over a few words tie often; keys are put in shuffled order and
        // overwritten, so document numbers and key order disagree.
        let mut ix = Inverted::default();
        let words = ["red", "fox", "dog", "cat", "sun", "sea"];
        let mut rng = shale_rng::SplitMix64::new(11);
        let mut next = |n: u64| rng.below(n);
        for _ in 0..4000 {
            let key = format!("k{:05}", next(2500));
            // Distinct words: every tf is 1, so a block's bound is its shortest document's
            // score, and the k-th score ties it.
            let len = 1 + next(3) as usize;
            let mut text: Vec<&str> = Vec::new();
            while text.len() < len {
                let w = words[next(6) as usize];
                if !text.contains(&w) {
                    text.push(w);
                }
            }
            ix.put(
                key.as_bytes(),
                &DocRecord::analyze(Analyzer::Simple, &text.join(" "), 0).view(),
            );
        }
        for query in [
            &["red"][..],
            &["red", "sea"],
            &["fox", "dog", "cat"],
            &["sun", "red"],
        ] {
            assert_top_equals_exhaustive(&ix, query, &[1, 5, 10, 37, 200]);
        }
    }

    #[test]
    fn max_score_equals_exhaustive_on_a_small_index() {
        let mut ix = Inverted::default();
        let words = ["alpha", "beta", "gamma", "delta", "eps"];
        let mut rng = shale_rng::SplitMix64::new(7);
        for i in 0..500u32 {
            let mut text = String::new();
            for _ in 0..(1 + i % 9) {
                text.push_str(words[rng.below(words.len() as u64) as usize]);
                text.push(' ');
            }
            ix.put(
                format!("d{i:04}").as_bytes(),
                &DocRecord::analyze(Analyzer::Simple, &text, 0).view(),
            );
        }
        assert_top_equals_exhaustive(&ix, &["gamma", "eps", "beta"], &[1, 3, 10, 50]);
    }

    #[test]
    fn max_score_equals_exhaustive_across_windows_with_removals_and_a_range() {
        // Enough documents for many windows and skipped blocks; a skewed vocabulary so
        // lists range from dense to rare; removals leave dead postings in the lists.
        let mut ix = Inverted::default();
        let mut rng = shale_rng::SplitMix64::new(3);
        let mut next = |n: u64| rng.below(n);
        for i in 0..30_000u64 {
            let len = 1 + next(12);
            let text: Vec<String> = (0..len)
                .map(|_| {
                    let bound = 1 + next(400);
                    format!("w{}", next(bound))
                })
                .collect();
            let key = format!("k{:06}", next(25_000));
            ix.put(
                key.as_bytes(),
                &DocRecord::analyze(Analyzer::Simple, &text.join(" "), 0).view(),
            );
            if i % 7 == 0 {
                ix.remove(format!("k{:06}", next(25_000)).as_bytes());
            }
        }
        for query in [
            &["w0"][..],
            &["w0", "w1"],
            &["w3", "w250", "w17"],
            &["w399", "w0", "w5", "w42"],
        ] {
            assert_top_equals_exhaustive(&ix, query, &[1, 10, 100]);
            let terms: Vec<String> = query.iter().map(|t| t.to_string()).collect();
            let mut s = Scoring::new(&ix, Bm25::default(), &terms, None)
                .expect("valid")
                .expect("not empty");
            s.lower = b"k005000";
            s.upper = Some(b"k012000");
            let mut all = s.all_any();
            all.sort_by(|a, b| {
                b.score
                    .total_cmp(&a.score)
                    .then_with(|| ix.key_of(a.id).cmp(&ix.key_of(b.id)))
            });
            let got: Vec<(DocId, f64)> = s.top_any(10).iter().map(|x| (x.id, x.score)).collect();
            let want: Vec<(DocId, f64)> = all.iter().take(10).map(|x| (x.id, x.score)).collect();
            assert_eq!(got, want, "{query:?} in a range");
        }
    }
}
