"""The official `openai` client against `skyrl serve` (run by tests/openai_api.rs).

Usage: python openai_client.py BASE_URL MODEL MAX_NUM_SEQS. Exits non-zero on the
first failed assertion. The served model is a random tiny model with a
one-character-per-token tokenizer, so texts are gibberish but deterministic
under greedy decoding.
"""

import sys

import openai

BASE, MODEL, MAX_NUM_SEQS = sys.argv[1], sys.argv[2], int(sys.argv[3])
client = openai.OpenAI(base_url=f"{BASE}/v1", api_key="unused", max_retries=0, timeout=60)
GREEDY = dict(temperature=0, extra_body={"ignore_eos": True})


def complete(**kw):
    args = dict(model=MODEL, prompt="hello", max_tokens=8, **GREEDY)
    args.update(kw)
    return client.completions.create(**args)


def chat(**kw):
    args = dict(model=MODEL, messages=[{"role": "user", "content": "hi"}], max_tokens=6, **GREEDY)
    args.update(kw)
    return client.chat.completions.create(**args)


def expect_error(kind, needle, call):
    try:
        call()
    except kind as e:
        assert needle in str(e), f"{needle!r} not in {e}"
        return
    raise AssertionError(f"expected {kind.__name__} ({needle})")


# Completions: one choice, usage, finish reasons.
r = complete()
assert r.object == "text_completion" and r.model == MODEL
assert len(r.choices) == 1 and r.choices[0].finish_reason == "length"
assert r.usage.completion_tokens == 8 and r.usage.prompt_tokens == 5
greedy_text = r.choices[0].text

# n > 1: several samples per prompt, choices ordered prompt by prompt.
r = complete(prompt=["ab", "cd"], n=2, temperature=1.0, seed=3, extra_body={"ignore_eos": True})
assert [c.index for c in r.choices] == [0, 1, 2, 3]
assert r.usage.completion_tokens == 32 and r.usage.prompt_tokens == 4
again = complete(prompt=["ab", "cd"], n=2, temperature=1.0, seed=3, extra_body={"ignore_eos": True})
assert [c.text for c in again.choices] == [c.text for c in r.choices], "seeded sampling repeats"

# Chat, with max_completion_tokens and n.
r = chat(max_tokens=None, max_completion_tokens=4, n=2)
assert r.object == "chat.completion" and len(r.choices) == 2
assert all(c.message.role == "assistant" and c.finish_reason == "length" for c in r.choices)
assert r.usage.completion_tokens == 8
chat_text = chat().choices[0].message.content

# Streaming completions: text adds up, finish reason last, then usage.
chunks = list(complete(stream=True, stream_options={"include_usage": True}))
assert all(c.object == "text_completion" for c in chunks)
assert "".join(c.choices[0].text for c in chunks if c.choices) == greedy_text
assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 8
finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
assert finishes[-1] == "length" and all(f is None for f in finishes[:-1])

# Streaming chat with two choices: a role delta first, content adds up per choice.
chunks = list(chat(n=2, stream=True, stream_options={"include_usage": True}))
assert all(c.object == "chat.completion.chunk" for c in chunks)
texts, roles, finished = ["", ""], [None, None], [None, None]
for c in chunks[:-1]:
    (ch,) = c.choices
    if roles[ch.index] is None:
        roles[ch.index] = ch.delta.role
    texts[ch.index] += ch.delta.content or ""
    if ch.finish_reason:
        finished[ch.index] = ch.finish_reason
assert roles == ["assistant", "assistant"] and finished == ["length", "length"]
assert texts == [chat_text, chat_text], (texts, chat_text)
assert chunks[-1].usage.completion_tokens == 12

# Stop strings are cut from the text (vLLM's include_stop_str_in_output keeps them).
long_text = complete(max_tokens=16).choices[0].text
stop = long_text[5:7]
cut = long_text[: long_text.find(stop)]
r = complete(max_tokens=16, stop=[stop])
assert r.choices[0].text == cut and r.choices[0].finish_reason == "stop", (r.choices[0], stop)
kept = complete(max_tokens=16, stop=stop, extra_body={"ignore_eos": True, "include_stop_str_in_output": True})
assert kept.choices[0].text == cut + stop
streamed = "".join(c.choices[0].text for c in complete(max_tokens=16, stop=[stop], stream=True))
assert streamed == cut, (streamed, cut)

# Log-probs: completions (tokens, top alternatives, offsets) and chat.
r = complete(max_tokens=5, logprobs=3)
lp = r.choices[0].logprobs
assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == 5
assert "".join(lp.tokens) == r.choices[0].text
assert lp.text_offset == [0, 1, 2, 3, 4]
for tok, logprob, top in zip(lp.tokens, lp.token_logprobs, lp.top_logprobs):
    assert logprob <= 0 and len(top) >= 3 and tok in top
    assert abs(max(top.values()) - logprob) < 1e-4, "greedy picks the most likely token"
r = chat(max_tokens=4, logprobs=True, top_logprobs=2)
content = r.choices[0].logprobs.content
assert len(content) == 4
assert all(len(e.top_logprobs) == 2 and e.bytes == list(e.token.encode()) for e in content)
assert all(e.logprob <= 0 for e in content)

# Echo: the prompt comes back in front, with its tokens' log-probs (the first null).
r = complete(prompt="abcd", max_tokens=3, echo=True, logprobs=1)
c = r.choices[0]
assert c.text.startswith("abcd") and len(c.text) == 7
assert len(c.logprobs.tokens) == 7 and c.logprobs.tokens[:4] == ["a", "b", "c", "d"]
assert c.logprobs.token_logprobs[0] is None and c.logprobs.top_logprobs[0] is None
assert all(x <= 0 for x in c.logprobs.token_logprobs[1:])
assert complete(prompt="abcd", max_tokens=3, echo=True).choices[0].text.startswith("abcd")

# Penalties change greedy output that repeats itself.
plain = complete(max_tokens=40).choices[0].text
penalized = complete(max_tokens=40, frequency_penalty=2.0, presence_penalty=2.0).choices[0].text
assert len(set(penalized)) > len(set(plain)), (plain, penalized)
complete(max_tokens=4, extra_body={"ignore_eos": True, "repetition_penalty": 1.3})

# Errors: OpenAI's shape, mapped to the client's exception classes.
expect_error(openai.BadRequestError, "temperature", lambda: complete(temperature=-1))
expect_error(openai.BadRequestError, "presence_penalty", lambda: complete(presence_penalty=3))
expect_error(openai.BadRequestError, "max_num_seqs", lambda: complete(n=MAX_NUM_SEQS + 1))
expect_error(openai.BadRequestError, "context", lambda: complete(prompt="a" * 5000))
expect_error(openai.BadRequestError, "logprobs", lambda: chat(top_logprobs=2))
expect_error(openai.NotFoundError, "does not exist", lambda: complete(model="no-such-model"))
expect_error(openai.BadRequestError, "logit_bias", lambda: complete(logit_bias={"5": 1}))
print("ok")
