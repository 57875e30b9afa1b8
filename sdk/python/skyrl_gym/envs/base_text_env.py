"""``skyrl_gym.envs.base_text_env``: the text-in / text-out env base class."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple, TypedDict

from skyrl_gym import Env

MessageType = Dict[str, str]
ConversationType = List[MessageType]


class BaseTextEnvStepOutput(TypedDict):
    observations: ConversationType
    reward: float
    done: bool
    metadata: Dict[str, Any]
    postprocessed_action: Optional[str]


class BaseTextEnv(Env[ConversationType, str]):
    """Base class of text environments with optional tool groups."""

    def __init__(self):
        super().__init__()
        self.turns = 0
        self.max_turns = 1
        self.tool_groups = []
        self.tool_to_toolgroup = {}

    def init_tool_groups(self, tool_groups: List = []) -> None:
        self.tool_groups = tool_groups
        self.tool_to_toolgroup = {}
        for tool_group in self.tool_groups:
            self.tool_to_toolgroup.update(tool_group.get_tool_to_group_mapping())

    def _execute_tool(self, tool_group_name: str, tool_name: str, tool_input: Any) -> str:
        for group in self.tool_groups:
            if group.name == tool_group_name:
                return group.execute_tool(tool_name, *tool_input)
        raise ValueError(f"ToolGroup '{tool_group_name}' not found.")

    def step(self, action: str) -> BaseTextEnvStepOutput:
        pass

    def init(self, prompt: ConversationType) -> Tuple[ConversationType, Dict[str, Any]]:
        return prompt, {}

    def close(self):
        pass

    def get_metrics(self) -> Dict[str, Any]:
        return {}

    @staticmethod
    def aggregate_metrics(metrics: List[Dict[str, Any]]) -> Dict[str, Any]:
        from skyrl_gym.metrics import default_aggregate_metrics

        return default_aggregate_metrics(metrics)
