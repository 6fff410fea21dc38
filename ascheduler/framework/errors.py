"""Configuration errors, each naming the path of the offending field."""

from __future__ import annotations


class PluginArgsError(ValueError):
    """A plugin's arguments are invalid; the message starts with the argument's path."""


class ConfigError(ValueError):
    """One or more problems in a scheduler configuration, each with its path."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("; ".join(problems))
