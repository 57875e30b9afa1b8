"""skyrl-sdk for Python: write skyrl plugins as CPython WebAssembly components.

An environment reads like skyrl-gym's::

    import skyrl_sdk as sk

    class Echo(sk.Environment):
        def __init__(self, config, extras):
            self.target = extras.ground_truth_str()

        def step(self, action):
            return sk.StepOutput.final(1.0 if action.strip() == self.target else 0.0)

    sk.export_env(Echo, name="echo", version="0.1.0", description="Repeat the answer.")

`skyrl plugin build DIR` turns a folder with `plugin.py` and
`skyrl-plugin.toml` into a component (componentize-py). The pure-Python parts
of this package (everything but the WIT glue) import outside a wasm host too,
so plugin logic can be unit-tested with plain `python -m pytest`.
"""

from .types import (
    AdvantageInput,
    AdvantageOutput,
    ConfigError,
    Extras,
    InputError,
    LossInput,
    LossOutput,
    Matrix,
    Message,
    PluginFailure,
    StepOutput,
    ToolSpec,
)
from .plugin import (
    Algorithm,
    Environment,
    Reward,
    Tool,
    export_algorithm,
    export_env,
    export_reward,
    export_tool,
)
from .host import call_tool, call_tool_with_timeout, log

__all__ = [
    "AdvantageInput",
    "AdvantageOutput",
    "Algorithm",
    "ConfigError",
    "Environment",
    "Extras",
    "InputError",
    "LossInput",
    "LossOutput",
    "Matrix",
    "Message",
    "PluginFailure",
    "Reward",
    "StepOutput",
    "Tool",
    "ToolSpec",
    "call_tool",
    "call_tool_with_timeout",
    "export_algorithm",
    "export_env",
    "export_reward",
    "export_tool",
    "log",
]
