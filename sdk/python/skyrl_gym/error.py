"""``skyrl_gym.error``: the exceptions skyrl-gym code may raise or catch."""


class Error(Exception):
    """Base class of skyrl_gym errors."""


class UnregisteredEnv(Error):
    """No env is registered under the requested id."""


class RegistrationError(Error):
    """An env registration is malformed."""
