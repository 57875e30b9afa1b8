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
  checkpoints URL BASE DIR     against a server with an API key: wrong and missing
                               keys refused; save_weights_external, its download
                               links, TTL, publish, delete, the list of every
                               checkpoint, and `tinker checkpoint download` (the
                               CLI) of a save_state into DIR
  fair URL BASE                client A queues 24 forward_backwards, then client B
                               (another session) creates a model and runs one; the
                               model ids, for the Rust side to read the finish order
  dp URL BASE                  LoRA training on 3 different datums per step (and one
                               step on a single datum): losses, log-probs, norms, for
                               comparing a server on several ranks with one process
  dead URL BASE                after a rank died: training fails with the reason,
                               sampling the base model still works

The API key is $TINKER_API_KEY (the client's own variable).
"""

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request

import numpy as np
import tinker
from tinker import types

PROMPT = [5, 9, 12, 20]
SEQUENCE = [5, 9, 12, 20, 33, 40, 41, 42, 50, 60]


def client(url):
    return tinker.ServiceClient(base_url=url, api_key=os.environ["TINKER_API_KEY"])


def http_status(url, headers=None):
    """GET `url`: (status, body)."""
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers or {})) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def tensors(path):
    from safetensors.numpy import load_file

    return load_file(path)


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


def checkpoints(url, base, out_dir):
    key = os.environ["TINKER_API_KEY"]
    seen = {}
    # A wrong key: the client raises AuthenticationError (401, not retried).
    try:
        tinker.ServiceClient(base_url=url, api_key="tml-wrong-key").create_lora_training_client(
            base_model=base, rank=8
        ).result()
        seen["wrong_key"] = "accepted"
    except tinker.AuthenticationError as e:
        seen["wrong_key"] = f"{e.status_code} {e}"
    seen["no_key"] = http_status(url + "/api/v1/checkpoints")[0]
    seen["healthz"] = http_status(url + "/api/v1/healthz")[0]

    sc = client(url)
    tc = sc.create_lora_training_client(base_model=base, rank=8, seed=1).result()
    sft_steps(tc, 2, 4e-3)
    state_path = tc.save_state("ckpt").result().path
    ext = tc.save_weights_external("ext", ttl_seconds=7200).result().path
    rest = sc.create_rest_client()
    urls = rest.get_external_weights_urls(ext).result()
    files = {}
    for name, link in urls.urls.items():
        # Links work without the key (the CLI fetches them with plain GETs).
        status, body = http_status(link)
        assert status == 200, (name, status, body)
        files[name] = len(body)
        with open(os.path.join(out_dir, "ext_" + name), "wb") as f:
            f.write(body)
    listed = {c.tinker_path: c for c in rest.list_user_checkpoints().result().checkpoints}
    seen["listed_expires"] = listed[ext].expires_at is not None
    rest.set_checkpoint_ttl_from_tinker_path(ext, None).result()
    rest.publish_checkpoint_from_tinker_path(ext).result()
    listed = {c.tinker_path: c for c in rest.list_user_checkpoints().result().checkpoints}
    seen["after_ttl_and_publish"] = [listed[ext].expires_at is None, listed[ext].public]
    rest.unpublish_checkpoint_from_tinker_path(ext).result()
    try:
        tc.save_weights_external("short", ttl_seconds=5).result()
        seen["short_ttl"] = "accepted"
    except Exception as e:
        seen["short_ttl"] = str(e)

    # The CLI downloads the training checkpoint: it loads it into a new
    # training run, exports it, fetches every file, and deletes the export.
    env = dict(os.environ, TINKER_BASE_URL=url, TINKER_API_KEY=key)
    cli = os.path.join(os.path.dirname(sys.executable), "tinker")
    done = subprocess.run(
        [cli, "checkpoint", "download", state_path, "--output", out_dir],
        env=env, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    downloaded = os.path.join(out_dir, state_path[len("tinker://"):].replace("/", "_"))
    cli_files = sorted(os.listdir(downloaded))
    # Same weights: the CLI's files equal the export made right after save_state.
    a = tensors(os.path.join(downloaded, "adapter_model.safetensors"))
    b = tensors(os.path.join(out_dir, "ext_adapter_model.safetensors"))
    seen["same_adapter"] = sorted(a) == sorted(b) and all(np.array_equal(a[k], b[k]) for k in a)
    with open(os.path.join(downloaded, "adapter_config.json")) as f:
        seen["adapter_r"] = json.load(f)["r"]
    # The CLI's temporary export is gone again.
    paths = [c.tinker_path for c in rest.list_user_checkpoints().result().checkpoints]
    seen["exports_left"] = sorted(p for p in paths if "/external_weights/" in p)

    # Deleting the export: its links stop working and it leaves the list.
    link = next(iter(urls.urls.values()))
    rest.delete_checkpoint_from_tinker_path(ext).result()
    seen["link_after_delete"] = http_status(link)[0]
    paths = [c.tinker_path for c in rest.list_user_checkpoints().result().checkpoints]
    seen["listed_after_delete"] = ext in paths
    sc.close("success").result()
    print(json.dumps({"seen": seen, "files": files, "cli_files": cli_files, "ext": ext}))


def fair(url, base):
    a = client(url).create_lora_training_client(base_model=base, rank=8, seed=1).result()
    backlog = [a.forward_backward([sft_datum()] * 16, "cross_entropy") for _ in range(24)]
    b = client(url).create_lora_training_client(base_model=base, rank=8, seed=2).result()
    b.forward_backward([sft_datum()], "cross_entropy").result()
    for f in backlog:
        f.result()
    print(json.dumps({"a": a.model_id, "b": b.model_id}))


def dp(url, base):
    tc = client(url).create_lora_training_client(base_model=base, rank=8, seed=3).result()
    seqs = [SEQUENCE, SEQUENCE[2:], [7, 8, 9, 10, 11, 12]]

    def datum(seq, weight):
        return types.Datum(
            model_input=types.ModelInput.from_ints(seq[:-1]),
            loss_fn_inputs={"target_tokens": seq[1:], "weights": [weight] * (len(seq) - 1)},
        )

    losses, norms = [], []
    for step in range(4):
        batch = [datum(s, 1.0 + 0.5 * i) for i, s in enumerate(seqs)]
        if step == 2:
            batch = batch[:1]  # fewer datums than ranks
        out = tc.forward_backward(batch, "cross_entropy").result()
        losses.append(out.metrics["loss:sum"])
        opt = tc.optim_step(types.AdamParams(learning_rate=4e-3)).result()
        norms.append(opt.metrics["grad_norm:mean"])
    last = tc.forward([datum(s, 1.0) for s in seqs], "cross_entropy").result()
    logprobs = [o["logprobs"].tolist() for o in last.loss_fn_outputs]
    print(json.dumps({"losses": losses, "norms": norms, "logprobs": logprobs}))


def dead(url, base):
    sc = client(url)
    seen = {}
    try:
        tc = sc.create_lora_training_client(base_model=base, rank=8, seed=3).result()
        tc.forward_backward([sft_datum()], "cross_entropy").result()
        seen["train"] = "accepted"
    except Exception as e:
        seen["train"] = str(e)
    sampler = sc.create_sampling_client(base_model=base)
    out = sampler.sample(
        prompt=types.ModelInput.from_ints(PROMPT), num_samples=1,
        sampling_params=types.SamplingParams(max_tokens=4, temperature=0.0),
    ).result()
    seen["sampled"] = len(out.sequences[0].tokens)
    print(json.dumps(seen))


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
        "checkpoints": checkpoints,
        "fair": fair,
        "dp": dp,
        "dead": dead,
    }[mode](*args)
