"""``skyrl_gym.envs``: ``BaseTextEnv`` and registration.

Its ``__path__`` is extended like a pkgutil namespace, so a plugin folder
staged as ``skyrl_gym/envs/<name>/`` (``skyrl plugin build``) is importable as
``skyrl_gym.envs.<name>`` beside this package.
"""

from pkgutil import extend_path

__path__ = extend_path(__path__, __name__)

from skyrl_gym.envs.registration import deregister, register  # noqa: E402

__all__ = ["register", "deregister"]
