"""Task templates on the code-hosting site (__GITLAB__, after WebArena's GitLab).

Every task starts on the dashboard. Experts find a project through the header's
project search, then move with the project's tabs (Issues, Merge requests, Members,
Milestones), as a person would. Content tasks are scored on a page that shows the
changed state (an issue's state badge, a members table row, a listing of issues or
milestones), never on state the seed data already has.
"""

from __future__ import annotations

import html
import json
import random
import re
from typing import Any, Callable
from urllib.parse import parse_qs, urlsplit

from ...actions import Action
from ...observation import Observation
from ..arena import Instance, Template, World, answer_eval, page_eval, url_eval
from ._expert import answer, click, click_or_scroll, find, say, scroll_down, search, select, type_text

ME = 1  # the seed's signed-in user, byteblaze
REPORTER, MAINTAINER = 20, 40
START = "__GITLAB__/"

# ---------------------------------------------------------------- reading the page


def flat(obs: Observation) -> str:
    """The observation's text with element texts inlined and tags dropped, one line."""
    text = re.sub(r'<[^>]*?data-text="([^"]*)"[^>]*>', r" \1 ", obs.content)
    text = re.sub(r"<[^>]+>", " ", text)
    return html.unescape(" ".join(text.split()))


def where(obs: Observation) -> tuple[str, dict[str, str]]:
    """The URL's path and its query parameters (first value of each)."""
    parts = urlsplit(obs.url)
    return parts.path.rstrip("/") or "/", {k: v[0] for k, v in parse_qs(parts.query).items()}


def project_path(p: dict[str, Any]) -> str:
    return f"/{p['ns']}/{p['proj']}"


def project_name(p: dict[str, Any]) -> str:
    return f"{p['ns']}/{p['proj']}"


# ---------------------------------------------------------------- getting there


def to_project(p: dict[str, Any], obs: Observation, history: list, then: Callable[[Observation], str]) -> str:
    """Reach any page of project p (search it from the header), then call `then(obs)`."""
    here, query = where(obs)
    target = project_path(p)
    if here == target or here.startswith(target + "/-/"):
        return then(obs)
    link = find(obs, name=f"{p['ns']} / {p['proj']}", role="link")
    if link is not None:
        return click(f"The list shows {project_name(p)}; open it.", link)
    if here == "/explore" and query.get("q") == p["proj"]:
        if "more of the page is below" in obs.content:
            return scroll_down("The project is not in view yet; scroll the results.")
        nxt = find(obs, name="Next", role="link")
        if nxt is not None:
            return click("The project is not on this page of results; go to the next page.", nxt)
    box = find(obs, name="Search projects")
    if box is not None:
        return search(f"Search for the project {project_name(p)}.", box, p["proj"])
    return click_or_scroll(obs, history, "the project search", name="Search projects")


def to_tab(p: dict[str, Any], obs: Observation, history: list, tab: str, suffix: str,
           then: Callable[[Observation], str], subpages: bool = False) -> str:
    """Reach the project's page /-/<suffix> (or, with `subpages`, any page under it) through
    the project tab named `tab`, then call `then(obs)`."""
    here, _ = where(obs)
    base = project_path(p) + "/-/" + suffix
    if here == base or (subpages and here.startswith(base + "/")):
        return then(obs)

    def on_project(obs: Observation) -> str:
        if find(obs, name=tab, role="link") is None and "more of the page is above" in obs.content:
            return say("The project tabs are at the top of the page; scroll up.", Action("Scroll Up"))
        return click_or_scroll(obs, history, f"the project's {tab} tab", name=tab, role="link")

    return to_project(p, obs, history, on_project)


def to_issue(p: dict[str, Any], obs: Observation, history: list, then: Callable[[Observation], str]) -> str:
    """Reach issue p["iid"] of project p: search its title in the issue list and open it."""
    here, _ = where(obs)
    issue = f"{project_path(p)}/-/issues/{p['iid']}"
    if here == issue:
        return then(obs)

    def on_issues(obs: Observation) -> str:
        here, query = where(obs)
        link = find(obs, name=p["title"], role="link")
        if link is not None:
            return click(f"The issue '{p['title']}' is listed; open it.", link)
        box = find(obs, name="Search issues")
        if query.get("search") != p["title"] and box is not None:
            return search(f"Search the issues for '{p['title']}'.", box, p["title"])
        if query.get("state") != "all":
            return click_or_scroll(obs, history, "the All tab (the issue is not open)", contains="All ", role="link")
        return click_or_scroll(obs, history, f"the issue '{p['title']}'", name=p["title"], role="link")

    return to_tab(p, obs, history, "Issues", "issues", on_issues)


