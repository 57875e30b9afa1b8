//! Python `str` semantics for plugins that must match skyrl-gym's Python
//! exactly: code-point slicing, `str.isspace` (also Python `re`'s `\s`),
//! `str.strip()`, `str.split()`, `str.isdigit`, `json.dumps` of a string,
//! and `re.search` of a tagged block.
//!
//! The tables follow CPython 3.11 (Unicode 14.0), the project venv's Python.
//! They differ from Rust's `char::is_whitespace` (Python also counts
//! U+001C..U+001F) and `char::is_numeric` (Python's `isdigit` is only
//! Numeric_Type Digit or Decimal, e.g. `²` and `①` but not `½`).

/// Every code point for which Python's `str.isspace()` (and `re`'s `\s`)
/// is true.
pub const SPACES: [char; 29] = [
    '\u{9}', '\u{a}', '\u{b}', '\u{c}', '\u{d}', '\u{1c}', '\u{1d}', '\u{1e}', '\u{1f}', ' ',
    '\u{85}', '\u{a0}', '\u{1680}', '\u{2000}', '\u{2001}', '\u{2002}', '\u{2003}', '\u{2004}',
    '\u{2005}', '\u{2006}', '\u{2007}', '\u{2008}', '\u{2009}', '\u{200a}', '\u{2028}', '\u{2029}',
    '\u{202f}', '\u{205f}', '\u{3000}',
];

/// Inclusive ranges of the code points for which Python's `str.isdigit()`
/// is true (generated with `chr(c).isdigit()` over all code points).
const DIGITS: [(char, char); 81] = [
    ('\u{30}', '\u{39}'),
    ('\u{b2}', '\u{b3}'),
    ('\u{b9}', '\u{b9}'),
    ('\u{660}', '\u{669}'),
    ('\u{6f0}', '\u{6f9}'),
    ('\u{7c0}', '\u{7c9}'),
    ('\u{966}', '\u{96f}'),
    ('\u{9e6}', '\u{9ef}'),
    ('\u{a66}', '\u{a6f}'),
    ('\u{ae6}', '\u{aef}'),
    ('\u{b66}', '\u{b6f}'),
    ('\u{be6}', '\u{bef}'),
    ('\u{c66}', '\u{c6f}'),
    ('\u{ce6}', '\u{cef}'),
    ('\u{d66}', '\u{d6f}'),
    ('\u{de6}', '\u{def}'),
    ('\u{e50}', '\u{e59}'),
    ('\u{ed0}', '\u{ed9}'),
    ('\u{f20}', '\u{f29}'),
    ('\u{1040}', '\u{1049}'),
    ('\u{1090}', '\u{1099}'),
    ('\u{1369}', '\u{1371}'),
    ('\u{17e0}', '\u{17e9}'),
    ('\u{1810}', '\u{1819}'),
    ('\u{1946}', '\u{194f}'),
    ('\u{19d0}', '\u{19da}'),
    ('\u{1a80}', '\u{1a89}'),
    ('\u{1a90}', '\u{1a99}'),
    ('\u{1b50}', '\u{1b59}'),
    ('\u{1bb0}', '\u{1bb9}'),
    ('\u{1c40}', '\u{1c49}'),
    ('\u{1c50}', '\u{1c59}'),
    ('\u{2070}', '\u{2070}'),
    ('\u{2074}', '\u{2079}'),
    ('\u{2080}', '\u{2089}'),
    ('\u{2460}', '\u{2468}'),
    ('\u{2474}', '\u{247c}'),
    ('\u{2488}', '\u{2490}'),
    ('\u{24ea}', '\u{24ea}'),
    ('\u{24f5}', '\u{24fd}'),
    ('\u{24ff}', '\u{24ff}'),
    ('\u{2776}', '\u{277e}'),
    ('\u{2780}', '\u{2788}'),
    ('\u{278a}', '\u{2792}'),
    ('\u{a620}', '\u{a629}'),
    ('\u{a8d0}', '\u{a8d9}'),
    ('\u{a900}', '\u{a909}'),
    ('\u{a9d0}', '\u{a9d9}'),
    ('\u{a9f0}', '\u{a9f9}'),
    ('\u{aa50}', '\u{aa59}'),
    ('\u{abf0}', '\u{abf9}'),
    ('\u{ff10}', '\u{ff19}'),
    ('\u{104a0}', '\u{104a9}'),
    ('\u{10a40}', '\u{10a43}'),
    ('\u{10d30}', '\u{10d39}'),
    ('\u{10e60}', '\u{10e68}'),
    ('\u{11052}', '\u{1105a}'),
    ('\u{11066}', '\u{1106f}'),
    ('\u{110f0}', '\u{110f9}'),
    ('\u{11136}', '\u{1113f}'),
    ('\u{111d0}', '\u{111d9}'),
    ('\u{112f0}', '\u{112f9}'),
    ('\u{11450}', '\u{11459}'),
    ('\u{114d0}', '\u{114d9}'),
    ('\u{11650}', '\u{11659}'),
    ('\u{116c0}', '\u{116c9}'),
    ('\u{11730}', '\u{11739}'),
    ('\u{118e0}', '\u{118e9}'),
    ('\u{11950}', '\u{11959}'),
    ('\u{11c50}', '\u{11c59}'),
    ('\u{11d50}', '\u{11d59}'),
    ('\u{11da0}', '\u{11da9}'),
    ('\u{16a60}', '\u{16a69}'),
    ('\u{16ac0}', '\u{16ac9}'),
    ('\u{16b50}', '\u{16b59}'),
    ('\u{1d7ce}', '\u{1d7ff}'),
    ('\u{1e140}', '\u{1e149}'),
    ('\u{1e2f0}', '\u{1e2f9}'),
    ('\u{1e950}', '\u{1e959}'),
    ('\u{1f100}', '\u{1f10a}'),
    ('\u{1fbf0}', '\u{1fbf9}'),
];

