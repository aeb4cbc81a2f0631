"""The "code" database of the code-hosting site (after WebArena's GitLab): users, groups
and user namespaces, projects, memberships with roles, stars, labels, milestones,
issues with comments, and merge requests with approvals.

The project list is fixed (so task intents can name well-known repositories); who is
a member, every issue, merge request, comment and star is drawn from
`random.Random(f"code-{seed}")`, so the same seed always gives identical data.
Titles are unique within a project, so a task can name an issue or a merge request
by its title.
"""

from __future__ import annotations

import random
import sqlite3
from datetime import date, timedelta

SCHEMA = """
CREATE TABLE users (id INTEGER PRIMARY KEY, username TEXT NOT NULL UNIQUE, name TEXT NOT NULL UNIQUE,
                    email TEXT NOT NULL, bio TEXT NOT NULL, location TEXT NOT NULL, created TEXT NOT NULL);
-- A namespace is a user's personal one or a group; projects live under one.
CREATE TABLE namespaces (id INTEGER PRIMARY KEY, path TEXT NOT NULL UNIQUE, name TEXT NOT NULL,
                         kind TEXT NOT NULL CHECK (kind IN ('user', 'group')), user_id INTEGER REFERENCES users(id),
                         description TEXT NOT NULL DEFAULT '');
CREATE TABLE projects (id INTEGER PRIMARY KEY, namespace_id INTEGER NOT NULL REFERENCES namespaces(id),
                       path TEXT NOT NULL, description TEXT NOT NULL, readme TEXT NOT NULL, language TEXT NOT NULL,
                       default_branch TEXT NOT NULL, created TEXT NOT NULL, last_activity TEXT NOT NULL,
                       UNIQUE (namespace_id, path));
-- Roles as GitLab numbers them: 10 Guest, 20 Reporter, 30 Developer, 40 Maintainer, 50 Owner.
CREATE TABLE members (project_id INTEGER NOT NULL REFERENCES projects(id), user_id INTEGER NOT NULL REFERENCES users(id),
                      role INTEGER NOT NULL, since TEXT NOT NULL, PRIMARY KEY (project_id, user_id));
CREATE TABLE stars (project_id INTEGER NOT NULL REFERENCES projects(id), user_id INTEGER NOT NULL REFERENCES users(id),
                    created TEXT NOT NULL, PRIMARY KEY (project_id, user_id));
CREATE TABLE labels (id INTEGER PRIMARY KEY, project_id INTEGER NOT NULL REFERENCES projects(id), name TEXT NOT NULL,
                     color TEXT NOT NULL, description TEXT NOT NULL, UNIQUE (project_id, name));
CREATE TABLE milestones (id INTEGER PRIMARY KEY, project_id INTEGER NOT NULL REFERENCES projects(id), iid INTEGER NOT NULL,
                         title TEXT NOT NULL, description TEXT NOT NULL, start_date TEXT, due_date TEXT,
                         state TEXT NOT NULL CHECK (state IN ('active', 'closed')),
                         UNIQUE (project_id, iid), UNIQUE (project_id, title));
CREATE TABLE issues (id INTEGER PRIMARY KEY, project_id INTEGER NOT NULL REFERENCES projects(id), iid INTEGER NOT NULL,
                     title TEXT NOT NULL, description TEXT NOT NULL,
                     state TEXT NOT NULL CHECK (state IN ('opened', 'closed')),
                     author_id INTEGER NOT NULL REFERENCES users(id), assignee_id INTEGER REFERENCES users(id),
                     milestone_id INTEGER REFERENCES milestones(id), created TEXT NOT NULL, updated TEXT NOT NULL,
                     closed_at TEXT, UNIQUE (project_id, iid));
CREATE TABLE issue_labels (issue_id INTEGER NOT NULL REFERENCES issues(id), label_id INTEGER NOT NULL REFERENCES labels(id),
                           PRIMARY KEY (issue_id, label_id));
CREATE TABLE merge_requests (id INTEGER PRIMARY KEY, project_id INTEGER NOT NULL REFERENCES projects(id),
                             iid INTEGER NOT NULL, title TEXT NOT NULL, description TEXT NOT NULL,
                             state TEXT NOT NULL CHECK (state IN ('opened', 'merged', 'closed')),
                             author_id INTEGER NOT NULL REFERENCES users(id), assignee_id INTEGER REFERENCES users(id),
                             source_branch TEXT NOT NULL, target_branch TEXT NOT NULL, created TEXT NOT NULL,
                             updated TEXT NOT NULL, UNIQUE (project_id, iid));
CREATE TABLE approvals (mr_id INTEGER NOT NULL REFERENCES merge_requests(id), user_id INTEGER NOT NULL REFERENCES users(id),
                        PRIMARY KEY (mr_id, user_id));
-- Comments on an issue or a merge request; system notes record events ("closed").
CREATE TABLE notes (id INTEGER PRIMARY KEY, issue_id INTEGER REFERENCES issues(id), mr_id INTEGER REFERENCES merge_requests(id),
                    author_id INTEGER NOT NULL REFERENCES users(id), body TEXT NOT NULL, system INTEGER NOT NULL DEFAULT 0,
                    created TEXT NOT NULL);
-- Who is logged in on each site of this episode (site -> user id); a missing row means logged out.
CREATE TABLE sessions (site TEXT PRIMARY KEY, user_id INTEGER NOT NULL);
CREATE INDEX issues_project ON issues(project_id, state);
CREATE INDEX mrs_project ON merge_requests(project_id, state);
CREATE INDEX notes_issue ON notes(issue_id);
CREATE INDEX notes_mr ON notes(mr_id);
CREATE INDEX members_user ON members(user_id);
"""

