"""The official `tinker` client against `skyrl tinker-serve` (driven by
tinker_client.rs). Each mode prints one JSON line for the Rust side to check.

  sft URL BASE                 cross_entropy on a fixed sequence: the losses
  rl URL BASE                  sample -> reward -> importance_sampling -> optim_step
                               -> save_weights_for_sampler -> sample again: mean rewards
  save URL BASE                a few SFT steps, sampler weights saved as `keep`, a
                               greedy sample with prompt log-probs
  resample URL MODEL_PATH      the same greedy sample from saved weights
  retrieve URL REQUEST_ID      retrieve_future over plain HTTP: status and body
  errors URL BASE              bad requests fail with the field named; the server
                               keeps serving
  state URL BASE               save_state, more steps, then clients created from
                               that state repeat them (with the optimizer: exactly)
"""

import json
import sys
import urllib.error
import urllib.request

import numpy as np
import tinker
from tinker import types

PROMPT = [5, 9, 12, 20]
SEQUENCE = [5, 9, 12, 20, 33, 40, 41, 42, 50, 60]


def client(url):
    return tinker.ServiceClient(base_url=url, api_key="tml-local")


def sft_datum():
    return types.Datum(
        model_input=types.ModelInput.from_ints(SEQUENCE[:-1]),
        loss_fn_inputs={"target_tokens": SEQUENCE[1:], "weights": [1.0] * (len(SEQUENCE) - 1)},
    )


def sft_steps(tc, steps, lr):
    losses = []
    for _ in range(steps):
        fb = tc.forward_backward([sft_datum(), sft_datum()], "cross_entropy")
        opt = tc.optim_step(types.AdamParams(learning_rate=lr))
        out = fb.result()
        opt.result()
        assert len(out.loss_fn_outputs) == 2
        assert len(out.loss_fn_outputs[0]["logprobs"].tolist()) == len(SEQUENCE) - 1
        losses.append(out.metrics["loss:sum"])
    return losses


def sft(url, base):
    tc = client(url).create_lora_training_client(base_model=base, rank=8, seed=1).result()
    print(json.dumps({"losses": sft_steps(tc, 10, 4e-3)}))


def rl(url, base):
    # Full fine-tuning (rank 0) of a toy task: tokens below 50 earn reward.
    tc = client(url).create_lora_training_client(base_model=base, rank=0, seed=1).result()
    prompt = types.ModelInput.from_ints(PROMPT)
    rewards = []
    for it in range(10):
        params = types.SamplingParams(max_tokens=8, temperature=1.0, seed=100 + it)
        sampler = tc.save_weights_and_get_sampling_client(name=f"it{it}")
        res = sampler.sample(prompt=prompt, num_samples=16, sampling_params=params).result()
        rs = [float(np.mean([t < 50 for t in s.tokens])) if s.tokens else 0.0 for s in res.sequences]
        mean = float(np.mean(rs))
        rewards.append(mean)
        data = []
        n = len(PROMPT) - 1
        for s, r in zip(res.sequences, rs):
            tokens = PROMPT + list(s.tokens)
            k = len(s.tokens)
            data.append(
                types.Datum(
                    model_input=types.ModelInput.from_ints(tokens[:-1]),
                    loss_fn_inputs={
                        "target_tokens": tokens[1:],
                        "weights": [0.0] * n + [1.0] * k,
                        "logprobs": [0.0] * n + list(s.logprobs),
                        "advantages": [0.0] * n + [r - mean] * k,
                    },
                )
            )
        tc.forward_backward(data, "importance_sampling").result()
        tc.optim_step(types.AdamParams(learning_rate=1e-2)).result()
    print(json.dumps({"rewards": rewards}))


def greedy(sampler):
    params = types.SamplingParams(max_tokens=6, temperature=0.0, seed=0)
    res = sampler.sample(
        prompt=types.ModelInput.from_ints(PROMPT),
        num_samples=1,
        sampling_params=params,
        include_prompt_logprobs=True,
    ).result()
    s = res.sequences[0]
    return {
        "tokens": list(s.tokens),
        "logprobs": list(s.logprobs),
        "prompt_logprobs": res.prompt_logprobs,
        "stop_reason": s.stop_reason,
    }


def save(url, base):
    tc = client(url).create_lora_training_client(base_model=base, rank=8, seed=1).result()
    sft_steps(tc, 3, 4e-3)
    path = tc.save_weights_for_sampler(name="keep").result().path
    sampler = tc.create_sampling_client(path)
    print(json.dumps({"path": path, **greedy(sampler)}))


def resample(url, model_path):
    sampler = client(url).create_sampling_client(model_path=model_path)
    print(json.dumps(greedy(sampler)))


