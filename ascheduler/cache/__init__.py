"""The scheduler's cache: a pod state machine (`Cache`) over the node table
(`nodetable.MutableNodeTable`, the writes of the `ascheduler.framework.nodes.NodeTable` plugins
read), and the stores of the other objects the informers bring (`objects`, `storage`, `gangs`,
`attachments`; plugins read them through `ascheduler.framework.listers`)."""

from ascheduler.cache.cache import Cache, CacheError

__all__ = ["Cache", "CacheError"]