ROLES = {10: "Guest", 20: "Reporter", 30: "Developer", 40: "Maintainer", 50: "Owner"}
ROLE_IDS = {name: num for num, name in ROLES.items()}
TODAY = "2024-06-01"
"""The site's fixed "now": new issues, comments and stars are dated today, so episodes are reproducible."""
START = date(2021, 1, 4)

# The logged-in user first, then the owners of personal namespaces.
FIXED_USERS = [
    ("byteblaze", "Byte Blaze", "Pittsburgh, PA", "Accessibility nerd. Dotfiles hoarder. Writes small browser extensions."),
    ("kkroening", "Karl Kroening", "Seattle, WA", "Python and video tooling."),
    ("vinta", "Vinta Chen", "Taipei", "Curating lists of awesome things."),
    ("yjlou", "Yijia Lou", "Shanghai", "Data visualisation."),
    ("abisubramanya27", "Abishek Subramanya", "Chennai", "Student, compilers and calculators."),
    ("koush", "Koushik Dutta", "Seattle, WA", "Android networking."),
]
FIRST = ["Emma", "Liam", "Olivia", "Noah", "Ava", "Ethan", "Sophia", "Mason", "Isabella", "Lucas", "Mia", "Amir",
         "Chloe", "Mateo", "Priya", "Kenji", "Zoë", "Omar", "Grace", "Diego", "Hana", "Felix", "Nora", "Samuel",
         "Leila", "Jonas", "Aisha", "Victor", "Maya", "Hugo", "Roshan", "Ines", "Tomás", "Yuki", "Sven"]
LAST = ["Lopez", "Smith", "Nguyen", "Garcia", "Kim", "Johnson", "Patel", "Brown", "Rossi", "Müller", "Silva",
        "Chen", "Okafor", "Dubois", "Novak", "Tanaka", "Williams", "Haddad", "Jensen", "Costa", "Ivanova", "Byrne"]
LOCATIONS = ["Berlin", "Austin, TX", "Lisbon", "Toronto", "Lagos", "Bangalore", "Tokyo", "São Paulo", "Melbourne",
             "Paris", "Boston, MA", "Nairobi", "Warsaw", "Remote"]
BIOS = ["Frontend developer.", "Backend engineer, mostly Go and Python.", "Open source maintainer.",
        "Designer who codes.", "SRE. Coffee first.", "Technical writer.", "Security researcher.",
        "Mobile developer.", "Student.", "Accessibility specialist.", ""]