def to_mr(p: dict[str, Any], obs: Observation, history: list, then: Callable[[Observation], str]) -> str:
    """Reach merge request p["iid"]: all states, search its title, open it."""
    here, _ = where(obs)
    if here == f"{project_path(p)}/-/merge_requests/{p['iid']}":
        return then(obs)

    def on_list(obs: Observation) -> str:
        here, query = where(obs)
        link = find(obs, name=p["title"], role="link")
        if link is not None:
            return click(f"The merge request '{p['title']}' is listed; open it.", link)
        if query.get("state") != "all":
            return click_or_scroll(obs, history, "the All tab (merge requests may be merged or closed)",
                                   contains="All ", role="link")
        box = find(obs, name="Search merge requests")
        if query.get("search") != p["title"] and box is not None:
            return search(f"Search for '{p['title']}'.", box, p["title"])
        return click_or_scroll(obs, history, f"the merge request '{p['title']}'", name=p["title"], role="link")

    return to_tab(p, obs, history, "Merge requests", "merge_requests", on_list)


def fill_form(obs: Observation, fields: list[tuple[str, str, str]], submit: str) -> str:
    """Fill a form top to bottom: each field is (kind, element name, value) with kind
    "text", "select" or "check"; visible fields that are wrong get fixed first, then the
    submit button is clicked (scrolling down to reach fields or the button)."""
    for kind, name, value in fields:
        el = find(obs, name=name, role={"text": "textbox", "select": "combobox", "check": "checkbox"}[kind])
        if el is None:
            continue
        if kind == "text" and (el.value or "") != value:
            return type_text(f"Fill in {name}: {value}.", el, value)
        if kind == "select" and (el.value or "") != value:
            return select(f"Choose {value} as {name}.", el, value)
        if kind == "check" and not el.checked:
            return click(f"Tick {name}.", el)
    button = find(obs, name=submit, role="button")
    if button is not None:
        return click(f"Everything is filled in; press {submit}.", button)
    return scroll_down(f"Scroll down to the rest of the form and the {submit} button.")


def _flash(obs: Observation, pattern: str) -> bool:
    return re.search(pattern, flat(obs)) is not None


# Every task query starts from a project: its id, namespace path (ns) and path (proj).
PROJECT_COLS = "p.id, p.path AS proj, n.path AS ns"
PROJECT_FROM = "FROM projects p JOIN namespaces n ON n.id = p.namespace_id"
PROJECTS_SQL = f"SELECT {PROJECT_COLS} {PROJECT_FROM}"


def _projects(world: World, min_role: int = 0) -> list[Any]:
    """Projects (id, ns, proj); with min_role, only those where the signed-in user has that role."""
    if not min_role:
        return world.query("code", PROJECTS_SQL + " ORDER BY p.id")
    return world.query("code", PROJECTS_SQL + " JOIN members m ON m.project_id = p.id AND m.user_id = ?"
                       " WHERE m.role >= ? ORDER BY p.id", (ME, min_role))


def _base(p: Any) -> dict[str, Any]:
    return {"ns": p["ns"], "proj": p["proj"], "project": f"{p['ns']}/{p['proj']}"}


# ---------------------------------------------------------------- info: open issues with a label


def _label_count_instances(world: World):
    for p in _projects(world):
        for r in world.query("code", "SELECT l.name, COUNT(i.id) AS n FROM labels l"
                             " JOIN issue_labels il ON il.label_id = l.id"
                             " JOIN issues i ON i.id = il.issue_id AND i.state = 'opened' WHERE l.project_id = ?"
                             " GROUP BY l.id HAVING n >= 1 ORDER BY l.name", (p["id"],)):
            yield Instance({**_base(p), "label": r["name"]}, answer_eval(must_include=[str(r["n"])]))


def _label_count_expert(p, obs, history):
    def on_issues(obs):
        here, query = where(obs)
        if here == f"{project_path(p)}/-/issues" and query.get("label_name") == p["label"] \
                and query.get("state", "opened") == "opened":
            n = re.search(r"\bOpen (\d+)\b", flat(obs))
            return answer(f"Filtered by '{p['label']}', the Open tab counts {n.group(1) if n else '?'} issues.",
                          n.group(1) if n else "unknown")
        dropdown = find(obs, name="Label", role="combobox")
        if dropdown is not None and dropdown.value != p["label"]:
            return select(f"Filter the issues by the label '{p['label']}'.", dropdown, p["label"])
        return click_or_scroll(obs, history, "the Filter button", name="Filter", role="button")

    return to_tab(p, obs, history, "Issues", "issues", on_issues)


