"""The scheduler's cache: a pod state machine (`Cache`) over the node table the framework
defines (`ascheduler.framework.nodes.NodeTable`), which plugins read."""

from ascheduler.cache.cache import Cache, CacheError

__all__ = ["Cache", "CacheError"]
