"""``skyrl_gym.tools.core``: the ``@tool`` decorator and ``ToolGroup``."""

from typing import Any, Callable, Dict, List, Optional


class tool:
    """Marks a ToolGroup method as a tool named after the function."""

    def __init__(self, func: Callable):
        self.func = func
        self.name = func.__name__

    def __get__(self, instance, owner):
        if instance is None:
            return self
        return lambda *args, **kwargs: self.func(instance, *args, **kwargs)


class ToolGroup:
    """A named group of ``@tool`` methods."""

    def __init__(self, name: str):
        self.name = name
        self._tool_registry: Dict[str, Callable] = {}
        self._register_tools()

    def get_name(self):
        return self.name

    def _register_tools(self):
        for attr_name in dir(self):
            raw = getattr(type(self), attr_name, None)
            if isinstance(raw, tool):
                self._tool_registry[raw.name] = getattr(self, attr_name)

    def get_tool(self, name: str) -> Optional[Callable]:
        return self._tool_registry.get(name)

    def get_tool_names(self) -> List[str]:
        return list(self._tool_registry.keys())

    def execute_tool(self, name: str, *args, **kwargs) -> Any:
        tool_func = self.get_tool(name)
        if tool_func:
            return tool_func(*args, **kwargs)
        raise ValueError(f"Tool '{name}' not found in group '{self.name}'.")

    def get_tool_to_group_mapping(self) -> Dict[str, str]:
        return {name: self.name for name in self._tool_registry}
