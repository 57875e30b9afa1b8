//! Numeric and tokenizer parity against PyTorch / Hugging Face transformers.
//! Needs Python with torch + transformers (`$SKYRL_PYTHON`); fails, not skips, without it.

mod common;

use std::path::Path;

use serde_json::{json, Value};
use tch::{Kind, Tensor};

use common::{cpu, max_abs_diff, perturbed_tiny, run_python};
use skyrl_model::{save_checkpoint, Arch, CausalLm, ChatMessage, Tokenizer};

fn reference(dir: &Path, request: &Value) -> Value {
    let work = tempfile::tempdir().unwrap();
    let req = work.path().join("request.json");
    let out = work.path().join("out.json");
    std::fs::write(&req, request.to_string()).unwrap();
    run_python("hf_reference.py", &[dir, &req, &out]);
    serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap()
}

fn to_tensor_3d(v: &Value) -> Tensor {
    let rows: Vec<Vec<Vec<f32>>> = serde_json::from_value(v.clone()).unwrap();
    let (b, t, n) = (rows.len(), rows[0].len(), rows[0][0].len());
    let flat: Vec<f32> = rows.into_iter().flatten().flatten().collect();
    Tensor::from_slice(&flat).view([b as i64, t as i64, n as i64])
}

fn to_tensor_2d(v: &Value) -> Tensor {
    let rows: Vec<Vec<f32>> = serde_json::from_value(v.clone()).unwrap();
    let (b, t) = (rows.len(), rows[0].len());
    let flat: Vec<f32> = rows.into_iter().flatten().collect();
    Tensor::from_slice(&flat).view([b as i64, t as i64])
}

fn check_logits(arch: Arch, seed: u64) {
    let tmp = tempfile::tempdir().unwrap();
    let init_dir = tmp.path().join("init");
    let dir = tmp.path().join("perturbed");
    let model = perturbed_tiny(arch, &init_dir, seed);
    let tokenizer = Tokenizer::from_dir(&init_dir).unwrap();
    save_checkpoint(&model, Some(&tokenizer), &dir).unwrap();
    let model = CausalLm::from_pretrained(&dir, &cpu()).unwrap();

    // Row 0 full length, row 1 left-padded, row 2 right-padded.
    let ids: Vec<Vec<i64>> = vec![
        (0..24).map(|i| 3 + (i * 7) % 96).collect(),
        [vec![0; 5], (0..19).map(|i| 3 + (i * 11) % 96).collect()].concat(),
        [(0..17).map(|i| 3 + (i * 13) % 96).collect(), vec![0; 7]].concat(),
    ];
    let mask: Vec<Vec<i64>> = vec![
        vec![1; 24],
        [vec![0; 5], vec![1; 19]].concat(),
        [vec![1; 17], vec![0; 7]].concat(),
    ];
    let reference = reference(&dir, &json!({"input_ids": ids, "attention_mask": mask}));
    let ids_t = Tensor::from_slice(&ids.concat()).view([3, 24]);
    let mask_t = Tensor::from_slice(&mask.concat()).view([3, 24]);
    let logits = tch::no_grad(|| model.forward(&ids_t, Some(&mask_t)).unwrap());
    let want = to_tensor_3d(&reference["logits"]);
    let real = mask_t.to_kind(Kind::Bool).unsqueeze(-1).expand_as(&want);
    let diff = max_abs_diff(&logits.masked_select(&real), &want.masked_select(&real));
    eprintln!("{arch:?}: max |logits - transformers| = {diff:e}");
    assert!(
        diff < 1e-4,
        "{arch:?}: logits differ from transformers by {diff}"
    );

    let logprobs = tch::no_grad(|| model.forward_logprobs(&ids_t, &mask_t).unwrap());
    let want = to_tensor_2d(&reference["logprobs"]);
    let real = mask_t.narrow(1, 1, 23).to_kind(Kind::Bool);
    let diff = max_abs_diff(&logprobs.masked_select(&real), &want.masked_select(&real));
    eprintln!("{arch:?}: max |logprobs - transformers| = {diff:e}");
    assert!(
        diff < 1e-4,
        "{arch:?}: logprobs differ from transformers by {diff}"
    );
}

#[test]
fn qwen2_logits_match_transformers() {
    check_logits(Arch::Qwen2, 11);
}

#[test]
fn llama_logits_match_transformers() {
    check_logits(Arch::Llama, 12);
}

#[test]
fn qwen3_logits_match_transformers() {
    check_logits(Arch::Qwen3, 13);
}