LABEL_COUNT = Template(
    id="code.open_issues_with_label", sites=("code",), kind="info",
    intent="How many open issues are labelled '{label}' in the {project} project?", start=START, min_steps=6,
    instances=_label_count_instances, expert=_label_count_expert,
)


# ---------------------------------------------------------------- info: who is assigned to an issue


def _assignee_instances(world: World):
    for r in world.query("code", f"SELECT {PROJECT_COLS}, i.iid, i.title, u.name, u.username {PROJECT_FROM}"
                         " JOIN issues i ON i.project_id = p.id JOIN users u ON u.id = i.assignee_id"
                         " WHERE i.state = 'opened' ORDER BY i.id"):
        yield Instance({**_base(r), "iid": r["iid"], "title": r["title"]},
                       answer_eval(must_include=[f"{r['name']} |OR| {r['username']}"]))


def _assignee_expert(p, obs, history):
    def on_issue(obs):
        m = re.search(r"Assignee (.+?) @(\S+)", flat(obs))
        if m is None:
            return answer("The sidebar shows no assignee.", "Nobody is assigned")
        return answer(f"The sidebar names the assignee: {m.group(1)} (@{m.group(2)}).", m.group(1))

    return to_issue(p, obs, history, on_issue)


ISSUE_ASSIGNEE = Template(
    id="code.issue_assignee", sites=("code",), kind="info",
    intent="Who is assigned to the issue '{title}' in the {project} project?", start=START, min_steps=5,
    instances=_assignee_instances, expert=_assignee_expert,
)


# ---------------------------------------------------------------- info: target branch of a merge request


def _target_instances(world: World):
    for r in world.query("code", f"SELECT {PROJECT_COLS}, r.iid, r.title, r.target_branch {PROJECT_FROM}"
                         " JOIN merge_requests r ON r.project_id = p.id ORDER BY r.id"):
        yield Instance({**_base(r), "iid": r["iid"], "title": r["title"]},
                       answer_eval(must_include=[r["target_branch"]]))


def _target_expert(p, obs, history):
    def on_mr(obs):
        m = re.search(r"requested to merge (\S+) into (\S+)", flat(obs))
        return answer(f"It merges {m.group(1)} into {m.group(2)}." if m else "No branches shown.",
                      m.group(2) if m else "unknown")

    return to_mr(p, obs, history, on_mr)


MR_TARGET = Template(
    id="code.mr_target_branch", sites=("code",), kind="info",
    intent="What is the target branch of the merge request '{title}' in the {project} project?", start=START,
    min_steps=7, instances=_target_instances, expert=_target_expert, held_out=True,
)


# ---------------------------------------------------------------- info: stars of a project


def _stars_instances(world: World):
    for r in world.query("code", f"SELECT {PROJECT_COLS}, (SELECT COUNT(*) FROM stars s WHERE s.project_id = p.id) AS n"
                         f" {PROJECT_FROM} ORDER BY p.id"):
        if r["n"] > 0:  # "0" would be a guessable answer
            yield Instance(_base(r), answer_eval(must_include=[str(r["n"])]))


def _stars_expert(p, obs, history):
    def on_project(obs):
        m = re.search(r"\b(\d+) stars?\b", flat(obs))
        return answer(f"The project page shows {m.group(0) if m else 'no star count'}.", m.group(1) if m else "unknown")

    return to_project(p, obs, history, on_project)


PROJECT_STARS = Template(
    id="code.project_stars", sites=("code",), kind="info",
    intent="How many stars does the {project} project have?", start=START, min_steps=3,
    instances=_stars_instances, expert=_stars_expert,
)


# ---------------------------------------------------------------- nav: closed issues of a project


def _closed_instances(world: World):
    for p in _projects(world):
        yield Instance(_base(p), url_eval(f"__GITLAB__/{p['ns']}/{p['proj']}/-/issues?state=closed"))


def _closed_expert(p, obs, history):
    def on_issues(obs):
        here, query = where(obs)
        if here == f"{project_path(p)}/-/issues" and query.get("state") == "closed":
            return answer("This is the list of the project's closed issues.", "done")
        return click_or_scroll(obs, history, "the Closed tab", contains="Closed ", role="link")

    return to_tab(p, obs, history, "Issues", "issues", on_issues)


