"""``skyrl_gym.envs.registration``: ids mapped to env entry points.

Inside a plugin the host picks the env, so the registry only serves code
that registers or makes envs itself.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Union

from skyrl_gym import error


@dataclass
class EnvSpec:
    id: str
    entry_point: Union[str, Callable[..., Any]]
    kwargs: Dict[str, Any] = field(default_factory=dict)


registry: Dict[str, EnvSpec] = {}


def register(id: str, entry_point: Union[str, Callable[..., Any]], **kwargs: Any) -> None:
    registry[id] = EnvSpec(id=id, entry_point=entry_point, kwargs=kwargs)


def deregister(id: str) -> None:
    registry.pop(id, None)


def spec(id: str) -> EnvSpec:
    if id not in registry:
        raise error.UnregisteredEnv(f"no env registered with id {id!r}")
    return registry[id]


def load_env_creator(name: str) -> Callable[..., Any]:
    module, attr = name.split(":")
    return getattr(importlib.import_module(module), attr)


def make(id: str, **kwargs: Any) -> Any:
    env_spec = spec(id)
    creator = env_spec.entry_point
    if isinstance(creator, str):
        creator = load_env_creator(creator)
    return creator(**{**env_spec.kwargs, **kwargs})


def pprint_registry() -> None:
    print("\n".join(sorted(registry)))
