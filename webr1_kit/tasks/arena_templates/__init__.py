"""Arena task templates, one module per site (plus multi-site ones)."""

from . import code as code_templates
from . import shop

ALL = [*shop.TEMPLATES, *code_templates.TEMPLATES]