GROUPS = [
    ("a11yproject", "The A11Y Project", "A community-driven effort to make digital accessibility easier."),
    ("primer", "Primer", "Design system and component libraries."),
    ("keycloak", "Keycloak", "Open source identity and access management."),
    ("openapitools", "OpenAPI Tools", "Tooling for the OpenAPI specification."),
    ("pallets", "Pallets", "Python web development libraries."),
    ("sveltejs", "Svelte", "Cybernetically enhanced web apps."),
    ("rust-lang", "The Rust Programming Language", "Empowering everyone to build reliable and efficient software."),
    ("thoughtbot", "thoughtbot", "Design and development consultancy."),
    ("umano", "Umano", "Android libraries."),
]
# (namespace, project, language, description). Project paths are unique across namespaces.
PROJECTS = [
    ("byteblaze", "dotfiles", "Shell", "My dotfiles: zsh, tmux, neovim and a few handy scripts."),
    ("byteblaze", "cloud-to-butt", "JavaScript", "Browser extension that replaces 'the cloud' with 'my butt'."),
    ("byteblaze", "accessible-html-content-patterns", "HTML", "The full HTML5 tag set with accessibility notes."),
    ("byteblaze", "a11y-syntax-highlighting", "CSS", "Accessible colour themes for syntax highlighters."),
    ("byteblaze", "timeit", "Python", "Tiny timing helpers for scripts and notebooks."),
    ("byteblaze", "millennials-to-snake-people", "JavaScript", "Chrome extension that replaces 'Millennials' with 'Snake People'."),
    ("byteblaze", "solarized-prism-theme", "CSS", "Solarized themes for the Prism syntax highlighter."),
    ("byteblaze", "gimmiethat.space", "HTML", "A personal landing page generator."),
    ("a11yproject", "a11yproject.com", "Markdown", "The A11Y Project website: resources, checklist and posts."),
    ("a11yproject", "a11y-webring.club", "JavaScript", "A webring for digital accessibility practitioners."),
    ("primer", "design", "MDX", "Primer design guidelines, patterns and foundations."),
    ("primer", "octicons", "JavaScript", "A scalable set of icons handcrafted by GitHub."),
    ("primer", "css", "SCSS", "The CSS implementation of the Primer design system."),
    ("keycloak", "keycloak", "Java", "Open source identity and access management for applications and services."),
    ("keycloak", "keycloak-documentation", "AsciiDoc", "Documentation for Keycloak."),
    ("openapitools", "openapi-generator", "Java", "Generate API clients, server stubs and documentation from OpenAPI specs."),
    ("pallets", "click", "Python", "Python composable command line interface toolkit."),
    ("pallets", "itsdangerous", "Python", "Safely pass trusted data to untrusted environments and back."),
    ("pallets", "markupsafe", "Python", "Safely add untrusted strings to HTML and XML markup."),
    ("sveltejs", "svelte-hackernews", "Svelte", "Hacker News clone built with Svelte."),
    ("sveltejs", "realworld", "Svelte", "SvelteKit implementation of the RealWorld app."),
    ("rust-lang", "rustlings", "Rust", "Small exercises to get you used to reading and writing Rust code."),
    ("thoughtbot", "factory_bot", "Ruby", "A library for setting up Ruby objects as test data."),
    ("thoughtbot", "administrate", "Ruby", "A Rails engine that helps you put together a super-flexible admin dashboard."),
    ("umano", "AndroidSlidingUpPanel", "Java", "Sliding up panel layout for Android."),
    ("kkroening", "ffmpeg-python", "Python", "Python bindings for FFmpeg with complex filtering support."),
    ("vinta", "awesome-python", "Python", "A curated list of awesome Python frameworks, libraries and software."),
    ("yjlou", "2019-nCov", "Jupyter Notebook", "Visualisations of the 2019 novel coronavirus outbreak data."),
    ("abisubramanya27", "pyqt-calculator", "Python", "A scientific calculator written with PyQt5."),
    ("koush", "ion", "Java", "Android asynchronous networking and image loading."),
]
BIG_PROJECTS = {"a11yproject.com", "keycloak", "openapi-generator", "design", "dotfiles"}

