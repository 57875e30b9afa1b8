"""Writes a random-init Qwen2 checkpoint of a real size for `bench/real_size.sh`
(fp32 safetensors via transformers' `save_pretrained`; seeded; never committed).

Usage: real_size_model.py {100m,500m} OUT_DIR
  100m: hidden 768, 12 layers, 12 heads / 2 KV heads, MLP 2048, vocab 50000, tied (~111.6M)
  500m: Qwen2.5-0.5B's shapes: hidden 896, 24 layers, 14 heads / 2 KV heads, MLP 4864,
        vocab 151936, tied (~494M)
Prints the parameter count.
"""
import sys

import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

SIZES = {
    "100m": dict(vocab_size=50000, hidden_size=768, intermediate_size=2048, num_hidden_layers=12,
                 num_attention_heads=12, num_key_value_heads=2),
    "500m": dict(vocab_size=151936, hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
                 num_attention_heads=14, num_key_value_heads=2),
}


def main():
    size, out = sys.argv[1], sys.argv[2]
    torch.manual_seed(0)
    cfg = Qwen2Config(**SIZES[size], max_position_embeddings=4096, tie_word_embeddings=True,
                      rms_norm_eps=1e-6, rope_theta=1e6, torch_dtype="float32")
    model = Qwen2ForCausalLM(cfg)
    model.save_pretrained(out)
    print(sum(p.numel() for p in model.parameters()))


if __name__ == "__main__":
    main()
