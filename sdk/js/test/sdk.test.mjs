// Plain-Node tests of sdk/js: `node --test sdk/js/test/`.
import assert from "node:assert/strict";
import { test } from "node:test";

import {
  ConfigError,
  Environment,
  Extras,
  InputError,
  Message,
  Reward,
  StepOutput,
  Tool,
  ToolSpec,
  __skyrlWorld,
  callTool,
  exportEnv,
  gsm8k,
} from "../skyrl_sdk.js";

test("gsm8k follows skyrl-gym strict extraction", () => {
  const cases = [
    ["72", "48 + 24 = 72\n#### 72", 1],
    ["72", "#### 70", 0],
    ["72", "The answer is 72", 0],
    ["1234", "#### 1,234", 1],
    ["1234", "#### $1234", 0],
    ["-7.5", "so #### -7.5 and #### 3", 1],
    ["3", "#### - then #### 3", 1],
    ["42", "##### 42", 1],
    ["42", "", 0],
  ];
  for (const [truth, response, reward] of cases) {
    assert.equal(gsm8k.computeScore(response, truth), reward, JSON.stringify(response));
  }
  assert.equal(gsm8k.extractAnswer("#### 1,2$3"), "12"); // `$` ends the match
  assert.equal(gsm8k.extractAnswer("no answer"), null);
  assert.equal(gsm8k.computeScore("#### 1", "2", 0.1), 0.1);
});

test("extras read ground truth and max turns", () => {
  assert.equal(new Extras({ reward_spec: { ground_truth: "72" } }).groundTruthStr(), "72");
  assert.equal(new Extras({ reward_spec: { ground_truth: 1234 } }).groundTruthStr(), "1234");
  assert.equal(new Extras({ reward_spec: { ground_truth: -7.5 } }).groundTruthStr(), "-7.5");
  assert.throws(() => new Extras({ reward_spec: {} }).groundTruthStr(), (e) =>
    e instanceof ConfigError && e.message.includes("ground_truth"));
  assert.throws(() => new Extras({ reward_spec: { ground_truth: [1] } }).groundTruthStr(), ConfigError);
  assert.equal(new Extras({}).maxTurns(3), 3);
  assert.equal(new Extras({ max_turns: 5, extra_info: { max_turns: 2 } }).maxTurns(3), 5);
  assert.equal(new Extras({ extra_info: { max_turns: "2" } }).maxTurns(3), 2);
  assert.throws(() => new Extras({ max_turns: 0 }).maxTurns(3), ConfigError);
  assert.equal(Extras.fromJson('{"a": 1}').a, 1);
});

test("step outputs and messages", () => {
  assert.deepEqual({ ...StepOutput.final(1) }, { observations: [], reward: 1, done: true, metadata: {} });
  const next = StepOutput.next([Message.user("again")], 0.5);
  assert.equal(next.done, false);
  assert.deepEqual({ ...next.observations[0] }, { role: "user", content: "again" });
});

class Counter extends Environment {
  constructor(config, extras) {
    super(config, extras);
    this.truth = extras.groundTruthStr();
    this.turns = 0;
  }

  async step(action) {
    this.turns += 1;
    if (action === "bad") throw new InputError("bad action");
    if (action === "boom") throw new RangeError("boom");
    if (action === "more") return StepOutput.next([Message.user("more?")]);
    return StepOutput.final(gsm8k.computeScore(action, this.truth), { turns: this.turns });
  }

  metrics() {
    return { turns: this.turns };
  }
}

test("the env glue speaks componentize-js's conventions", async () => {
  const exported = exportEnv(Counter, { name: "counter", version: "0.1.0", description: "d" });
  const world = __skyrlWorld("environment", {}, null);
  assert.equal(world.plugin, exported.plugin);
  assert.equal(world.environment, exported.environment);
  assert.deepEqual(world.plugin.info(), {
    name: "counter", version: "0.1.0", kind: "environment", description: "d", usesTools: [],
  });
  const { Env } = world.environment;

  assert.deepEqual(await Env.create("{}", '{"reward_spec": {}}'), {
    tag: "err", val: { tag: "invalid-config", val: "extras.reward_spec.ground_truth is required" },
  });
  assert.equal((await Env.create("[]", "{}")).val.tag, "invalid-config");
  assert.equal((await Env.create("{}", "not json")).val.tag, "invalid-config");

  const created = await Env.create("", '{"reward_spec": {"ground_truth": 72}}');
  assert.equal(created.tag, "ok");
  const env = created.val;
  assert.ok(env instanceof Env);
  const prompt = [{ role: "system", content: "sys" }, { role: "user", content: "q" }];
  assert.deepEqual(await env.init(prompt), { tag: "ok", val: { prompt, metadataJson: "{}" } });
  assert.deepEqual(await env.step("more"), {
    tag: "ok", val: { observations: [{ role: "user", content: "more?" }], reward: 0, done: false, metadataJson: "{}" },
  });
  assert.deepEqual(await env.step("bad"), { tag: "err", val: { tag: "invalid-input", val: "bad action" } });
  const failed = await env.step("boom");
  assert.equal(failed.val.tag, "failed");
  assert.match(failed.val.val, /RangeError: boom/);
  assert.deepEqual(await env.step("#### 72"), {
    tag: "ok", val: { observations: [], reward: 1, done: true, metadataJson: '{"turns":4}' },
  });
  assert.equal(await env.metrics(), '{"turns":4}');
  await env.close();

  assert.throws(() => __skyrlWorld("tool", {}, null), /kind = "tool"/);
  assert.throws(() => exportEnv(class {}, { name: "x", version: "1" }), TypeError);
});

test("tools and rewards outside the host", async () => {
  assert.throws(() => callTool("python", { code: "1" }), /not running inside a skyrl wasm host/);
  // Base classes exist for the other kinds.
  assert.ok(new Tool() && new Reward() && new ToolSpec("t", "d").parameters.type === "object");
});