LABELS = {
    "bug": ("#d9534f", "Something is not working"),
    "enhancement": ("#5cb85c", "New feature or request"),
    "documentation": ("#428bca", "Improvements or additions to documentation"),
    "good first issue": ("#7057ff", "Good for newcomers"),
    "help wanted": ("#008672", "Extra attention is needed"),
    "question": ("#d876e3", "Further information is requested"),
    "accessibility": ("#1d76db", "Accessibility problems and improvements"),
    "performance": ("#fbca04", "Speed and resource usage"),
    "security": ("#b60205", "Security issues"),
    "dependencies": ("#0366d6", "Updates a dependency"),
    "needs triage": ("#ededed", "Not yet looked at by a maintainer"),
    "regression": ("#e11d21", "Used to work"),
    "UI/UX": ("#c5def5", "Look and feel"),
    "wontfix": ("#ffffff", "This will not be worked on"),
    "priority::high": ("#ff0000", "Fix soon"),
    "priority::low": ("#cccccc", "Fix eventually"),
}
MILESTONES = ["v1.0", "v1.1", "v1.2", "v2.0", "v2.1", "v3.0-beta", "Sprint 12", "Sprint 13", "Sprint 14",
              "Q3 2023", "Q4 2023", "Q1 2024", "2024.03 release", "Accessibility audit", "Docs overhaul",
              "Backlog grooming", "Performance push", "Security hardening"]

COMPONENTS = ["login page", "search bar", "settings page", "navigation menu", "dark mode", "CLI", "config parser",
              "README", "installation guide", "API client", "date picker", "modal dialog", "footer links",
              "build script", "test suite", "CI pipeline", "Docker image", "colour contrast", "keyboard navigation",
              "focus outline", "screen reader labels", "image alt text", "RSS feed", "sitemap", "404 page",
              "language switcher", "CSV export", "file upload", "notification emails", "user avatar",
              "syntax highlighting", "code blocks", "tooltip", "dropdown menu", "pagination", "cache layer",
              "webhook handler", "error messages", "logging", "plugin loader"]
PLATFORMS = ["Safari 16", "Firefox ESR", "Windows 11", "Android 13", "iOS 17", "Ubuntu 22.04", "Python 3.12",
             "Node 20", "macOS Sonoma", "Edge", "Chrome 120"]
ASSISTIVE = ["VoiceOver", "NVDA", "JAWS", "keyboard-only navigation", "high contrast mode", "200% zoom"]
FEATURES = ["dark theme support", "keyboard shortcuts", "a loading indicator", "i18n support", "unit tests",
            "a retry option", "type hints", "an empty state", "better error messages", "a config option",
            "a reduced motion mode", "an export option"]
ACTIONS = ["saving an empty form", "pasting emoji", "resizing the window", "switching tabs quickly",
           "opening a large file", "the network drops", "the cache is cold", "using a non-English locale"]
WRONG = ["date format", "translation", "icon", "count", "timezone", "colour", "tooltip text", "link target"]
DEPS = [("webpack", "4", "5"), ("eslint", "7", "8"), ("React", "17", "18"), ("jQuery", "2", "3"),
        ("lodash", "4.17.15", "4.17.21"), ("Django", "3.2", "4.2"), ("Flask", "2.0", "3.0"), ("pytest", "6", "8"),
        ("prettier", "2", "3"), ("Babel", "6", "7"), ("TypeScript", "4.9", "5.3"), ("Jekyll", "3", "4"),
        ("Sass", "1.32", "1.69"), ("Gradle", "7", "8"), ("Jackson", "2.13", "2.16")]

ISSUE_TITLES = [
    "{Comp} breaks on {platform}",
    "{Comp} is not usable with {assistive}",
    "Add {feature} to the {comp}",
    "Crash when {action} in the {comp}",
    "Typo in the {comp} docs",
    "Update {dep} to {new}",
    "{Comp} shows the wrong {wrong}",
    "Improve performance of the {comp}",
    "Document how to configure the {comp}",
    "Remove deprecated {comp} code",
    "Flaky test in the {comp}",
    "{Comp} has no visible focus state",
    "Missing translation strings in the {comp}",
]
MR_TITLES = [
    ("Fix {comp} crash on {platform}", "fix-{slug}"),
    ("Add {feature} to the {comp}", "feature/{slug}"),
    ("Bump {dep} from {old} to {new}", "dependabot/{slug}"),
    ("Refactor the {comp}", "refactor-{slug}"),
    ("Draft: rework the {comp}", "wip-{slug}"),
    ("Update {comp} documentation", "docs-{slug}"),
    ("Improve {comp} contrast and focus styles", "a11y-{slug}"),
    ("Add tests for the {comp}", "tests-{slug}"),
]
ISSUE_BODIES = [
    "Steps to reproduce:\n1. Open the {comp}.\n2. {Step}.\n\nExpected: it works as documented.\nActual: it does not.",
    "The {comp} could be better. {Step} is harder than it should be.\n\nProposal: {feature}.",
    "Reported by a user on the forum. I can see it on {platform} as well.",
    "While working on the {comp} I noticed this. Not urgent, but worth tracking.",
]
STEPS = ["Click the first item", "Press Tab twice", "Reload the page", "Change the language to German",
         "Open the menu on a small screen", "Run the command with --verbose"]
