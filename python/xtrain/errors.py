"""xtrain's Python exceptions."""
from . import _C

# A bad config (unknown key, wrong type, inconsistent batch sizes): a ValueError whose text is the
# C++ reader's, with its did-you-mean suggestion.
ConfigError = _C.ConfigError


class NotSupported(NotImplementedError, AttributeError):
    """Something DeepSpeed has that xtrain does not: names it. Also an AttributeError, so that
    hasattr() and getattr(obj, name, default) see it as absent."""

    def __init__(self, what):
        super().__init__(f"xtrain does not implement {what} (DeepSpeed's API); see README.md, 'From Python'")
