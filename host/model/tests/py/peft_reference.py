"""PEFT reference for the LoRA tests: loads the base model with transformers,
applies the adapter with `peft.PeftModel.from_pretrained`, and writes the
logits of the request's rows, plus those of the merged export and the
adapter's spec as PEFT read it.

usage: peft_reference.py BASE_DIR ADAPTER_DIR MERGED_DIR REQUEST_JSON OUT_JSON
"""

import json
import sys

import torch
from peft import PeftModel
from transformers import AutoModelForCausalLM

base_dir, adapter_dir, merged_dir, request_path, out_path = sys.argv[1:6]
request = json.load(open(request_path))
ids = torch.tensor(request["input_ids"])
mask = torch.tensor(request["attention_mask"])

torch.manual_seed(0)
base = AutoModelForCausalLM.from_pretrained(base_dir, torch_dtype=torch.float32, attn_implementation="sdpa")
peft_model = PeftModel.from_pretrained(base, adapter_dir)
peft_model.eval()
with torch.no_grad():
    adapted = peft_model(input_ids=ids, attention_mask=mask).logits
config = peft_model.peft_config["default"]
modules = sorted(n for n, m in peft_model.named_modules() if hasattr(m, "lora_A") and "default" in m.lora_A)
merged_by_peft = peft_model.merge_and_unload()
with torch.no_grad():
    peft_merged = merged_by_peft(input_ids=ids, attention_mask=mask).logits

ours = AutoModelForCausalLM.from_pretrained(merged_dir, torch_dtype=torch.float32, attn_implementation="sdpa")
with torch.no_grad():
    exported = ours(input_ids=ids, attention_mask=mask).logits

json.dump(
    {
        "adapted": adapted.tolist(),
        "peft_merged": peft_merged.tolist(),
        "exported": exported.tolist(),
        "r": config.r,
        "lora_alpha": config.lora_alpha,
        "modules": modules,
    },
    open(out_path, "w"),
)