COMMENTS = [
    "I can reproduce this on {platform}.",
    "Thanks for the report! Could you share your configuration?",
    "This looks like a duplicate of #{other}.",
    "+1, seeing the same thing here.",
    "I'd like to work on this one.",
    "Closing this as it was fixed in the latest release.",
    "Could this be related to the {comp} changes last month?",
    "Added to the next milestone.",
    "Is anyone working on this? Happy to help review.",
    "Confirmed. It only happens with the cache enabled.",
]
MR_BODIES = ["Closes #{other}.\n\nThis changes the {comp} and adds a test.",
             "Small change to the {comp}. Screenshots attached in the thread.",
             "Follow-up to !{mr}. Keeps the old behaviour behind a flag.",
             "Routine update."]
README = """# {path}

{description}

## Getting started

Clone the repository and follow the installation guide in the docs folder.

## Contributing

Issues and merge requests are welcome. Please read CONTRIBUTING.md first and
label new issues so maintainers can triage them.

## License

{license}
"""


def slugify(text: str) -> str:
    out = "".join(ch.lower() if ch.isalnum() else "-" for ch in text)
    return "-".join(part for part in out.split("-") if part)


def _ascii(text: str) -> str:
    return text.translate(str.maketrans("üöéáíóäëÜÖ", "uoeaioaeUO"))


def _day(rng: random.Random, lo: int, hi: int) -> str:
    return (START + timedelta(days=rng.randint(lo, hi))).isoformat()


def _fill(rng: random.Random, pattern: str) -> str:
    """One title or text from a pattern, with every slot drawn from the word lists."""
    comp = rng.choice(COMPONENTS)
    dep, old, new = rng.choice(DEPS)
    text = pattern.format(
        comp=comp, Comp=comp[0].upper() + comp[1:], platform=rng.choice(PLATFORMS), assistive=rng.choice(ASSISTIVE),
        feature=rng.choice(FEATURES), action=rng.choice(ACTIONS), wrong=rng.choice(WRONG), dep=dep, old=old, new=new,
        Step=rng.choice(STEPS), other=rng.randint(1, 40), mr=rng.randint(1, 9),
    )
    return text


