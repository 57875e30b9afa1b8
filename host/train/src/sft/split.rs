//! `dataset_split` / `eval_dataset_split`: a split name, optionally with a
//! row slice in Hugging Face `datasets`' syntax (`train`, `train[:100]`,
//! `train[10:20]`, `train[50:]`). Percentages are refused.

use std::ops::Range;

/// A split name and the rows of it to keep.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SplitSpec {
    pub name: String,
    pub start: Option<usize>,
    pub end: Option<usize>,
}

impl SplitSpec {
    /// Parses `NAME` or `NAME[start:end]` (either bound may be left out).
    pub fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        let (name, slice) = match text.split_once('[') {
            None => (text, None),
            Some((name, rest)) => {
                let inner = rest
                    .strip_suffix(']')
                    .ok_or_else(|| format!("`{text}`: a slice must end with `]`"))?;
                (name, Some(inner))
            }
        };
        let valid = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
        if name.is_empty() || !name.chars().all(valid) {
            return Err(format!(
                "`{text}`: expected a split name (letters, digits, `-`, `_`, `.`) optionally \
                 followed by `[start:end]`"
            ));
        }
        let (start, end) = match slice {
            None => (None, None),
            Some(s) => {
                let (a, b) = s
                    .split_once(':')
                    .ok_or_else(|| format!("`{text}`: a slice is `[start:end]`"))?;
                (bound(text, a)?, bound(text, b)?)
            }
        };
        Ok(Self {
            name: name.to_string(),
            start,
            end,
        })
    }

    /// The rows kept of a split of `len` rows (bounds past the end are clipped).
    pub fn rows(&self, len: usize) -> Range<usize> {
        let end = self.end.unwrap_or(len).min(len);
        let start = self.start.unwrap_or(0).min(end);
        start..end
    }
}

fn bound(text: &str, b: &str) -> Result<Option<usize>, String> {
    let b = b.trim();
    if b.is_empty() {
        return Ok(None);
    }
    if b.ends_with('%') {
        return Err(format!(
            "`{text}`: percentage slices are not supported; give row numbers"
        ));
    }
    b.parse::<usize>().map(Some).map_err(|_| {
        format!(
            "`{text}`: slice bound `{b}` is not a row number (negative bounds are not supported)"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_slices_parse_as_datasets_does() {
        let s = SplitSpec::parse("train[:100]").unwrap();
        assert_eq!(
            (s.name.as_str(), s.start, s.end),
            ("train", None, Some(100))
        );
        assert_eq!(s.rows(30), 0..30);
        let s = SplitSpec::parse("validation[10:20]").unwrap();
        assert_eq!(s.rows(100), 10..20);
        assert_eq!(SplitSpec::parse("test[5:]").unwrap().rows(8), 5..8);
        assert_eq!(SplitSpec::parse("train").unwrap().rows(3), 0..3);
        for bad in [
            "train[:10%]",
            "train[-5:]",
            "train[1]",
            "",
            "a b",
            "train[:3",
        ] {
            assert!(SplitSpec::parse(bad).is_err(), "{bad}");
        }
    }
}
