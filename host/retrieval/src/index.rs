//! The BM25 index over a corpus: the `bm25` crate's embedder and scorer
//! (Okapi BM25, Lucene's IDF) with Pyserini's parameters and
//! [`AlnumTokenizer`], ties broken by corpus order.

use std::path::Path;

use bm25::{EmbedderBuilder, Scorer};
use serde_json::value::RawValue;

use crate::corpus::{self, CorpusError, Passage};
use crate::tokenize::AlnumTokenizer;

/// Term-frequency saturation; Pyserini's (and so Search-R1's) BM25 default.
pub const K1: f32 = 0.9;
/// Length normalisation; Pyserini's BM25 default.
pub const B: f32 = 0.4;

/// Token hashes are 64-bit, so distinct tokens practically never collide.
type Embedder = bm25::Embedder<u64, AlnumTokenizer>;

/// One ranked passage.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hit {
    /// Its position in the corpus (0-based, blank lines not counted).
    pub passage: usize,
    /// Its BM25 score for the query (> 0).
    pub score: f32,
}

/// Passages and their BM25 index; immutable once built, shared across
/// requests.
pub struct Index {
    passages: Vec<Box<RawValue>>,
    embedder: Embedder,
    scorer: Scorer<usize, u64>,
}

impl Index {
    /// Indexes `passages` (average length fitted to them).
    pub fn new(passages: Vec<Passage>) -> Self {
        let texts: Vec<&str> = passages.iter().map(|p| p.contents.as_str()).collect();
        let embedder = EmbedderBuilder::<u64, AlnumTokenizer>::with_tokenizer_and_fit_to_corpus(
            AlnumTokenizer,
            &texts,
        )
        .k1(K1)
        .b(B)
        .build();
        let mut scorer = Scorer::new();
        for (i, p) in passages.iter().enumerate() {
            scorer.upsert(&i, embedder.embed(&p.contents));
        }
        Self {
            passages: passages.into_iter().map(|p| p.raw).collect(),
            embedder,
            scorer,
        }
    }

    /// Loads and indexes the JSONL corpus at `path`.
    pub fn load(path: &Path) -> Result<Self, CorpusError> {
        Ok(Self::new(corpus::load(path)?))
    }

    /// The `k` best passages for `query`, best first; only passages sharing a
    /// token with it (none for a query without tokens). Equal scores keep
    /// corpus order.
    pub fn search(&self, query: &str, k: usize) -> Vec<Hit> {
        let query = self.embedder.embed(query);
        let mut hits: Vec<Hit> = self
            .scorer
            .matches(&query)
            .into_iter()
            .map(|m| Hit {
                passage: m.id,
                score: m.score,
            })
            .collect();
        hits.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.passage.cmp(&b.passage)));
        hits.truncate(k);
        hits
    }

    /// The corpus line of passage `i` (every field, as written).
    pub fn passage(&self, i: usize) -> &RawValue {
        &self.passages[i]
    }

    /// Number of passages.
    pub fn len(&self) -> usize {
        self.passages.len()
    }

    /// Whether the index holds no passage.
    pub fn is_empty(&self) -> bool {
        self.passages.is_empty()
    }

    /// The average passage length in tokens that BM25 normalises by.
    pub fn avgdl(&self) -> f32 {
        self.embedder.avgdl()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// An index over `(id, contents)` pairs.
    pub(crate) fn index_of(docs: &[(&str, &str)]) -> Index {
        let text: String = docs
            .iter()
            .map(|(id, contents)| {
                serde_json::json!({"id": id, "contents": contents}).to_string() + "\n"
            })
            .collect();
        Index::new(corpus::read(text.as_bytes(), Path::new("test.jsonl")).unwrap())
    }

    fn small() -> Index {
        index_of(&[
            (
                "0",
                "\"Paris\"\nParis is the capital and largest city of France.",
            ),
            ("1", "\"Berlin\"\nBerlin is the capital of Germany."),
            ("2", "\"Nile\"\nThe Nile is a long river in Africa."),
            (
                "3",
                "\"Telephone\"\nAlexander Graham Bell patented the telephone.",
            ),
        ])
    }

    #[test]
    fn the_relevant_passage_ranks_first() {
        let index = small();
        let hits = index.search("What is the capital of France?", 3);
        assert_eq!(hits[0].passage, 0, "{hits:?}");
        assert_eq!(index.search("who invented the telephone", 3)[0].passage, 3);
        assert_eq!(index.search("longest river in Africa", 3)[0].passage, 2);
    }

    #[test]
    fn scores_are_positive_and_descending() {
        let hits = small().search("capital of Germany or France", 4);
        assert!(hits.len() >= 2);
        assert!(hits.iter().all(|h| h.score > 0.0));
        assert!(hits.windows(2).all(|w| w[0].score >= w[1].score));
        assert_eq!(hits[0].passage, 1, "{hits:?}");
    }

    #[test]
    fn k_caps_the_hits_and_only_matching_passages_come_back() {
        let index = small();
        assert_eq!(index.search("capital", 1).len(), 1);
        assert_eq!(index.search("capital", 10).len(), 2);
        assert!(index.search("zebra", 3).is_empty());
        assert!(index.search("?!", 3).is_empty());
    }

    #[test]
    fn rare_terms_outweigh_common_ones() {
        let index = index_of(&[
            ("a", "the the the the cat"),
            ("b", "the dog"),
            ("c", "the bird"),
        ]);
        assert_eq!(index.search("the dog", 3)[0].passage, 1);
    }

    #[test]
    fn ties_keep_corpus_order() {
        let index = index_of(&[
            ("x", "unrelated words here"),
            ("a", "same text"),
            ("b", "same text"),
            ("c", "same text"),
        ]);
        for _ in 0..5 {
            let order: Vec<usize> = index.search("same", 3).iter().map(|h| h.passage).collect();
            assert_eq!(order, [1, 2, 3]);
        }
    }

    #[test]
    fn passages_come_back_as_written() {
        let index = small();
        assert_eq!(index.len(), 4);
        let doc: serde_json::Value = serde_json::from_str(index.passage(2).get()).unwrap();
        assert_eq!(doc["id"], "2");
        assert!(index.avgdl() > 1.0);
    }
}
