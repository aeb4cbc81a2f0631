"""Where the WebArena sites are, where the task files are, which accounts and judge to use.

Sources, later ones winning key by key:

1. a config file (YAML or JSON), passed as `path` or named by $WEBR1_WEBARENA_CONFIG;
2. environment variables: WebArena's own site names (SHOPPING, SHOPPING_ADMIN, REDDIT,
   GITLAB, MAP, WIKIPEDIA, HOMEPAGE) and the kit's WEBR1_WEBARENA_* / WEBR1_JUDGE_*;
3. explicit arguments (the CLI's --tasks-file and --split-file).

A config file looks like this (every key optional; relative paths are relative to the file):

    sites:
      shopping: http://myhost:7770
      shopping_admin: http://myhost:7780/admin
      reddit: http://myhost:9999
      gitlab: http://myhost:8023
      map: http://myhost:3000
      wikipedia: http://myhost:8888/wikipedia_en_all_maxi_2022-05/A/User:The_other_Kiwix_guy/Landing
      homepage: http://myhost:4399
    tasks: webarena/config_files/test.raw.json     # or a folder of per-task N.json files
    split_file: webarena_lite_split.json             # {"train": [...], "test": [...]} or Lite's test raw file
    cache_dir: ~/.cache/webr1/webarena                # login states, reset fingerprints
    accounts:                                        # override WebArena's default accounts
      reddit: {username: MarvelsGrantMan136, password: test1234}
    judge:                                           # fuzzy_match's LLM judge (OpenAI-compatible)
      base_url: https://api.openai.com/v1
      model: gpt-4-1106-preview
      api_key_env: OPENAI_API_KEY                    # the key itself stays in the environment
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping
from urllib.parse import urlsplit

SITES = ("shopping", "shopping_admin", "reddit", "gitlab", "map", "wikipedia", "homepage")
"""WebArena's site names, as task files write them in `sites`."""
ENV_NAMES = {site: site.upper() for site in SITES}
"""The environment variable WebArena reads each site's URL from."""
PLACEHOLDERS = {site: f"__{site.upper()}__" for site in SITES}
"""The placeholder WebArena's raw task files write for each site's URL."""

CONFIG_ENV = "WEBR1_WEBARENA_CONFIG"
TASKS_ENV = "WEBR1_WEBARENA_TASKS"
SPLIT_ENV = "WEBR1_WEBARENA_SPLIT"
CACHE_ENV = "WEBR1_WEBARENA_CACHE"
JUDGE_URL_ENV = "WEBR1_JUDGE_BASE_URL"
JUDGE_MODEL_ENV = "WEBR1_JUDGE_MODEL"
JUDGE_KEY_ENV = "WEBR1_JUDGE_API_KEY"
DEFAULT_CACHE = "~/.cache/webr1/webarena"

ACCOUNTS: dict[str, dict[str, str]] = {
    "shopping": {"username": "emma.lopez@gmail.com", "password": "Password.123"},
    "shopping_admin": {"username": "admin", "password": "admin1234"},
    # The storefront's own Magento admin: its REST API answers the shopping_* helpers.
    "shopping_site_admin": {"username": "admin", "password": "admin1234"},
    "reddit": {"username": "MarvelsGrantMan136", "password": "test1234"},
    "gitlab": {"username": "byteblaze", "password": "hello1234"},
}
"""The accounts WebArena's Docker images ship with (its published defaults)."""

HOW_TO_CONFIGURE = (
    "set the site URLs in environment variables (SHOPPING, SHOPPING_ADMIN, REDDIT, GITLAB, MAP, "
    f"WIKIPEDIA, HOMEPAGE) or in a config file named by ${CONFIG_ENV} or --webarena-config "
    "(see the README section 'Real WebArena')"
)


class WebArenaConfigError(ValueError):
    """Something the WebArena suite needs is not configured; the message names it."""