/// Python's `c.isspace()` for one code point.
pub fn is_space(c: char) -> bool {
    SPACES.contains(&c)
}

/// Python's `s.strip()` (no argument: strips `isspace` code points).
pub fn strip(s: &str) -> &str {
    s.trim_matches(is_space)
}

/// Python's `s.split()` (no argument): runs of non-`isspace` code points.
pub fn split_whitespace(s: &str) -> impl Iterator<Item = &str> {
    s.split(is_space).filter(|w| !w.is_empty())
}

/// A string literal as Python's `json.dumps` writes it (`ensure_ascii`:
/// every non-ASCII code point as `\uXXXX`, astral ones as surrogate pairs).
pub fn json_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 || (c as u32) > 0x7f => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{unit:04x}"));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Python's `s.isdigit()`: non-empty and every code point a digit.
pub fn is_digit(s: &str) -> bool {
    !s.is_empty()
        && s.chars().all(|c| {
            DIGITS
                .binary_search_by(|&(lo, hi)| {
                    if hi < c {
                        std::cmp::Ordering::Less
                    } else if lo > c {
                        std::cmp::Ordering::Greater
                    } else {
                        std::cmp::Ordering::Equal
                    }
                })
                .is_ok()
        })
}

/// Python's `s[start:]` on code points, negative `start` counting from the
/// end, out-of-range starts clamped.
pub fn slice_from(s: &str, start: i64) -> &str {
    let len = s.chars().count() as i64;
    let start = if start < 0 {
        (start + len).max(0)
    } else {
        start.min(len)
    };
    match s.char_indices().nth(start as usize) {
        Some((byte, _)) => &s[byte..],
        None => "",
    }
}

/// Python's `s[-n:]` for `n > 0`: the last `n` code points.
pub fn last_chars(s: &str, n: usize) -> &str {
    slice_from(s, -(n as i64))
}

/// A regex character class (for `regex-lite`) matching exactly [`SPACES`],
/// i.e. Python `re`'s `\s` on `str` patterns.
pub fn space_class() -> String {
    let mut class = String::from("[");
    for c in SPACES {
        class.push_str(&format!("\\x{{{:x}}}", c as u32));
    }
    class.push(']');
    class
}

