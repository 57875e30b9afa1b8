// skyrl-sdk for JavaScript: write skyrl plugins as StarlingMonkey (SpiderMonkey)
// WebAssembly components built with componentize-js.
//
// An environment reads like skyrl-gym's:
//
//   import { Environment, StepOutput, exportEnv } from "skyrl-sdk";
//
//   class Echo extends Environment {
//     constructor(config, extras) { super(config, extras); this.target = extras.groundTruthStr(); }
//     step(action) { return StepOutput.final(action.trim() === this.target ? 1.0 : 0.0); }
//   }
//
//   exportEnv(Echo, { name: "echo", version: "0.1.0", description: "Repeat the answer." });
//
// `skyrl plugin build DIR` turns a folder with `plugin.js` and
// `skyrl-plugin.toml` into a component. This module has no wasm-only
// imports: it also loads in plain Node (`"skyrl-sdk": "file:.../sdk/js"`), so
// plugin logic can be unit-tested with `node --test`.

// ---- errors -----------------------------------------------------------------

/** The env config or the dataset row's extras are unusable (`invalid-config`). */
export class ConfigError extends Error {
  constructor(message) {
    super(message);
    this.name = "ConfigError";
  }
}

/** The call's input (an action, tool arguments) is unusable (`invalid-input`). */
export class InputError extends Error {
  constructor(message) {
    super(message);
    this.name = "InputError";
  }
}

/** Anything else that went wrong inside the plugin (`failed`). */
export class PluginFailure extends Error {
  constructor(message) {
    super(message);
    this.name = "PluginFailure";
  }
}

// ---- data types ---------------------------------------------------------------

/** One OpenAI-style chat message. */
export class Message {
  constructor(role, content) {
    this.role = role;
    this.content = content;
  }

  static user(content) {
    return new Message("user", content);
  }

  static assistant(content) {
    return new Message("assistant", content);
  }

  static system(content) {
    return new Message("system", content);
  }
}

/** The result of one `Environment.step`. */
export class StepOutput {
  constructor(observations = [], reward = 0.0, done = false, metadata = {}) {
    this.observations = observations;
    this.reward = reward;
    this.done = done;
    this.metadata = metadata;
  }

  /** A final step: done, no observations. */
  static final(reward, metadata = {}) {
    return new StepOutput([], Number(reward), true, metadata ?? {});
  }

  /** A non-final step that shows `observations` to the model. */
  static next(observations, reward = 0.0) {
    return new StepOutput([...observations], Number(reward), false, {});
  }
}

/** One tool's name, description and JSON-schema parameters. */
export class ToolSpec {
  constructor(name, description, parameters = { type: "object" }) {
    this.name = name;
    this.description = description;
    this.parameters = parameters;
  }
}