@dataclass(frozen=True)
class JudgeConfig:
    """An OpenAI-compatible chat-completions endpoint for fuzzy_match."""

    base_url: str
    """e.g. https://api.openai.com/v1 or a local vLLM server's http://127.0.0.1:8000/v1."""
    model: str
    """Model name sent in each request (WebArena used gpt-4-1106-preview)."""
    api_key_env: str = JUDGE_KEY_ENV
    """Environment variable holding the API key (none needed for servers without auth)."""
    timeout_s: float = 60.0
    """Seconds one judge request may take before the check counts as not evaluated."""

    def api_key(self) -> str | None:
        key = os.environ.get(self.api_key_env)
        if not key and self.api_key_env == JUDGE_KEY_ENV:
            key = os.environ.get("OPENAI_API_KEY")
        return key or None


@dataclass(frozen=True)
class WebArenaConfig:
    """Resolved configuration: site URLs (no trailing slash), task files, accounts, judge."""

    sites: Mapping[str, str] = field(default_factory=dict)
    tasks: str | None = None
    """WebArena's task configs: test.raw.json (one list) or a folder of per-task N.json files."""
    split_file: str | None = None
    """WebArena-Lite's split: {"train": [...], "test": [...]} of WebArena task ids, or Lite's test raw file."""
    cache_dir: str = DEFAULT_CACHE
    accounts: Mapping[str, Mapping[str, str]] = field(default_factory=lambda: dict(ACCOUNTS))
    judge: JudgeConfig | None = None
    source: str = "environment"
    """Where the settings came from, for messages."""

    def url(self, site: str) -> str:
        """The configured URL of `site`; raises WebArenaConfigError naming its variable."""
        if site not in SITES:
            raise WebArenaConfigError(f"unknown WebArena site {site!r}; sites: {', '.join(SITES)}")
        url = self.sites.get(site)
        if not url:
            raise WebArenaConfigError(
                f"the WebArena site {site!r} is not configured: set {ENV_NAMES[site]}=http://HOST:PORT "
                f"or sites.{site} in the config file ({HOW_TO_CONFIGURE})"
            )
        return url

    def missing(self, sites: Any) -> list[str]:
        """Which of `sites` have no URL."""
        return [s for s in sites if not self.sites.get(s)]

    @property
    def cache(self) -> Path:
        return Path(self.cache_dir).expanduser()

    def account(self, site: str) -> dict[str, str]:
        acc = self.accounts.get(site)
        if not acc:
            raise WebArenaConfigError(f"no account for {site!r}: add accounts.{site}.username/password to the config")
        return dict(acc)


def _clean_url(url: Any, where: str) -> str:
    if not isinstance(url, str) or not url.strip():
        raise WebArenaConfigError(f"{where}: expected a URL string, got {url!r}")
    url = url.strip().rstrip("/")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise WebArenaConfigError(f"{where}: {url!r} is not an http(s) URL like http://HOST:PORT")
    return url