def build(conn: sqlite3.Connection, seed: int = 0) -> None:
    """Create and fill the code database for world `seed`."""
    rng = random.Random(f"code-{seed}")
    conn.executescript(SCHEMA)

    # users: the fixed ones, then generated people with unique names and usernames
    users: list[tuple] = []
    for username, name, location, bio in FIXED_USERS:
        users.append((username, name, location, bio))
    names = {u[1] for u in users}
    usernames = {u[0] for u in users} | {g[0] for g in GROUPS}
    while len(users) < 40:
        first, last = rng.choice(FIRST), rng.choice(LAST)
        name = f"{first} {last}"
        if name in names:
            continue
        base = _ascii(rng.choice([f"{first}{last}", f"{first[0]}{last}", f"{first}.{last}", f"{first}_{last}",
                                  f"{first}{rng.randint(7, 99)}"])).lower()
        if base in usernames:
            continue
        names.add(name)
        usernames.add(base)
        users.append((base, name, rng.choice(LOCATIONS), rng.choice(BIOS)))
    for uid, (username, name, location, bio) in enumerate(users, start=1):
        conn.execute("INSERT INTO users VALUES (?, ?, ?, ?, ?, ?, ?)",
                     (uid, username, name, f"{_ascii(username)}@example.com", bio, location, _day(rng, 0, 200)))
    user_ids = {u[0]: uid for uid, u in enumerate(users, start=1)}
    n_users = len(users)

    # namespaces: one per user, then the groups
    for uid, (username, name, _, _) in enumerate(users, start=1):
        conn.execute("INSERT INTO namespaces VALUES (?, ?, ?, 'user', ?, '')", (uid, username, name, uid))
    ns_ids = {u[0]: uid for uid, u in enumerate(users, start=1)}
    for k, (path, name, desc) in enumerate(GROUPS, start=n_users + 1):
        conn.execute("INSERT INTO namespaces VALUES (?, ?, ?, 'group', NULL, ?)", (k, path, name, desc))
        ns_ids[path] = k

    # projects and members
    group_owner = {g[0]: rng.randint(2, n_users) for g in GROUPS}
    project_members: dict[int, list[tuple[int, int]]] = {}
    byteblaze = user_ids["byteblaze"]
    others_projects = [i for i, p in enumerate(PROJECTS, start=1) if p[0] not in ("byteblaze", "a11yproject")]
    byteblaze_extra = rng.sample(others_projects, 6)
    for pid, (ns, path, language, description) in enumerate(PROJECTS, start=1):
        created = _day(rng, 0, 600)
        readme = README.format(path=path, description=description,
                               license=rng.choice(["MIT", "Apache-2.0", "BSD-3-Clause", "GPL-3.0"]))
        conn.execute("INSERT INTO projects VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                     (pid, ns_ids[ns], path, description, readme, language, rng.choice(["main", "main", "master"]),
                      created, _day(rng, 900, 1200)))
        owner = user_ids[ns] if ns in user_ids else group_owner[ns]
        members = {owner: 50}
        if ns == "a11yproject":
            members[byteblaze] = 40  # the logged-in user maintains the A11Y Project's repositories
        elif pid in byteblaze_extra:
            members[byteblaze] = rng.choice([20, 30, 30, 40, 40])
        others = [u for u in range(2, n_users + 1) if u not in members]
        for uid in rng.sample(others, rng.randint(3, 9)):
            members[uid] = rng.choices([10, 20, 30, 40], weights=[15, 20, 45, 20])[0]
        for uid, role in sorted(members.items()):
            conn.execute("INSERT INTO members VALUES (?, ?, ?, ?)", (pid, uid, role, _day(rng, 600, 900)))
        project_members[pid] = sorted(members.items())

    # stars: each project has a popularity; the logged-in user stars a few
    for pid in range(1, len(PROJECTS) + 1):
        popularity = rng.random() ** 1.5
        for uid in range(1, n_users + 1):
            if rng.random() < (popularity * 0.9 if uid != byteblaze else 0.25):
                conn.execute("INSERT INTO stars VALUES (?, ?, ?)", (pid, uid, _day(rng, 700, 1200)))

    # labels and milestones
    label_ids: dict[int, list[int]] = {}
    milestone_ids: dict[int, list[int]] = {}
    for pid in range(1, len(PROJECTS) + 1):
        names_ = rng.sample(sorted(LABELS), rng.randint(5, 9))
        label_ids[pid] = []
        for name in sorted(names_, key=str.lower):
            color, desc = LABELS[name]
            cur = conn.execute("INSERT INTO labels (project_id, name, color, description) VALUES (?, ?, ?, ?)",
                               (pid, name, color, desc))
            label_ids[pid].append(cur.lastrowid)
        milestone_ids[pid] = []
        for iid, title in enumerate(sorted(rng.sample(MILESTONES, rng.randint(2, 5))), start=1):
            start = rng.randint(600, 1100)
            state = "closed" if rng.random() < 0.3 else "active"
            cur = conn.execute(
                "INSERT INTO milestones (project_id, iid, title, description, start_date, due_date, state)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                (pid, iid, title, rng.choice(["", f"Everything planned for {title}.", "Tracking milestone."]),
                 (START + timedelta(days=start)).isoformat(),
                 (START + timedelta(days=start + rng.randint(14, 120))).isoformat(), state))
            milestone_ids[pid].append(cur.lastrowid)

    # issues with labels and comments
    for pid, (_, path, _, _) in enumerate(PROJECTS, start=1):
        member_ids = [u for u, _ in project_members[pid]]
        n_issues = rng.randint(30, 45) if path in BIG_PROJECTS else rng.randint(8, 24)
        titles: set[str] = set()
        for iid in range(1, n_issues + 1):
            title = _fill(rng, rng.choice(ISSUE_TITLES))
            while title in titles:
                title = _fill(rng, rng.choice(ISSUE_TITLES))
            titles.add(title)
            created_n = rng.randint(300, 1150)
            created = (START + timedelta(days=created_n)).isoformat()
            updated = (START + timedelta(days=min(1245, created_n + rng.randint(0, 120)))).isoformat()
            closed = rng.random() < 0.35
            assignee = rng.choice(member_ids) if rng.random() < 0.65 else None
            milestone = rng.choice(milestone_ids[pid]) if rng.random() < 0.5 else None
            cur = conn.execute(
                "INSERT INTO issues (project_id, iid, title, description, state, author_id, assignee_id, milestone_id,"
                " created, updated, closed_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (pid, iid, title, _fill(rng, rng.choice(ISSUE_BODIES)), "closed" if closed else "opened",
                 rng.choice(member_ids + list(range(2, n_users + 1))), assignee, milestone, created, updated,
                 updated if closed else None))
            issue_id = cur.lastrowid
            for lid in rng.sample(label_ids[pid], rng.choice([0, 1, 1, 1, 2, 2, 3])):
                conn.execute("INSERT INTO issue_labels VALUES (?, ?)", (issue_id, lid))
            for _ in range(rng.choice([0, 0, 1, 1, 2, 3, 4])):
                conn.execute("INSERT INTO notes (issue_id, author_id, body, created) VALUES (?, ?, ?, ?)",
                             (issue_id, rng.randint(1, n_users), _fill(rng, rng.choice(COMMENTS)), updated))

    # merge requests with approvals
    for pid, (_, path, _, _) in enumerate(PROJECTS, start=1):
        member_ids = [u for u, role in project_members[pid] if role >= 30] or [u for u, _ in project_members[pid]]
        default = conn.execute("SELECT default_branch FROM projects WHERE id = ?", (pid,)).fetchone()[0]
        titles = set()
        branches: set[str] = set()
        for iid in range(1, rng.randint(3, 9) + 1):
            pattern, branch_pattern = rng.choice(MR_TITLES)
            title = _fill(rng, pattern)
            while title in titles:
                pattern, branch_pattern = rng.choice(MR_TITLES)
                title = _fill(rng, pattern)
            titles.add(title)
            words = slugify(title.replace("Draft: ", "")).split("-")
            branch = branch_pattern.format(slug="-".join(words[1:])[:36].strip("-") or "change")
            while branch in branches:
                branch += f"-{iid}"
            branches.add(branch)
            target = rng.choices([default, "develop", "release-2.1", "release-3.0", "staging"],
                                 weights=[60, 15, 8, 8, 9])[0]
            state = rng.choices(["opened", "merged", "closed"], weights=[45, 40, 15])[0]
            created_n = rng.randint(500, 1200)
            created = (START + timedelta(days=created_n)).isoformat()
            cur = conn.execute(
                "INSERT INTO merge_requests (project_id, iid, title, description, state, author_id, assignee_id,"
                " source_branch, target_branch, created, updated) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (pid, iid, title, _fill(rng, rng.choice(MR_BODIES)), state, rng.choice(member_ids),
                 rng.choice(member_ids) if rng.random() < 0.6 else None, branch, target, created,
                 (START + timedelta(days=min(1245, created_n + rng.randint(0, 40)))).isoformat()))
            for uid in rng.sample(member_ids, min(len(member_ids), rng.choice([0, 0, 1, 1, 2, 3]))):
                conn.execute("INSERT INTO approvals VALUES (?, ?)", (cur.lastrowid, uid))
            for _ in range(rng.choice([0, 1, 1, 2])):
                conn.execute("INSERT INTO notes (mr_id, author_id, body, created) VALUES (?, ?, ?, ?)",
                             (cur.lastrowid, rng.randint(1, n_users), _fill(rng, rng.choice(COMMENTS)), created))

    conn.execute("INSERT INTO sessions VALUES ('code', ?)", (byteblaze,))
