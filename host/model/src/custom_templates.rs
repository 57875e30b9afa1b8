//! skyrl-train's named rollout chat templates (`generator.chat_template`
//! with `source: name`), copied verbatim from skyrl 0.3.0
//! (`skyrl/train/generators/utils.py`, `CUSTOM_CHAT_TEMPLATES`). Both wrap the
//! assistant's text in `{% generation %}` blocks, from which the rollout's
//! loss mask is taken; like skyrl's, neither writes a generation prompt.

/// Qwen3 chat that keeps every assistant turn's `<think>` text.
pub const QWEN3_WITH_THINKING: &str = concat!(
    "{% for message in messages %}",
    "{% if (message['role'] != 'assistant') %}",
    "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}",
    "{% elif (message['role'] == 'assistant')%}",
    "{{'<|im_start|>' + message['role'] + '\n'}}",
    "{% generation %}",
    "{{message['content'] + '<|im_end|>'}}",
    "{% endgeneration %}",
    "{{'\n'}}",
    "{% endif %}",
    "{% endfor %}",
);

/// Qwen3 chat that drops the `<think>` text of all but the last assistant
/// turn (as Qwen3's own template does), with generation blocks.
pub const QWEN3_WITHOUT_THINKING: &str = concat!(
    "{% for message in messages %}",
    "{% if (message['role'] != 'assistant') %}",
    "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}",
    "{% elif (message['role'] == 'assistant')%}",
    "{{'<|im_start|>' + message['role'] + '\n'}}",
    "{% generation %}",
    "{% set full_content = message['content'] %}",
    "{% set mycontent = message['content'] %}",
    "{% set is_last_message = loop.last and messages[-1]['role'] == 'assistant' %}",
    "{% if '</think>' in full_content and not is_last_message %}",
    "{% set mycontent = full_content.split('</think>')[-1].lstrip('\n') %}",
    "{% endif %}",
    "{{mycontent + '<|im_end|>'}}",
    "{% endgeneration %}",
    "{{'\n'}}",
    "{% endif %}",
    "{% endfor %}",
);

/// The names `generator.chat_template.name_or_path` accepts with `source: name`.
pub const CUSTOM_CHAT_TEMPLATE_NAMES: &[&str] = &["qwen3_with_thinking", "qwen3_without_thinking"];

/// The template of a skyrl-train template name.
pub fn custom_chat_template(name: &str) -> Option<&'static str> {
    match name {
        "qwen3_with_thinking" => Some(QWEN3_WITH_THINKING),
        "qwen3_without_thinking" => Some(QWEN3_WITHOUT_THINKING),
        _ => None,
    }
}
