//! The tokenizer both passages and queries go through: lowercase runs of
//! alphanumeric characters (Unicode-aware); everything else separates tokens.
//! No stemming and no stop-word list: BM25's IDF already weighs common words
//! down.

/// Lowercase alphanumeric tokens of `text`, in order.
pub fn tokens(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|t| !t.is_empty())
        .map(str::to_lowercase)
}

/// [`tokens`] as a `bm25` tokenizer.
#[derive(Debug, Clone, Copy, Default)]
pub struct AlnumTokenizer;

impl bm25::Tokenizer for AlnumTokenizer {
    fn tokenize(&self, input_text: &str) -> Vec<String> {
        tokens(input_text).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(text: &str) -> Vec<String> {
        tokens(text).collect()
    }

    #[test]
    fn splits_on_punctuation_and_lowercases() {
        assert_eq!(
            toks("\"Paris\"\nParis is the capital of France."),
            ["paris", "paris", "is", "the", "capital", "of", "france"]
        );
    }

    #[test]
    fn keeps_digits_and_unicode_letters() {
        assert_eq!(
            toks("Völkerball in 1876, Ünïcode-ok!"),
            ["völkerball", "in", "1876", "ünïcode", "ok"]
        );
    }

    #[test]
    fn punctuation_only_has_no_tokens() {
        assert!(toks("  -- ?! \n\t ").is_empty());
        assert!(toks("").is_empty());
    }
}