CLOSED_ISSUES = Template(
    id="code.closed_issues", sites=("code",), kind="nav",
    intent="Show me the closed issues of the {project} project.", start=START, min_steps=5,
    instances=_closed_instances, expert=_closed_expert,
)


# ---------------------------------------------------------------- nav: a milestone's page


def _milestone_instances(world: World):
    for r in world.query("code", f"SELECT {PROJECT_COLS}, m.iid, m.title {PROJECT_FROM}"
                         " JOIN milestones m ON m.project_id = p.id ORDER BY m.id"):
        yield Instance({**_base(r), "iid": r["iid"], "milestone": r["title"]},
                       url_eval(f"__GITLAB__/{r['ns']}/{r['proj']}/-/milestones/{r['iid']}"))


def _milestone_expert(p, obs, history):
    here, _ = where(obs)
    if here == f"{project_path(p)}/-/milestones/{p['iid']}":
        return answer(f"This is the page of the milestone {p['milestone']}.", "done")

    def on_milestones(obs):
        _, query = where(obs)
        link = find(obs, name=p["milestone"], role="link")
        if link is not None:
            return click(f"Open the milestone {p['milestone']}.", link)
        if query.get("state") != "all":
            return click_or_scroll(obs, history, "the All tab (the milestone may be closed)",
                                   contains="All ", role="link")
        return click_or_scroll(obs, history, f"the milestone {p['milestone']}", name=p["milestone"], role="link")

    return to_tab(p, obs, history, "Milestones", "milestones", on_milestones)


MILESTONE_PAGE = Template(
    id="code.milestone_page", sites=("code",), kind="nav",
    intent="Go to the milestone '{milestone}' of the {project} project.", start=START, min_steps=5,
    instances=_milestone_instances, expert=_milestone_expert,
)


# ---------------------------------------------------------------- content: create an issue with a label

NEW_ISSUE_TITLES = ["Investigate slow {comp} on {platform}", "Audit the {comp} for {assistive} users",
                    "Write a migration guide for the {comp}", "Add a smoke test for the {comp}",
                    "Clean up the {comp} settings", "Track {platform} support for the {comp}"]
NEW_ISSUE_WORDS = {
    "comp": ["search bar", "settings page", "navigation menu", "config parser", "date picker", "build script",
             "RSS feed", "sitemap", "file upload", "webhook handler"],
    "platform": ["Firefox 125", "Safari 17", "Windows 10", "Android 14", "Python 3.13"],
    "assistive": ["screen reader", "keyboard", "low vision"],
}


def _issue_list_labels(title: str) -> str:
    """Locator: the labels (", "-joined) of the first listed issue titled `title`."""
    return ("(() => { const row = [...document.querySelectorAll('li.issue')].find("
            f"e => e.querySelector('.issue-title').innerText.trim() === {json.dumps(title)}); "
            "return row ? [...row.querySelectorAll('.issue-labels .label')]"
            ".map(e => e.innerText.trim()).join(', ') : ''; })()")


def _create_issue_instances(world: World):
    for p in _projects(world):
        titles = {r["title"] for r in world.query("code", "SELECT title FROM issues WHERE project_id = ?", (p["id"],))}
        rng = random.Random(f"code.create_issue/{world.seed}/{p['id']}")
        for label in world.query("code", "SELECT name FROM labels WHERE project_id = ? ORDER BY name", (p["id"],)):
            title = titles_pick(rng, titles)
            titles.add(title)
            yield Instance(
                {**_base(p), "title": title, "label": label["name"]},
                page_eval((f"__GITLAB__/{p['ns']}/{p['proj']}/-/issues?state=all&sort=created_desc",
                           _issue_list_labels(title), label["name"])),
            )


def titles_pick(rng: random.Random, taken: set[str]) -> str:
    """A new issue title (not among `taken`) from the word lists."""
    while True:
        words = {k: rng.choice(v) for k, v in NEW_ISSUE_WORDS.items()}
        title = rng.choice(NEW_ISSUE_TITLES).format(**words)
        title = title[0].upper() + title[1:]
        if title not in taken:
            return title