function isObject(value) {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

/**
 * The dataset row's extras: every column except `prompt` and `env_class`
 * (`reward_spec`, `extra_info`, ...), plus `max_turns` set by the generator.
 * The fields are the object's own properties (`extras.reward_spec`).
 */
export class Extras {
  constructor(fields = {}) {
    Object.assign(this, fields);
  }

  static fromJson(text) {
    return new Extras(parseObject(text, "extras"));
  }

  get rewardSpec() {
    return isObject(this.reward_spec) ? this.reward_spec : {};
  }

  get extraInfo() {
    return isObject(this.extra_info) ? this.extra_info : {};
  }

  /** `reward_spec.ground_truth`, or undefined. */
  groundTruth() {
    return this.rewardSpec.ground_truth;
  }

  /** `reward_spec.ground_truth` as text (numbers and booleans in their JSON spelling). */
  groundTruthStr() {
    const value = this.groundTruth();
    if (value === undefined || value === null) {
      throw new ConfigError("extras.reward_spec.ground_truth is required");
    }
    if (typeof value === "string") return value;
    if (typeof value === "boolean" || (typeof value === "number" && Number.isFinite(value))) {
      return JSON.stringify(value);
    }
    throw new ConfigError(
      `extras.reward_spec.ground_truth must be a string or number, got ${JSON.stringify(value)}`,
    );
  }

  /** `max_turns` (set by the generator), else `extra_info.max_turns`, else `fallback`. */
  maxTurns(fallback) {
    let value = this.max_turns;
    if (value === undefined || value === null) value = this.extraInfo.max_turns;
    if (value === undefined || value === null) return fallback;
    const turns = typeof value === "string" && value.trim() !== "" ? Number(value.trim()) : value;
    if (typeof turns !== "number" || !Number.isInteger(turns) || turns < 1) {
      throw new ConfigError(`max_turns must be a positive integer, got ${JSON.stringify(value)}`);
    }
    return turns;
  }
}

// ---- base classes -------------------------------------------------------------

/**
 * A skyrl-gym style environment: one instance per episode. The host calls
 * `new Cls(config, extras)`, then `init(prompt)` once, then `step(action)`
 * until a step returns `done`, then `metrics()` and `close()`. Methods may be
 * `async`.
 */
export class Environment {
  constructor(config = {}, extras = new Extras()) {
    this.config = config;
    this.extras = extras;
  }

  /** The (possibly rewritten) prompt and a metadata object. */
  init(prompt) {
    return { prompt, metadata: {} };
  }

  /** @returns {StepOutput} */
  step(_action) {
    throw new PluginFailure(`${this.constructor.name}.step is not implemented`);
  }

  /** Episode metrics: numbers or bools, averaged by the host. */
  metrics() {
    return {};
  }

  /** Release resources at the end of the episode. */
  close() {}
}

/** A set of named tools; one instance serves one call. */
export class Tool {
  /** @returns {ToolSpec[]} */
  specs() {
    throw new PluginFailure(`${this.constructor.name}.specs is not implemented`);
  }

  /** Return text, or any JSON value (sent as JSON text). */
  call(name, _args) {
    throw new PluginFailure(`${this.constructor.name}.call(${name}) is not implemented`);
  }
}

/** A reward function. */
export class Reward {
  /** @returns {number} */
  score(_prompt, _response, _groundTruth, _extras) {
    throw new PluginFailure(`${this.constructor.name}.score is not implemented`);
  }
}

// ---- host imports -------------------------------------------------------------

// `skyrl:plugin/host`, set by the entry module `skyrl plugin build` generates;
// null outside a wasm host.
let host = null;
const LEVELS = ["trace", "debug", "info", "warn", "error"];

/** Write a line into the host's `tracing` output (`trace` .. `error`). */
export function log(level, message) {
  if (!LEVELS.includes(level)) {
    throw new TypeError(`log level must be one of ${LEVELS.join(", ")}`);
  }
  if (host === null) {
    console.error(`[${level}] ${message}`);
    return;
  }
  host.log(level, String(message));
}

function argsText(args) {
  return typeof args === "string" ? args : JSON.stringify(args ?? {});
}

function hostCall(name, f) {
  if (host === null) {
    throw new PluginFailure(`cannot call tool \`${name}\`: not running inside a skyrl wasm host`);
  }
  try {
    return f();
  } catch (e) {
    // componentize-js throws a ComponentError whose `payload` is the err text.
    if (e && Object.prototype.hasOwnProperty.call(e, "payload")) {
      throw new PluginFailure(String(e.payload));
    }
    throw e;
  }
}

/**
 * Call a tool another plugin provides; `args` is an object or JSON text.
 * Throws `PluginFailure` with the host's message when the call fails.
 */
export function callTool(name, args) {
  return hostCall(name, () => host.callTool(name, argsText(args)));
}

/** `callTool` that must finish within `timeoutS` seconds. */
export function callToolWithTimeout(name, args, timeoutS) {
  const ms = Math.max(1, Math.min(Math.floor(timeoutS * 1000), 2 ** 32 - 1));
  return hostCall(name, () => host.callToolTimeout(name, argsText(args), ms));
}

// ---- gsm8k ----------------------------------------------------------------------

const GSM8K_ANSWER = /#### (\-?[0-9\.\,]+)/;

/** GSM8K answer extraction and scoring, as skyrl-gym's `gsm8k.utils` (`method="strict"`). */
export const gsm8k = Object.freeze({
  /** The FIRST `#### <number>` answer with `,` and `$` removed, or null. */
  extractAnswer(response) {
    const match = GSM8K_ANSWER.exec(response);
    if (match === null) return null;
    return match[1].replaceAll(",", "").replaceAll("$", "");
  },

  /** No answer -> 0.0; answer === groundTruth (as strings) -> score; else formatScore. */
  computeScore(response, groundTruth, formatScore = 0.0, score = 1.0) {
    const answer = gsm8k.extractAnswer(response);
    if (answer === null) return 0.0;
    return answer === groundTruth ? score : formatScore;
  },
});

// ---- registration -----------------------------------------------------------------

const KINDS = {
  environment: { base: Environment, iface: "environment", exporter: "exportEnv" },
  tool: { base: Tool, iface: "tool", exporter: "exportTool" },
  reward: { base: Reward, iface: "reward", exporter: "exportReward" },
};

let registered = null;

function register(kind, cls, info = {}) {
  const { base, exporter } = KINDS[kind];
  if (typeof cls !== "function" || !(cls.prototype instanceof base)) {
    throw new TypeError(`${exporter} expects a class extending skyrl-sdk's ${base.name}`);
  }
  if (registered !== null && registered.cls !== cls) {
    throw new Error(`one plugin per component: ${registered.cls.name} is already exported`);
  }
  const { name, version, description = "", usesTools = [] } = info;
  for (const [field, value] of [["name", name], ["version", version], ["description", description]]) {
    if (typeof value !== "string" || (field !== "description" && value === "")) {
      throw new TypeError(`${exporter}: \`${field}\` must be a non-empty string`);
    }
  }
  if (!Array.isArray(usesTools) || !usesTools.every((t) => typeof t === "string")) {
    throw new TypeError(`${exporter}: \`usesTools\` must be an array of tool names`);
  }
  registered = { kind, cls, name, version, description, usesTools: [...usesTools] };
  return worldExports(kind);
}

/**
 * Export `cls` (extending `Environment`) as this component's env. Returns
 * the world's exports `{ plugin, environment }`; re-exporting them is optional.
 */
export function exportEnv(cls, info) {
  return register("environment", cls, info);
}

/** Export `cls` (extending `Tool`) as this component's tool set: `{ plugin, tool }`. */
export function exportTool(cls, info) {
  return register("tool", cls, info);
}

/** Export `cls` (extending `Reward`) as this component's reward: `{ plugin, reward }`. */
export function exportReward(cls, info) {
  return register("reward", cls, info);
}

// ---- WIT glue (componentize-js conventions) -------------------------------------
//
// Records are plain objects with camelCase fields, enums and variant tags are
// kebab-case strings, a `result<T, plugin-error>` is returned as
// `{ tag: "ok", val }` / `{ tag: "err", val: { tag: "invalid-config", val: msg } }`,
// and an exported resource is a class with static constructors.

function parseObject(text, what) {
  let value;
  try {
    value = text.trim() === "" ? {} : JSON.parse(text);
  } catch (e) {
    throw new ConfigError(`${what} is not JSON: ${e.message}`);
  }
  if (!isObject(value)) throw new ConfigError(`${what} must be a JSON object`);
  return value;
}

function pluginError(e) {
  if (e instanceof ConfigError) return { tag: "invalid-config", val: e.message };
  if (e instanceof InputError) return { tag: "invalid-input", val: e.message };
  if (e instanceof Error) {
    const stack = typeof e.stack === "string" && e.stack !== "" ? `\n${e.stack}` : "";
    return { tag: "failed", val: `${e}${stack}` };
  }
  return { tag: "failed", val: `uncaught ${String(e)}` };
}

/** Runs plugin code, turning its exceptions into `plugin-error`s. */
async function guarded(f) {
  try {
    return { tag: "ok", val: await f() };
  } catch (e) {
    return { tag: "err", val: pluginError(e) };
  }
}

function current(kind) {
  if (registered === null) {
    throw new Error(`the plugin exported nothing: call skyrl-sdk's ${KINDS[kind].exporter}`);
  }
  return registered;
}

function toWit(messages, what) {
  if (!Array.isArray(messages)) throw new TypeError(`${what} must be an array of messages`);
  return messages.map((m) => {
    if (!isObject(m) || typeof m.role !== "string" || typeof m.content !== "string") {
      throw new TypeError(`${what} must hold {role, content} string messages, got ${JSON.stringify(m)}`);
    }
    return { role: m.role, content: m.content };
  });
}

function fromWit(messages) {
  return messages.map((m) => new Message(m.role, m.content));
}

function metadataJson(value) {
  if (value === undefined || value === null) return "{}";
  if (!isObject(value)) throw new TypeError(`metadata must be an object, got ${JSON.stringify(value)}`);
  return JSON.stringify(value);
}

function reward(value) {
  if (typeof value !== "number") throw new TypeError(`reward must be a number, got ${JSON.stringify(value)}`);
  return value;
}

const plugin = {
  info() {
    const reg = registered;
    if (reg === null) throw new Error("the plugin exported nothing");
    return {
      name: reg.name,
      version: reg.version,
      kind: reg.kind,
      description: reg.description,
      usesTools: [...reg.usesTools],
    };
  },
};

/** The WIT `env` resource wrapping the registered `Environment`. */
class Env {
  static async create(configJson, extrasJson) {
    return guarded(() => {
      const config = parseObject(configJson, "env config");
      const extras = new Extras(parseObject(extrasJson, "extras"));
      const env = new Env();
      env.inner = new (current("environment").cls)(config, extras);
      return env;
    });
  }

  async init(prompt) {
    return guarded(async () => {
      const out = await this.inner.init(fromWit(prompt));
      // `{ prompt, metadata }`, or just the prompt.
      const [messages, metadata] = Array.isArray(out) ? [out, {}] : [out?.prompt, out?.metadata];
      return { prompt: toWit(messages, "init's prompt"), metadataJson: metadataJson(metadata) };
    });
  }

  async step(action) {
    return guarded(async () => {
      const out = await this.inner.step(action);
      if (!isObject(out)) {
        throw new TypeError(`step must return a StepOutput, got ${JSON.stringify(out)}`);
      }
      return {
        observations: toWit(out.observations ?? [], "step's observations"),
        reward: reward(out.reward),
        done: Boolean(out.done),
        metadataJson: metadataJson(out.metadata),
      };
    });
  }

  async close() {
    try {
      await this.inner?.close();
    } catch {
      // close cannot report errors
    }
  }

  async metrics() {
    try {
      const value = await this.inner?.metrics();
      return isObject(value) ? JSON.stringify(value) : "{}";
    } catch {
      return "{}";
    }
  }
}

const environment = { Env };

const tool = {
  async specs() {
    const specs = await new (current("tool").cls)().specs();
    return specs.map((s) => ({
      name: s.name,
      description: s.description ?? "",
      parametersJson: JSON.stringify(s.parameters ?? { type: "object" }),
    }));
  },

  async call(name, argsJson) {
    return guarded(async () => {
      let args;
      try {
        args = argsJson.trim() === "" ? {} : JSON.parse(argsJson);
      } catch (e) {
        throw new InputError(`tool arguments are not JSON: ${e.message}`);
      }
      if (!isObject(args)) throw new InputError("tool arguments must be a JSON object");
      const out = await new (current("tool").cls)().call(name, args);
      return typeof out === "string" ? out : JSON.stringify(out ?? null);
    });
  },
};

const rewardIface = {
  async score(prompt, response, groundTruthJson, extrasJson) {
    return guarded(async () => {
      let truth = null;
      try {
        truth = groundTruthJson.trim() === "" ? null : JSON.parse(groundTruthJson);
      } catch (e) {
        throw new ConfigError(`ground truth is not JSON: ${e.message}`);
      }
      const extras = new Extras(parseObject(extrasJson, "extras"));
      const value = await new (current("reward").cls)().score(fromWit(prompt), response, truth, extras);
      return reward(Number(value));
    });
  },
};

const IFACES = { environment, tool, reward: rewardIface };

function worldExports(kind) {
  return { plugin, [KINDS[kind].iface]: IFACES[kind] };
}

/**
 * Used by the entry module `skyrl plugin build` generates: wires the host
 * imports and returns the world's exports for `kind`, preferring any the
 * plugin module exports itself (hand-written componentize-js bindings).
 * @internal
 */
export function __skyrlWorld(kind, userModule, hostImports) {
  host = hostImports ?? null;
  const { iface } = KINDS[kind];
  const own = { plugin: userModule?.plugin, [iface]: userModule?.[iface] };
  if (own.plugin !== undefined && own[iface] !== undefined) return own;
  const reg = current(kind);
  if (reg.kind !== kind) {
    throw new Error(
      `skyrl-plugin.toml says kind = "${kind}", but the plugin called ${KINDS[reg.kind].exporter}`,
    );
  }
  return { plugin: own.plugin ?? plugin, [iface]: own[iface] ?? IFACES[kind] };
}
