"""Reference outputs from PyTorch / transformers for the skyrl-model parity tests.

Usage: hf_reference.py MODEL_DIR REQUEST_JSON OUTPUT_JSON

REQUEST_JSON: {"input_ids": [[..]], "attention_mask": [[..]],
               "texts": [..], "chats": [[{role, content}, ..]], "tools": [...] | null,
               "marked": {"templates": [..], "chats": [[..]]}}
Writes {"logits": [[[..]]], "logprobs": [[..]], "encodings": [[..]], "decodings": [..],
        "chat_renders": [{"gen": str, "no_gen": str, "ids": [..]}],
        "marked": [[{"ids": [..], "mask": [..], "gen_ids": [..]} per chat] per template]}
"""
import json
import sys

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer


def main():
    model_dir, request_path, out_path = sys.argv[1:4]
    with open(request_path) as f:
        req = json.load(f)
    torch.manual_seed(0)
    out = {}
    if req.get("input_ids"):
        model = AutoModelForCausalLM.from_pretrained(
            model_dir, torch_dtype=torch.float32, attn_implementation="eager"
        )
        model.eval()
        ids = torch.tensor(req["input_ids"], dtype=torch.long)
        mask = torch.tensor(req["attention_mask"], dtype=torch.long)
        # skyrl's position ids: cumsum of the mask - 1, padding set to 1.
        pos = mask.cumsum(-1) - 1
        pos.masked_fill_(mask == 0, 1)
        with torch.no_grad():
            logits = model(input_ids=ids, attention_mask=mask, position_ids=pos).logits.float()
        logp = torch.log_softmax(logits[:, :-1], -1).gather(-1, ids[:, 1:, None])[..., 0]
        out["logits"] = logits.tolist()
        out["logprobs"] = logp.tolist()
    tok = AutoTokenizer.from_pretrained(model_dir)
    out["encodings"] = [tok.encode(t, add_special_tokens=False) for t in req.get("texts", [])]
    out["decodings"] = [
        tok.decode(ids, skip_special_tokens=False) for ids in out["encodings"]
    ]
    renders = []
    for chat in req.get("chats", []):
        kwargs = {}
        if req.get("tools") is not None:
            kwargs["tools"] = req["tools"]
        renders.append({
            "gen": tok.apply_chat_template(chat, tokenize=False, add_generation_prompt=True, **kwargs),
            "no_gen": tok.apply_chat_template(chat, tokenize=False, add_generation_prompt=False, **kwargs),
            "ids": list(tok.apply_chat_template(chat, tokenize=True, add_generation_prompt=True, **kwargs)),
        })
    out["chat_renders"] = renders
    marked = req.get("marked") or {"templates": [], "chats": []}
    out["marked"] = []
    for template in marked["templates"]:
        rows = []
        for chat in marked["chats"]:
            enc = tok.apply_chat_template(
                chat, chat_template=template, tokenize=True, return_dict=True,
                return_assistant_tokens_mask=True, add_generation_prompt=False,
            )
            gen_ids = tok.apply_chat_template(
                chat, chat_template=template, tokenize=True, return_dict=False,
                add_generation_prompt=True,
            )
            rows.append({"ids": list(enc["input_ids"]), "mask": list(enc["assistant_masks"]),
                         "gen_ids": list(gen_ids)})
        out["marked"].append(rows)
    with open(out_path, "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main()