def _create_issue_expert(p, obs, history):
    here, _ = where(obs)
    if re.fullmatch(re.escape(project_path(p)) + r"/-/issues/\d+", here) and _flash(obs, r"Issue #\d+ was created"):
        return answer("The issue was created with the label.", "done")

    def on_issues(obs):
        here, _ = where(obs)
        if here.endswith("/-/issues/new"):
            return fill_form(obs, [("text", "Title", p["title"]), ("check", p["label"], "")], "Create issue")
        if here.endswith("/-/issues"):
            return click_or_scroll(obs, history, "the New issue button", name="New issue", role="link")
        return click_or_scroll(obs, history, "the Issues tab", name="Issues", role="link")

    return to_tab(p, obs, history, "Issues", "issues", on_issues, subpages=True)


CREATE_ISSUE = Template(
    id="code.create_issue", sites=("code",), kind="content",
    intent="Create an issue in the {project} project titled '{title}' with the label '{label}'.", start=START,
    min_steps=8, instances=_create_issue_instances, expert=_create_issue_expert,
)


# ---------------------------------------------------------------- content: close an issue


def _close_instances(world: World):
    for p in _projects(world, REPORTER):
        for r in world.query("code", "SELECT iid, title FROM issues WHERE project_id = ? AND state = 'opened'"
                             " ORDER BY iid", (p["id"],)):
            yield Instance({**_base(p), "iid": r["iid"], "title": r["title"]},
                           page_eval((f"__GITLAB__/{p['ns']}/{p['proj']}/-/issues/{r['iid']}",
                                      "document.querySelector('#issue-state').innerText", "Closed")))


def _close_expert(p, obs, history):
    def on_issue(obs):
        if find(obs, name="Reopen issue", role="button") is not None:
            return answer("The issue is closed now.", "done")
        return click_or_scroll(obs, history, "the Close issue button", name="Close issue", role="button")

    return to_issue(p, obs, history, on_issue)


CLOSE_ISSUE = Template(
    id="code.close_issue", sites=("code",), kind="content",
    intent="Close the issue '{title}' in the {project} project.", start=START, min_steps=6,
    instances=_close_instances, expert=_close_expert,
)


# ---------------------------------------------------------------- content: star a project


def _star_instances(world: World):
    for p in world.query("code", PROJECTS_SQL + " WHERE p.id NOT IN (SELECT project_id FROM stars WHERE user_id = ?)"
                         " ORDER BY p.id", (ME,)):
        yield Instance(_base(p), page_eval((f"__GITLAB__/{p['ns']}/{p['proj']}",
                                            "document.querySelector('#star-toggle').innerText", "Unstar")))


def _star_expert(p, obs, history):
    def on_project(obs):
        if find(obs, name="Unstar", role="button") is not None:
            return answer("The project is starred now.", "done")
        return click_or_scroll(obs, history, "the Star button", name="Star", role="button")

    return to_project(p, obs, history, on_project)


STAR_PROJECT = Template(
    id="code.star_project", sites=("code",), kind="content",
    intent="Star the {project} project.", start=START, min_steps=4,
    instances=_star_instances, expert=_star_expert,
)


# ---------------------------------------------------------------- content: add a member with a role

ADD_ROLES = ["Guest", "Reporter", "Developer", "Maintainer"]


def _member_instances(world: World):
    for p in _projects(world, MAINTAINER):
        outsiders = world.query("code", "SELECT username FROM users WHERE id NOT IN"
                                " (SELECT user_id FROM members WHERE project_id = ?) ORDER BY id", (p["id"],))
        for k, u in enumerate(outsiders):
            role = ADD_ROLES[(k + p["id"]) % len(ADD_ROLES)]
            locator = f"document.querySelector('tr[data-username=\"{u['username']}\"] .member-role').innerText"
            yield Instance({**_base(p), "username": u["username"], "role": role},
                           page_eval((f"__GITLAB__/{p['ns']}/{p['proj']}/-/project_members", locator, role)))


def _member_expert(p, obs, history):
    def on_members(obs):
        if _flash(obs, rf"Added .+ to {re.escape(project_name(p))} as {p['role']}\."):
            return answer(f"{p['username']} is now a {p['role']} of the project.", "done")
        return fill_form(obs, [("text", "Username", p["username"]), ("select", "Role", p["role"])],
                         "Add to project")

    return to_tab(p, obs, history, "Members", "project_members", on_members)


ADD_MEMBER = Template(
    id="code.add_member", sites=("code",), kind="content",
    intent="Add the user {username} to the {project} project as a {role}.", start=START, min_steps=7,
    instances=_member_instances, expert=_member_expert,
)


