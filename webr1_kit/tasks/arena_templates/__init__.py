"""Arena task templates, one module per site (plus multi-site ones)."""

from . import shop

ALL = [*shop.TEMPLATES]
