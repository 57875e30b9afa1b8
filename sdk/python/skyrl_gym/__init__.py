"""A skyrl-gym-compatible surface inside skyrl plugins.

skyrl-gym environments (``BaseTextEnv`` subclasses) and tools (``ToolGroup``
with ``@tool``) import from ``skyrl_gym``; ``skyrl plugin build`` bundles this
package, written for skyrl against skyrl-gym 0.4.0's public API, so their
source builds into a sandboxed component without edits. The env runs through
``skyrl_sdk.gym``, which adapts it to the environment world.

Subpackages of ``skyrl_gym.envs`` may live in the plugin's own folder
(``from skyrl_gym.envs.my_env import utils``): the build stages the folder
there.
"""

from skyrl_gym.core import Env
from skyrl_gym import error
from skyrl_gym.envs.registration import make, register, registry, spec
from skyrl_gym import envs, tools

__all__ = ["Env", "make", "spec", "register", "registry", "envs", "tools", "error"]
__version__ = "0.4.0+skyrl"