# ---------------------------------------------------------------- content: comment on an issue

COMMENTS = ["I can take this one next sprint.", "Reproduced on the latest main branch.",
            "Could you attach a screenshot of the problem?", "Moving this to the backlog for now.",
            "Please add the steps to reproduce.", "This needs a regression test before we close it.",
            "Let's discuss this at the next triage meeting."]


def _comment_instances(world: World):
    rows = world.query("code", f"SELECT {PROJECT_COLS}, i.iid, i.title {PROJECT_FROM}"
                       " JOIN issues i ON i.project_id = p.id ORDER BY i.id")
    for k, r in enumerate(rows):
        text = COMMENTS[k % len(COMMENTS)]
        yield Instance({**_base(r), "iid": r["iid"], "title": r["title"], "comment": text},
                       page_eval((f"__GITLAB__/{r['ns']}/{r['proj']}/-/issues/{r['iid']}",
                                  "[...document.querySelectorAll('.note-body')].map(e => e.innerText).join('\\n')",
                                  [text])))


def _comment_expert(p, obs, history):
    def on_issue(obs):
        if _flash(obs, r"Your comment was added\."):
            return answer("The comment is posted.", "done")
        return fill_form(obs, [("text", "Comment", p["comment"])], "Comment")

    return to_issue(p, obs, history, on_issue)


COMMENT_ISSUE = Template(
    id="code.comment_issue", sites=("code",), kind="content",
    intent="Post the comment '{comment}' on the issue '{title}' in the {project} project.", start=START, min_steps=8,
    instances=_comment_instances, expert=_comment_expert,
)


# ---------------------------------------------------------------- content: create a milestone with a due date

NEW_MILESTONES = ["v4.0", "v2.5", "Sprint 21", "Sprint 22", "Q3 2024", "2024.09 release", "Design refresh",
                  "Onboarding revamp", "Dependency cleanup", "Mobile polish"]
DUE_DATES = ["2024-07-31", "2024-08-15", "2024-09-30", "2024-10-01", "2024-11-20", "2024-12-31"]


def _milestone_row(title: str) -> str:
    """Locator: the due date shown for the listed milestone titled `title`."""
    return ("(() => { const row = [...document.querySelectorAll('.milestone-row')].find("
            f"e => e.querySelector('.milestone-title').innerText.trim() === {json.dumps(title)}); "
            "return row ? row.querySelector('.milestone-due').innerText : ''; })()")


def _create_milestone_instances(world: World):
    for p in _projects(world, MAINTAINER):
        taken = {r["title"] for r in world.query("code", "SELECT title FROM milestones WHERE project_id = ?",
                                                 (p["id"],))}
        for k, title in enumerate(t for t in NEW_MILESTONES if t not in taken):
            due = DUE_DATES[(k + p["id"]) % len(DUE_DATES)]
            yield Instance({**_base(p), "milestone": title, "due": due},
                           page_eval((f"__GITLAB__/{p['ns']}/{p['proj']}/-/milestones?state=all",
                                      _milestone_row(title), due)))


def _create_milestone_expert(p, obs, history):
    def on_milestones(obs):
        here, _ = where(obs)
        if _flash(obs, rf"Milestone {re.escape(p['milestone'])} was created\."):
            return answer("The milestone exists now.", "done")
        if here.endswith("/-/milestones/new"):
            return fill_form(obs, [("text", "Title", p["milestone"]), ("text", "Due date", p["due"])],
                             "Create milestone")
        if here.endswith("/-/milestones"):
            return click_or_scroll(obs, history, "the New milestone button", name="New milestone", role="link")
        return click_or_scroll(obs, history, "the Milestones tab", name="Milestones", role="link")

    return to_tab(p, obs, history, "Milestones", "milestones", on_milestones, subpages=True)


CREATE_MILESTONE = Template(
    id="code.create_milestone", sites=("code",), kind="content",
    intent="Create a milestone named '{milestone}' with the due date {due} in the {project} project.", start=START,
    min_steps=8, instances=_create_milestone_instances, expert=_create_milestone_expert, held_out=True,
)

TEMPLATES = [LABEL_COUNT, ISSUE_ASSIGNEE, MR_TARGET, PROJECT_STARS, CLOSED_ISSUES, MILESTONE_PAGE,
             CREATE_ISSUE, CLOSE_ISSUE, STAR_PROJECT, ADD_MEMBER, COMMENT_ISSUE, CREATE_MILESTONE]