/// What Python's `re.search(OPEN + "(.*?)" + CLOSE, text, re.DOTALL)`
/// captures for literal tags such as `<sql>` / `</sql>`: the leftmost match
/// opens at the first `open` (when that one has no `close` after it, no
/// later one has) and, being lazy, ends at the first `close` after it.
/// A substring scan: a regex compiled afresh in every sandboxed instance
/// cost more than the rest of an env step.
pub fn first_block<'a>(text: &'a str, open: &str, close: &str) -> Option<&'a str> {
    let start = text.find(open)? + open.len();
    let len = text[start..].find(close)?;
    Some(&text[start..start + len])
}

#[cfg(test)]
mod tests {
    use super::first_block;

    /// Each case with what Python's `re.search(r"<sql>(.*?)</sql>", a,
    /// re.DOTALL)` captures (checked with CPython 3.11).
    #[test]
    fn first_block_captures_what_python_re_does() {
        for (text, python) in [
            ("<sql>SELECT 1</sql>", Some("SELECT 1")),
            (
                "a<sql>\nSELECT\n 1 </sql>b<sql>2</sql>",
                Some("\nSELECT\n 1 "),
            ),
            ("<sql><sql>x</sql>", Some("<sql>x")),
            ("</sql><sql>y</sql>", Some("y")),
            ("<sql></sql>", Some("")),
            ("<sql>open only", None),
            ("<sql>a<sql>b", None),
            ("<SQL>upper</SQL>", None),
            ("<sql>é</sql>", Some("é")),
        ] {
            assert_eq!(first_block(text, "<sql>", "</sql>"), python, "{text:?}");
        }
    }

    use super::*;

    #[test]
    fn isspace_includes_python_only_separators() {
        assert!(is_space('\u{1c}') && is_space('\u{a0}') && is_space('\u{3000}'));
        assert!(!is_space('\u{200b}') && !is_space('x'));
        assert_eq!(strip("\u{1f} 42\u{a0}\n"), "42");
        assert_eq!(strip(" \t "), "");
    }

    #[test]
    fn isdigit_follows_numeric_type_digit_or_decimal() {
        assert!(is_digit("0123456789"));
        assert!(is_digit("²³¹"), "superscripts are digits");
        assert!(is_digit("①"), "circled digits are digits");
        assert!(is_digit("١٢٣"), "Arabic-Indic digits");
        assert!(is_digit("１２"), "fullwidth digits");
        assert!(is_digit("\u{1fbf9}"), "last table entry");
        assert!(!is_digit(""), "empty is not a digit string");
        assert!(!is_digit("½"), "vulgar fractions are numeric, not digits");
        assert!(!is_digit("Ⅻ"), "roman numerals are numeric, not digits");
        assert!(!is_digit("1.5") && !is_digit("-1") && !is_digit("1 2"));
    }

    #[test]
    fn the_digit_table_is_sorted_and_disjoint() {
        for w in DIGITS.windows(2) {
            assert!(w[0].0 <= w[0].1 && w[0].1 < w[1].0, "{w:?}");
        }
    }

    #[test]
    fn slicing_counts_code_points_like_python() {
        assert_eq!(last_chars("héllo", 3), "llo");
        assert_eq!(last_chars("é😀x", 2), "😀x");
        assert_eq!(last_chars("ab", 300), "ab");
        assert_eq!(slice_from("abcdef", 2), "cdef");
        assert_eq!(slice_from("abcdef", -2), "ef");
        assert_eq!(slice_from("abcdef", -100), "abcdef");
        assert_eq!(slice_from("abcdef", 100), "");
    }

    #[test]
    fn the_space_class_matches_exactly_the_spaces() {
        let re = regex_lite::Regex::new(&format!("^{}$", space_class())).unwrap();
        for c in SPACES {
            assert!(re.is_match(&c.to_string()), "{c:?}");
        }
        for c in ['a', ':', '\u{200b}', '\u{180e}', '<'] {
            assert!(!re.is_match(&c.to_string()), "{c:?}");
        }
    }
}