/// A Qwen2.5-style template exercising namespace, slicing, Python string methods,
/// tojson and raise_exception.
const RICH_TEMPLATE: &str = r#"{%- if tools %}
    {{- '<|im_start|>system\n' }}
    {%- if messages[0]['role'] == 'system' %}
        {{- messages[0]['content'] }}
    {%- else %}
        {{- 'You are a helpful assistant.' }}
    {%- endif %}
    {{- "\n\n# Tools\n<tools>" }}
    {%- for tool in tools %}
        {{- "\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\n</tools><|im_end|>\n" }}
{%- elif messages[0]['role'] == 'system' %}
    {{- '<|im_start|>system\n' + messages[0]['content'] + '<|im_end|>\n' }}
{%- endif %}
{%- set ns = namespace(last_user=-1) %}
{%- for message in messages[::-1] %}
    {%- if message.role == 'user' and ns.last_user == -1 %}{%- set ns.last_user = messages|length - loop.index0 - 1 %}{%- endif %}
{%- endfor %}
{%- for message in messages %}
    {%- if message.role == "user" or (message.role == "system" and not loop.first) %}
        {{- '<|im_start|>' + message.role + '\n' + message.content.strip() + '<|im_end|>' + '\n' }}
    {%- elif message.role == "assistant" %}
        {%- set content = message.content %}
        {%- if '</think>' in content %}{%- set content = content.split('</think>')[-1].lstrip('\n') %}{%- endif %}
        {%- if loop.index0 > ns.last_user %}{%- set content = content.upper() %}{%- endif %}
        {{- '<|im_start|>assistant\n' + content + '<|im_end|>\n' }}
    {%- elif message.role == "tool" %}
        {%- if message.content.startswith('<tool_response>') %}{{- raise_exception('nested tool response') }}{%- endif %}
        {{- '<|im_start|>user\n<tool_response>\n' + message.content + '\n</tool_response><|im_end|>\n' }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
{%- endif %}
"#;

fn chats() -> Vec<Vec<ChatMessage>> {
    vec![
        vec![ChatMessage::new("user", "What is 2 + 3?")],
        vec![
            ChatMessage::new("system", "Answer with #### N."),
            ChatMessage::new("user", "  Natalia sold 48 clips.\nHow many?  "),
            ChatMessage::new("assistant", "<think>48/2</think>\n#### 72"),
            ChatMessage::new("tool", "{\"rows\": [[1, 2]]}"),
            ChatMessage::new("user", "Again"),
            ChatMessage::new("assistant", "ok"),
        ],
    ]
}

const TEXTS: &[&str] = &[
    "Hello, world!",
    "  two  spaces\nand a newline\n",
    "<|im_start|>user\nhi<|im_end|>\n",
    "#### 1,234.5 $ ~`{}|",
    "",
];

#[test]
fn tokenizer_and_chat_template_match_transformers() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("m");
    skyrl_model::init_tiny_model(Arch::Qwen2, skyrl_model::TinySize::Tiny, &dir, 1).unwrap();
    let tokenizer = Tokenizer::from_dir(&dir).unwrap();
    let reference = reference(&dir, &json!({"texts": TEXTS, "chats": chats()}));

    for (i, text) in TEXTS.iter().enumerate() {
        let ids = tokenizer.encode(text, false).unwrap();
        let want: Vec<i64> = serde_json::from_value(reference["encodings"][i].clone()).unwrap();
        assert_eq!(ids, want, "encoding of {text:?}");
        let specials =
            11 * text.matches("<|im_start|>").count() + 9 * text.matches("<|im_end|>").count();
        assert_eq!(ids.len(), text.len() - specials, "one token per char");
        let decoded = tokenizer.decode(&ids, false).unwrap();
        assert_eq!(decoded, reference["decodings"][i].as_str().unwrap());
        assert_eq!(&decoded, text, "round trip");
    }
    for (i, chat) in chats().iter().enumerate() {
        let r = &reference["chat_renders"][i];
        assert_eq!(
            tokenizer.apply_chat_template(chat, true).unwrap(),
            r["gen"].as_str().unwrap()
        );
        assert_eq!(
            tokenizer.apply_chat_template(chat, false).unwrap(),
            r["no_gen"].as_str().unwrap()
        );
        let want: Vec<i64> = serde_json::from_value(r["ids"].clone()).unwrap();
        assert_eq!(tokenizer.encode_chat(chat, true).unwrap(), want);
    }
}

