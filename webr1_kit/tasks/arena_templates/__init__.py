"""Arena task templates, one module per site, plus multi-site ones."""

from . import code as code_templates
from . import admin, forum, multi, shop

ALL = [*shop.TEMPLATES, *admin.TEMPLATES, *forum.TEMPLATES, *code_templates.TEMPLATES, *multi.TEMPLATES]
