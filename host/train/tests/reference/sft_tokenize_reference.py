"""Tokenises chat rows with skyrl 0.3.0's own SFT tokenisation, for the Rust
loss-mask parity test (host/train/tests/sft.rs).

Usage: sft_tokenize_reference.py MODEL_DIR CASES.json OUT.json

The functions come from the installed `skyrl==0.3.0` wheel:
`tokenize_chat_example` and its helpers from `skyrl/train/sft_trainer.py`,
`get_response_ids_and_loss_mask_from_messages` and its helpers from
`skyrl/train/generators/utils.py`, and `TrainOnWhat` from
`skyrl/train/config/sft_config.py`. Those modules import ray, datasets and
the whole training stack, so the needed top-level definitions are taken out
of their source with `ast` and executed alone; nothing of skyrl is copied.
The tokenizer is transformers' AutoTokenizer on MODEL_DIR.

CASES is {"cases": [{"name", "row", "train_on_what", "max_length",
"messages_key", "tools_key", "system_key"}]}; OUT maps each name to null
(row skipped) or {"input_ids", "num_actions", "loss_mask"}.
"""

import ast
import enum
import functools
import importlib.util
import json
import sys
from typing import Any, Dict, List, Optional, Tuple, Union

from transformers import AutoTokenizer

SKYRL_VERSION = "0.3.0"


class _Logger:
    def __getattr__(self, _name):
        return lambda *a, **k: None


def _definitions(path, names):
    """The source of the top-level functions, classes and assignments `names` in `path`."""
    source = open(path).read()
    out, found = [], set()
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            defined = {node.name}
        elif isinstance(node, ast.Assign):
            defined = {getattr(t, "id", None) for t in node.targets}
        else:
            continue
        if defined & set(names):
            out.append(ast.get_source_segment(source, node))
            found |= defined & set(names)
    if found != set(names):
        sys.exit(f"{path} lacks {sorted(set(names) - found)}")
    return out


def load_skyrl():
    spec = importlib.util.find_spec("skyrl")
    if spec is None:
        sys.exit(f"skyrl=={SKYRL_VERSION} is not installed: pip install --no-deps skyrl=={SKYRL_VERSION}")
    from importlib.metadata import version

    if version("skyrl") != SKYRL_VERSION:
        sys.exit(f"skyrl {version('skyrl')} is installed, the parity cases need {SKYRL_VERSION}")
    root = spec.submodule_search_locations[0] + "/train"
    ns = {
        "Any": Any, "Dict": Dict, "List": List, "Optional": Optional, "Tuple": Tuple, "Union": Union,
        "StrEnum": enum.StrEnum, "functools": functools, "json": json, "logger": _Logger(),
        "ConversationType": List[Dict[str, Any]],
    }
    parts = _definitions(f"{root}/config/sft_config.py", ["TrainOnWhat"])
    parts += _definitions(
        f"{root}/generators/utils.py",
        [
            "get_generation_prompt_ids",
            "encode_messages_subset",
            "_find_generation_prompt_boundary",
            "get_response_ids_and_loss_mask_from_messages",
        ],
    )
    parts += _definitions(
        f"{root}/sft_trainer.py",
        [
            "_parse_tools_str",
            "_coerce_tools",
            "_normalize_tool_call_payload",
            "_NORMALIZED_KEYS",
            "_normalize_chat_messages",
            "tokenize_sft_example",
            "tokenize_chat_example",
            "_unbatch",
            "_tokenize_chat_last_assistant",
            "_tokenize_chat_all_assistants",
        ],
    )
    exec(compile("\n\n".join(parts), "skyrl-0.3.0-sft", "exec"), ns)
    return ns


def main():
    model_dir, cases_path, out_path = sys.argv[1:4]
    sk = load_skyrl()
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    out = {}
    for case in json.load(open(cases_path))["cases"]:
        row = case["row"]
        if case["messages_key"] in row:
            result = sk["tokenize_chat_example"](
                row,
                tokenizer,
                max_length=case["max_length"],
                messages_key=case["messages_key"],
                train_on_what=sk["TrainOnWhat"](case["train_on_what"]),
                tools_key=case["tools_key"],
                system_key=case["system_key"],
            )
        else:
            result = sk["tokenize_sft_example"](row, tokenizer, case["max_length"])
        out[case["name"]] = None if result is None else {
            "input_ids": list(result["input_ids"]),
            "num_actions": result["num_actions"],
            "loss_mask": list(result["loss_mask"]),
        }
    json.dump(out, open(out_path, "w"))


if __name__ == "__main__":
    main()
