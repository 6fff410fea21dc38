"""Label keys and values as apimachinery validates them (`IsQualifiedName`,
`IsValidLabelValue`), for configuration that names labels or resources the same way."""

from __future__ import annotations

import re
from typing import Final

_NAME: Final = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
_DNS_LABEL: Final = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


def label_key_problem(key: str) -> str:
    """Why `key` is not a label key (apimachinery's IsQualifiedName), or ""."""
    prefix, slash, name = key.rpartition("/")
    if slash and not prefix:
        return "prefix part must be non-empty"
    if slash and (len(prefix) > 253 or not all(_DNS_LABEL.fullmatch(p) for p in prefix.split("."))):
        return "prefix part must be a lowercase RFC 1123 subdomain"
    if not name:
        return "name part must be non-empty"
    if len(name) > 63 or not _NAME.fullmatch(name):
        return (
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must "
            "start and end with an alphanumeric character (at most 63 characters)"
        )
    return ""


def label_value_problem(value: str) -> str:
    """Why `value` is not a label value, or ""."""
    if value and (len(value) > 63 or not _NAME.fullmatch(value)):
        return (
            "a valid label must be an empty string or consist of alphanumeric characters, "
            "'-', '_' or '.', and must start and end with an alphanumeric character "
            "(at most 63 characters)"
        )
    return ""