def retrieve(url, request_id):
    req = urllib.request.Request(
        url + "/api/v1/retrieve_future",
        data=json.dumps({"request_id": request_id}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req) as r:
        print(json.dumps({"status": r.status, "body": json.loads(r.read())}))


def expect_error(what, fn, field):
    try:
        fn()
    except Exception as e:  # the client's own error types
        text = str(e)
        assert field in text, f"{what}: `{field}` not in: {text}"
        return text
    raise AssertionError(f"{what}: no error")


def errors(url, base):
    sc = client(url)
    tc = sc.create_lora_training_client(base_model=base, rank=4, seed=2).result()
    seen = {}
    outside = types.Datum(
        model_input=types.ModelInput.from_ints([5, 9, 500]),
        loss_fn_inputs={"target_tokens": [9, 500, 7]},
    )
    seen["vocab"] = expect_error(
        "token outside the vocabulary",
        lambda: tc.forward_backward([outside], "cross_entropy").result(),
        "outside the vocabulary",
    )
    too_long = types.Datum(
        model_input=types.ModelInput.from_ints([5] * 5000),
        loss_fn_inputs={"target_tokens": [5] * 5000},
    )
    seen["context"] = expect_error(
        "datum longer than the context",
        lambda: tc.forward_backward([too_long], "cross_entropy").result(),
        "context",
    )
    short = types.Datum(
        model_input=types.ModelInput.from_ints([5, 9, 12]),
        loss_fn_inputs={"target_tokens": [9, 12]},
    )
    seen["lengths"] = expect_error(
        "targets shorter than the input",
        lambda: tc.forward_backward([short], "cross_entropy").result(),
        "target_tokens",
    )
    seen["policy_inputs"] = expect_error(
        "importance_sampling without advantages",
        lambda: tc.forward_backward([sft_datum()], "importance_sampling").result(),
        "logprobs",
    )
    seen["sampler_path"] = expect_error(
        "a sampler path that was never saved",
        lambda: greedy(sc.create_sampling_client(model_path=f"tinker://{tc.model_id}/sampler_weights/never")),
        "never",
    )
    seen["num_samples"] = expect_error(
        "too many samples",
        lambda: sc.create_sampling_client(base_model=base)
        .sample(
            prompt=types.ModelInput.from_ints([5]),
            num_samples=5000,
            sampling_params=types.SamplingParams(max_tokens=1),
        )
        .result(),
        "num_samples",
    )
    # A 3 MB protobuf body (more than axum's default limit, less than one
    # client chunk) reaches the route: the unknown model is what is refused.
    from tinker.proto import tinker_public_pb2 as pb

    big = pb.ForwardBackwardRequest(model_id="no-such-model", loss_fn="cross_entropy")
    datum = big.data.add()
    datum.model_input.add().encoded_text.tokens = bytes(3_000_000)
    req = urllib.request.Request(
        url + "/api/v1/forward_backward",
        data=big.SerializeToString(),
        headers={"Content-Type": "application/x-protobuf"},
    )
    try:
        urllib.request.urlopen(req)
        raise AssertionError("a request for an unknown model succeeded")
    except urllib.error.HTTPError as e:
        seen["big_body"] = f"{e.code} {e.read().decode()}"
        assert e.code == 404 and "no-such-model" in seen["big_body"], seen["big_body"]
    # The server still serves: a valid step works.
    losses = sft_steps(tc, 1, 1e-3)
    print(json.dumps({"errors": seen, "after": losses}))


def state(url, base):
    # save_state, then two more steps; a client created from that state
    # with its optimizer repeats the same two steps exactly.
    sc = client(url)
    tc = sc.create_lora_training_client(base_model=base, rank=8, seed=1).result()
    sft_steps(tc, 3, 4e-3)
    path = tc.save_state("ckpt").result().path
    after = sft_steps(tc, 2, 4e-3)
    resumed = sc.create_training_client_from_state_with_optimizer(path).result()
    again = sft_steps(resumed, 2, 4e-3)
    fresh_optimizer = sc.create_training_client_from_state(path).result()
    reset = sft_steps(fresh_optimizer, 2, 4e-3)
    rest = sc.create_rest_client()
    listed = [c.tinker_path for c in rest.list_checkpoints(tc.model_id).result().checkpoints]
    info = rest.get_weights_info_by_tinker_path(path).result()
    # Closing the session ends it: its models are refused from then on.
    sc.close("success", detail="test done").result()
    req = urllib.request.Request(
        url + "/api/v1/optim_step",
        data=json.dumps({"model_id": tc.model_id, "adam_params": {}}).encode(),
        headers={"Content-Type": "application/json"},
    )
    try:
        urllib.request.urlopen(req)
        closed = "accepted"
    except urllib.error.HTTPError as e:
        closed = f"{e.code} {e.read().decode()}"
    print(json.dumps({
        "closed": closed,
        "path": path,
        "after": after,
        "resumed": again,
        "fresh_optimizer": reset,
        "listed": listed,
        "lora_rank": info.lora_rank,
    }))


if __name__ == "__main__":
    mode, args = sys.argv[1], sys.argv[2:]
    {
        "sft": sft,
        "rl": rl,
        "save": save,
        "resample": resample,
        "retrieve": retrieve,
        "errors": errors,
        "state": state,
    }[mode](*args)
