//! skyrl-gym searchcode's `_parse_action`: the first `<tool>...</tool>`
//! block, and in it the first `<name>input</name>` element (the Python
//! regex `<(\w+)>(.*?)</\1>`, written out because Rust's regex has no
//! back-references).

use skyrl_sdk::pystr;

/// A parsed tool call: the tool's name and its (stripped) input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCall {
    pub name: String,
    pub input: String,
}

/// Why an action holds no usable tool call (skyrl-gym's error texts).
pub const NO_TOOL_BLOCK: &str = "No <tool>...</tool> block found in action string.";
pub const NO_INNER_TAG: &str = "No valid inner tool tag found inside <tool> block.";

/// Parses `action`.
pub fn parse(action: &str) -> Result<ToolCall, &'static str> {
    let start = action.find("<tool>").ok_or(NO_TOOL_BLOCK)? + "<tool>".len();
    let end = action[start..].find("</tool>").ok_or(NO_TOOL_BLOCK)?;
    let content = pystr::strip(&action[start..start + end]);
    inner_element(content).ok_or(NO_INNER_TAG)
}

/// Python's `\w` for `str` patterns: alphanumerics and `_`.
fn is_word(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The first `<name>...</name>` in `text`, leftmost start, shortest body.
fn inner_element(text: &str) -> Option<ToolCall> {
    for (open, _) in text.match_indices('<') {
        let after = &text[open + 1..];
        let name_len: usize = after
            .chars()
            .take_while(|c| is_word(*c))
            .map(char::len_utf8)
            .sum();
        if name_len == 0 || !after[name_len..].starts_with('>') {
            continue;
        }
        let name = &after[..name_len];
        let body_start = open + 1 + name_len + 1;
        let close = format!("</{name}>");
        if let Some(body_len) = text[body_start..].find(&close) {
            return Some(ToolCall {
                name: name.to_string(),
                input: pystr::strip(&text[body_start..body_start + body_len]).to_string(),
            });
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_complete_element_in_the_first_block_is_the_call() {
        let call =
            parse("x <tool> <python>print(1)</python> </tool> <tool><search>q</search></tool>")
                .unwrap();
        assert_eq!(
            call,
            ToolCall {
                name: "python".into(),
                input: "print(1)".into()
            }
        );
        let call = parse("<tool><b>open <search> q </search></tool>").unwrap();
        assert_eq!(
            call,
            ToolCall {
                name: "search".into(),
                input: "q".into()
            }
        );
    }

    #[test]
    fn missing_blocks_and_tags_are_named() {
        assert_eq!(parse("no tool"), Err(NO_TOOL_BLOCK));
        assert_eq!(parse("<tool>open"), Err(NO_TOOL_BLOCK));
        assert_eq!(parse("<tool>just text</tool>"), Err(NO_INNER_TAG));
        assert_eq!(parse("<tool><a>unclosed</b></tool>"), Err(NO_INNER_TAG));
    }
}
