"""The client half of benches/api_overhead.rs: times LoRA training steps and
sampling through `skyrl tinker-serve` with the official `tinker` client, or
the same sampling through `skyrl serve` with the official `openai` client.

  api_client.py URL BASE STEPS BATCH TOKENS SAMPLES NEW_TOKENS
  api_client.py openai URL STEPS SAMPLES NEW_TOKENS
"""

import json
import sys
import time

PROMPT = [5, 9, 12, 20]

if sys.argv[1] == "openai":
    from openai import OpenAI

    url = sys.argv[2]
    steps, samples, new_tokens = (int(a) for a in sys.argv[3:6])
    oc = OpenAI(base_url=url + "/v1", api_key="none")
    model = oc.models.list().data[0].id

    def complete():
        r = oc.completions.create(
            model=model, prompt=PROMPT, n=samples, max_tokens=new_tokens,
            temperature=1.0, seed=0, extra_body={"ignore_eos": True},
        )
        assert len(r.choices) == samples

    complete()
    t = time.perf_counter()
    for _ in range(steps):
        complete()
    sample = steps * samples * new_tokens / (time.perf_counter() - t)
    print(json.dumps({"sample_tokens_per_s": sample}))
    sys.exit(0)

import tinker  # noqa: E402
from tinker import types  # noqa: E402

url, base = sys.argv[1], sys.argv[2]
steps, batch, tokens, samples, new_tokens = (int(a) for a in sys.argv[3:8])
sc = tinker.ServiceClient(base_url=url, api_key="tml-local")
tc = sc.create_lora_training_client(base_model=base, rank=8, seed=1).result()
seqs = [[3 + (t * 7 + b) % 90 for t in range(tokens + 1)] for b in range(batch)]
data = [
    types.Datum(
        model_input=types.ModelInput.from_ints(s[:-1]),
        loss_fn_inputs={"target_tokens": s[1:], "weights": [1.0] * tokens},
    )
    for s in seqs
]
adam = types.AdamParams(learning_rate=1e-4)


def step():
    fb = tc.forward_backward(data, "cross_entropy")
    opt = tc.optim_step(adam)
    fb.result()
    opt.result()


step()
t = time.perf_counter()
for _ in range(steps):
    step()
train = steps * batch * tokens / (time.perf_counter() - t)

sampler = tc.save_weights_and_get_sampling_client(name="bench")
prompt = types.ModelInput.from_ints(PROMPT)
params = types.SamplingParams(max_tokens=new_tokens, seed=0, stop=[])
sampler.sample(prompt=prompt, num_samples=samples, sampling_params=params).result()
t = time.perf_counter()
for _ in range(steps):
    sampler.sample(prompt=prompt, num_samples=samples, sampling_params=params).result()
sample = steps * samples * new_tokens / (time.perf_counter() - t)
print(json.dumps({"train_tokens_per_s": train, "sample_tokens_per_s": sample}))