#[test]
fn rich_chat_template_matches_transformers() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("m");
    skyrl_model::init_tiny_model(Arch::Qwen2, skyrl_model::TinySize::Tiny, &dir, 1).unwrap();
    let config_path = dir.join("tokenizer_config.json");
    let mut config: Value =
        serde_json::from_str(&std::fs::read_to_string(&config_path).unwrap()).unwrap();
    config["chat_template"] = json!(RICH_TEMPLATE);
    std::fs::write(&config_path, config.to_string()).unwrap();
    // Keys in sorted order: serde_json::Value maps are sorted (see Tokenizer docs).
    let tools = json!([{"function": {"description": "Run SQL", "name": "sql",
        "parameters": {"properties": {"query": {"type": "string"}}, "required": ["query"], "type": "object"}},
        "type": "function"}]);
    let reference = reference(&dir, &json!({"chats": chats(), "tools": tools}));
    let tokenizer = Tokenizer::from_dir(&dir).unwrap();
    let extra = json!({"tools": tools});
    for (i, chat) in chats().iter().enumerate() {
        let r = &reference["chat_renders"][i];
        let got = tokenizer
            .apply_chat_template_with(chat, true, extra.as_object())
            .unwrap();
        assert_eq!(got, r["gen"].as_str().unwrap());
        let got = tokenizer
            .apply_chat_template_with(chat, false, extra.as_object())
            .unwrap();
        assert_eq!(got, r["no_gen"].as_str().unwrap());
    }
    // raise_exception surfaces as an error, not a silent render.
    let bad = vec![ChatMessage::new("tool", "<tool_response>x")];
    let err = tokenizer.apply_chat_template(&bad, true).unwrap_err();
    assert!(err.to_string().contains("nested tool response"), "{err}");
}

/// A template whose generation tags use whitespace control and sit before
/// newlines that `trim_blocks` removes.
const TRIMMED_GENERATION_TEMPLATE: &str = "{% for m in messages %}<|im_start|>{{ m.role }}\n{% if m.role == 'assistant' %}{% generation %}\n{{ m.content }}  {%- endgeneration %}\n{% else %}{{ m.content }}{% endif %}<|im_end|>\n{% endfor %}";

#[test]
fn custom_templates_and_assistant_masks_match_transformers() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("m");
    skyrl_model::init_tiny_model(Arch::Qwen2, skyrl_model::TinySize::Tiny, &dir, 1).unwrap();
    let templates = [
        skyrl_model::custom_chat_template("qwen3_with_thinking").unwrap(),
        skyrl_model::custom_chat_template("qwen3_without_thinking").unwrap(),
        TRIMMED_GENERATION_TEMPLATE,
    ];
    let marked_chats = vec![
        vec![
            ChatMessage::new("user", "What is 2 + 3?"),
            ChatMessage::new("assistant", "<think>\nadd them</think>\n\n5"),
        ],
        vec![
            ChatMessage::new("system", "Answer with #### N."),
            ChatMessage::new("user", "Natalia sold 48 clips. How many?"),
            ChatMessage::new("assistant", "<think>48/2 = 24</think>\nSQL: SELECT 1"),
            ChatMessage::new("user", "Observation: [(1,)] é"),
            ChatMessage::new("assistant", "<think>done</think>#### 72"),
            ChatMessage::new("user", "Next?"),
        ],
    ];
    let reference = reference(
        &dir,
        &json!({"marked": {"templates": templates, "chats": marked_chats}}),
    );
    let tokenizer = Tokenizer::from_dir(&dir).unwrap();
    for (t, source) in templates.iter().enumerate() {
        let template = tokenizer.compile_chat_template(source).unwrap();
        for (c, chat) in marked_chats.iter().enumerate() {
            let r = &reference["marked"][t][c];
            let (ids, mask) = tokenizer
                .encode_chat_assistant_mask(&template, chat, false, None)
                .unwrap();
            let want_ids: Vec<i64> = serde_json::from_value(r["ids"].clone()).unwrap();
            let want_mask: Vec<u8> = serde_json::from_value(r["mask"].clone()).unwrap();
            assert_eq!(ids, want_ids, "template {t}, chat {c}: ids");
            assert_eq!(mask, want_mask, "template {t}, chat {c}: assistant mask");
            assert!(
                mask.contains(&1),
                "template {t}, chat {c}: nothing masked in"
            );
            let gen_ids = tokenizer
                .encode_chat_using(&template, chat, true, None)
                .unwrap();
            let want: Vec<i64> = serde_json::from_value(r["gen_ids"].clone()).unwrap();
            assert_eq!(
                gen_ids, want,
                "template {t}, chat {c}: with generation prompt"
            );
        }
    }
}
