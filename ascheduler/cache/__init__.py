"""Nodes with their pods' aggregated requests, as columns (`NodeTable`) under a pod state
machine (`Cache`)."""

from ascheduler.cache.cache import Cache, CacheError
from ascheduler.cache.table import NodeTable

__all__ = ["Cache", "CacheError", "NodeTable"]
