"""``skyrl_gym.core``: the ``Env`` base class and its step output type."""

from __future__ import annotations

from typing import Any, Dict, Generic, Optional, SupportsFloat, Tuple, TypedDict, TypeVar

ObsType = TypeVar("ObsType")
ActType = TypeVar("ActType")


class EnvStepOutput(TypedDict):
    observations: Any
    reward: SupportsFloat
    done: bool
    metadata: Optional[Dict[str, Any]]


class Env(Generic[ObsType, ActType]):
    """An environment: ``init`` once, ``step`` per action, then ``close``."""

    def step(self, action: ActType) -> EnvStepOutput:
        raise NotImplementedError

    def init(self, *kwargs) -> Tuple[ObsType, Dict[str, Any]]:
        raise NotImplementedError

    def close(self):
        pass

    def __str__(self):
        return f"<{type(self).__name__} instance>"

    def __enter__(self):
        return self

    def __exit__(self, *args: Any):
        self.close()
        return False
