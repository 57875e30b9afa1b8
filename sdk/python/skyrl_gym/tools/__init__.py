"""``skyrl_gym.tools``: ``tool`` and ``ToolGroup``.

skyrl-gym's built-in tool groups (SQL, search, Python) are not bundled: in
skyrl they are tool plugins (``plugins/search_tool``, ``plugins/python``) a
plugin calls through the host, each in its own sandbox. A plugin folder of
tools is staged as ``skyrl_gym.tools.<name>`` (``__path__`` is extended as
for ``skyrl_gym.envs``).
"""

from pkgutil import extend_path

__path__ = extend_path(__path__, __name__)

from skyrl_gym.tools.core import ToolGroup, tool  # noqa: E402

_HOSTED = {
    "SearchToolGroup": "the search_tool plugin (call_tool('search', ...))",
    "PythonCodeExecutorToolGroup": "the python tool plugin (call_tool('python', ...))",
    "SQLCodeExecutorToolGroup": "the text2sql env plugin (SQLite in its own sandbox)",
}


def __getattr__(name: str):
    if name in _HOSTED:
        raise ImportError(
            f"skyrl_gym.tools.{name} is not bundled into skyrl plugins; use {_HOSTED[name]}"
        )
    raise AttributeError(name)


__all__ = ["tool", "ToolGroup"]
