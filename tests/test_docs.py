"""The documentation stays true to the code and self-contained.

Fast checks: plain file reading and `ast`, no browser, no torch.

- Module map: every `.py` file under webr1_kit/, `__init__.py` files included, is named in
  docs/ARCHITECTURE.md as a code span holding its repository path, e.g. `webr1_kit/grpo.py`.
  A package's `__init__.py` counts as named by that exact path or by its folder path with a
  trailing slash (`webr1_kit/sites/`); a bare `webr1_kit/` does not name the top-level
  package, since it prefixes every path. Conversely, every `webr1_kit/....py` path the
  document names must exist, so a removed or renamed module cannot linger in the map.
- Policy protocol: every member the document's protocol table lists exists on `LLMPolicy`.
- No "issue N" references in README.md, BENCHMARKS.md, docs/ or webr1_kit/ (the documents
  and code describe the kit, not its tracker).
- Markdown links in README.md, BENCHMARKS.md and docs/ (every .md under it) stay inside the repository: a
  relative target must resolve to an existing path under the repository root; an absolute
  path (`/...`) or a `file:` URL is refused; http(s) and mailto links are allowed.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "webr1_kit"
ARCHITECTURE = ROOT / "docs" / "ARCHITECTURE.md"


def _code_spans(text: str) -> set[str]:
    """The contents of every inline code span (`...`) of a Markdown text."""
    return {m.group(1).strip() for m in re.finditer(r"`([^`\n]+)`", text)}


def _modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def test_architecture_names_every_module():
    spans = _code_spans(ARCHITECTURE.read_text(encoding="utf-8"))
    missing = []
    for path in _modules():
        rel = path.relative_to(ROOT).as_posix()
        names = {rel}
        if path.name == "__init__.py" and path.parent != PACKAGE:
            names.add(path.parent.relative_to(ROOT).as_posix() + "/")
        if not names & spans:
            missing.append(rel)
    assert not missing, f"docs/ARCHITECTURE.md does not name these modules: {missing}"


def test_architecture_names_only_existing_modules():
    spans = _code_spans(ARCHITECTURE.read_text(encoding="utf-8"))
    named = {s for s in spans if re.fullmatch(r"webr1_kit/[\w/]+\.py", s)}
    stale = sorted(s for s in named if not (ROOT / s).is_file())
    assert not stale, f"docs/ARCHITECTURE.md names modules that do not exist: {stale}"


def _llm_policy_members() -> set[str]:
    """Methods, properties and `self.x` attributes of policy.LLMPolicy, read with ast."""
    tree = ast.parse((PACKAGE / "policy.py").read_text(encoding="utf-8"))
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "LLMPolicy")
    members: set[str] = set()
    for node in ast.walk(cls):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            members.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self" \
                and isinstance(node.ctx, ast.Store):
            members.add(node.attr)
    return members


def test_policy_protocol_table_matches_llm_policy():
    text = ARCHITECTURE.read_text(encoding="utf-8")
    section = text.split("## Policy protocol", 1)[1].split("\n## ", 1)[0]
    listed = set()
    for line in section.splitlines():
        if not line.startswith("| `"):
            continue
        first_cell = line.split("|")[1]
        listed |= {re.match(r"\w+", span).group(0) for span in _code_spans(first_cell)}
    assert {"act", "evaluating", "freeze_reference", "reference", "adapter_off", "save_adapter"} <= listed
    unknown = sorted(listed - _llm_policy_members())
    assert not unknown, f"the policy protocol table lists members LLMPolicy lacks: {unknown}"


# ---------------------------------------------------------------- no tracker references

ISSUE = re.compile(r"issue [0-9]", re.IGNORECASE)


def _scanned_files() -> list[Path]:
    files = [ROOT / "README.md", ROOT / "BENCHMARKS.md"]
    for folder in (ROOT / "docs", PACKAGE):
        files += [p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    return sorted(p for p in files if p.is_file())


def test_no_issue_numbers_in_docs_or_code():
    hits = []
    for path in _scanned_files():
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:  # images and other binary files
            continue
        for lineno, line in enumerate(text.splitlines(), 1):
            if ISSUE.search(line):
                hits.append(f"{path.relative_to(ROOT)}:{lineno}: {line.strip()}")
    assert not hits, "references to issue numbers:\n" + "\n".join(hits)


OUTSIDE = re.compile(r"/work/|\.\./shared/|shared/(?:FACTS|PAPER|STYLE|DESIGN)\.md")


def test_docs_and_code_name_no_file_outside_the_repository():
    """A reader has only the repository: no pointer to the workspace the kit was built in."""
    hits = []
    for path in _scanned_files() + sorted((ROOT / "bench").rglob("*.py")) + sorted((ROOT / "notebooks").glob("*.ipynb")):
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        hits += [f"{path.relative_to(ROOT)}:{n}: {line.strip()}" for n, line in enumerate(text.splitlines(), 1)
                 if OUTSIDE.search(line)]
    assert not hits, "pointers outside the repository:\n" + "\n".join(hits)


# ---------------------------------------------------------------- links stay in the repository


def _without_code(text: str) -> str:
    """`text` with fenced code blocks blanked and inline code spans masked, line numbers kept:
    code is not a link, even where it looks like one (`a[0](b)`)."""
    out, fence = [], None
    for line in text.split("\n"):
        stripped = line.lstrip()
        if fence is None and (stripped.startswith("```") or stripped.startswith("~~~")):
            fence = stripped[:3]
            out.append("")
        elif fence is not None:
            if stripped.startswith(fence):
                fence = None
            out.append("")
        else:
            out.append(line)
    return re.sub(r"`[^`]*`", lambda m: re.sub(r"[^\n]", "x", m.group(0)), "\n".join(out))


LINK_PATTERNS = (
    re.compile(r"\]\(\s*<([^>]*)>"),                      # [text](<target>)
    re.compile(r"\]\(\s*([^<)\s][^)\s]*)"),               # [text](target "title"), ![alt](target)
    re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?([^\s>]+)", re.M),  # [ref]: target
    re.compile(r"<([a-zA-Z][\w+.-]*:[^>\s]*)>"),          # <scheme:...> autolinks
    re.compile(r"""(?:href|src)\s*=\s*["']([^"']+)["']"""),  # HTML links and images
)


def _links(path: Path) -> list[tuple[int, str]]:
    text = _without_code(path.read_text(encoding="utf-8"))
    found = set()
    for pattern in LINK_PATTERNS:
        for m in pattern.finditer(text):
            found.add((text.count("\n", 0, m.start(1)) + 1, m.group(1)))
    return sorted(found)


def _link_problem(source: Path, target: str) -> str | None:
    """Why `target`, linked from `source`, points outside the repository (None if it does not)."""
    parts = urlsplit(target)
    if parts.scheme:
        return None if parts.scheme.lower() in ("http", "https", "mailto") else f"{parts.scheme}: link"
    if not parts.path:  # "#section": a place in the same file
        return None
    if parts.path.startswith("/"):
        return "absolute path"
    resolved = (source.parent / unquote(parts.path)).resolve()
    if not resolved.is_relative_to(ROOT):
        return "resolves outside the repository"
    if not resolved.exists():
        return "no such file in the repository"
    return None


def _markdown_files() -> list[Path]:
    return [ROOT / "README.md", ROOT / "BENCHMARKS.md", *sorted((ROOT / "docs").rglob("*.md"))]


def test_markdown_links_stay_inside_the_repository():
    problems = []
    for path in _markdown_files():
        for lineno, target in _links(path):
            why = _link_problem(path, target)
            if why:
                problems.append(f"{path.relative_to(ROOT)}:{lineno}: {target} ({why})")
    assert not problems, "links that leave the repository:\n" + "\n".join(problems)


@pytest.mark.parametrize("target, bad", [
    ("../webr1_kit/grpo.py", False),
    ("#policy-protocol", False),
    ("https://example.org/page", False),
    ("/etc/passwd", True),
    ("../../outside.md", True),
    ("file:///tmp/x", True),
    ("../webr1_kit/no_such_module.py", True),
])
def test_link_rule(target, bad):
    assert (_link_problem(ARCHITECTURE, target) is not None) is bad


def test_links_are_found_across_lines_and_outside_code():
    sample = ROOT / "docs" / "ARCHITECTURE.md"
    text = "See [the\nloop](../webr1_kit/grpo.py), `a[0](b)`, and\n```\n[x](/abs)\n```\n[r]: /ref\n"
    masked = _without_code(text)
    found = {m.group(1) for p in LINK_PATTERNS for m in p.finditer(masked)}
    assert found == {"../webr1_kit/grpo.py", "/ref"}
    assert _link_problem(sample, "/ref") == "absolute path"


def test_readme_layout_names_every_module():
    """The README's layout is a file tree with a line for every module of the package."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    tree = text[text.index("## Layout"):].split("```")[1]
    names = {m.group(1) for m in re.finditer(r"^\s+(\w+\.py|\w+/)\s", tree, re.M)}
    modules = {p.name for p in PACKAGE.glob("*.py")} | {p.name + "/" for p in PACKAGE.iterdir()
                                                       if (p / "__init__.py").is_file()}
    assert modules <= names, f"README.md's layout lacks: {sorted(modules - names)}"