def _read_file(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise WebArenaConfigError(f"cannot read WebArena config {path}: {exc.strerror or exc}") from None
    try:
        if path.suffix in (".yaml", ".yml"):
            import yaml

            data = yaml.safe_load(text)
        else:
            data = json.loads(text)
    except Exception as exc:
        raise WebArenaConfigError(f"WebArena config {path} is not valid {path.suffix.lstrip('.').upper() or 'JSON'}: {exc}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise WebArenaConfigError(f"WebArena config {path} must hold a mapping (sites:, tasks:, ...)")
    return data


FILE_KEYS = ("sites", "tasks", "split_file", "cache_dir", "accounts", "judge")


def load_config(
    path: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    tasks: str | Path | None = None,
    split_file: str | Path | None = None,
) -> WebArenaConfig:
    """Read the configuration from a file, the environment and explicit arguments (in that
    order of precedence, lowest first). Raises WebArenaConfigError naming a bad key or value."""
    env = os.environ if env is None else env
    path = path or env.get(CONFIG_ENV) or None
    data: dict[str, Any] = {}
    base = Path.cwd()
    source = "environment"
    if path:
        p = Path(path).expanduser()
        data, base, source = _read_file(p), p.parent, str(p)
        unknown = sorted(set(data) - set(FILE_KEYS))
        if unknown:
            raise WebArenaConfigError(f"{p}: unknown key(s) {', '.join(unknown)}; keys: {', '.join(FILE_KEYS)}")

    def rel(value: Any, where: str) -> str:
        if not isinstance(value, (str, Path)) or not str(value).strip():
            raise WebArenaConfigError(f"{source}: {where} must be a path, got {value!r}")
        p = Path(str(value)).expanduser()
        return str(p if p.is_absolute() else base / p)

    sites: dict[str, str] = {}
    file_sites = data.get("sites") or {}
    if not isinstance(file_sites, dict):
        raise WebArenaConfigError(f"{source}: sites must map site names to URLs, got {file_sites!r}")
    for key, url in file_sites.items():
        site = str(key).lower()
        if site not in SITES:
            raise WebArenaConfigError(f"{source}: unknown site {key!r} in sites; sites: {', '.join(SITES)}")
        sites[site] = _clean_url(url, f"{source}: sites.{key}")
    for site, name in ENV_NAMES.items():
        if env.get(name, "").strip():
            sites[site] = _clean_url(env[name], f"environment variable {name}")

    accounts = {k: dict(v) for k, v in ACCOUNTS.items()}
    for site, acc in (data.get("accounts") or {}).items():
        if not (isinstance(acc, dict) and set(acc) <= {"username", "password"} and all(isinstance(v, str) for v in acc.values())):
            raise WebArenaConfigError(f"{source}: accounts.{site} must be {{username: ..., password: ...}}, got {acc!r}")
        accounts.setdefault(str(site), {}).update(acc)

    judge = _judge(data.get("judge"), env, source)

    tasks_path = str(tasks) if tasks else env.get(TASKS_ENV) or (rel(data["tasks"], "tasks") if data.get("tasks") else None)
    split_path = (str(split_file) if split_file else env.get(SPLIT_ENV)
                  or (rel(data["split_file"], "split_file") if data.get("split_file") else None))
    cache = env.get(CACHE_ENV) or (rel(data["cache_dir"], "cache_dir") if data.get("cache_dir") else DEFAULT_CACHE)
    return WebArenaConfig(sites=sites, tasks=tasks_path, split_file=split_path, cache_dir=cache,
                          accounts=accounts, judge=judge, source=source)


def _judge(section: Any, env: Mapping[str, str], source: str) -> JudgeConfig | None:
    section = dict(section or {})
    unknown = sorted(set(section) - {"base_url", "model", "api_key_env", "timeout_s"})
    if unknown:
        raise WebArenaConfigError(f"{source}: unknown judge key(s) {', '.join(unknown)}; keys: base_url, model, api_key_env, timeout_s")
    if env.get(JUDGE_URL_ENV):
        section["base_url"] = env[JUDGE_URL_ENV]
    if env.get(JUDGE_MODEL_ENV):
        section["model"] = env[JUDGE_MODEL_ENV]
    if not section.get("base_url") and not section.get("model"):
        return None
    for key, var in (("base_url", JUDGE_URL_ENV), ("model", JUDGE_MODEL_ENV)):
        if not section.get(key):
            raise WebArenaConfigError(f"the fuzzy_match judge needs a {key}: set {var} or judge.{key} in the config")
    timeout = section.get("timeout_s", 60.0)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
        raise WebArenaConfigError(f"{source}: judge.timeout_s must be a positive number, got {timeout!r}")
    return JudgeConfig(base_url=_clean_url(section["base_url"], "judge base_url"), model=str(section["model"]),
                       api_key_env=str(section.get("api_key_env") or JUDGE_KEY_ENV), timeout_s=float(timeout))


_active: WebArenaConfig | None = None


def configure(config: WebArenaConfig | None) -> None:
    """Make `config` the one the WebArena suite starts and scores episodes with
    (None: read it again from the environment on next use)."""
    global _active
    _active = config


def active_config() -> WebArenaConfig:
    """The configuration in use: the last one passed to `configure` (loading tasks does
    that), else the one the environment describes."""
    global _active
    if _active is None:
        _active = load_config()
    return _active
