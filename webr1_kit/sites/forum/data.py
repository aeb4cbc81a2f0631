"""The "forum" database of the Postmill-style forum (WebArena's Reddit clone): users,
forums, posts, one level of nested comments, votes and subscriptions.

Everything is generated from the world seed with one `random.Random`, so the same seed
always gives identical data. Scores are kept on the post and comment rows (the sum of
their votes) so listings can sort by them; the vote rows say who voted which way, so
the logged-in user's own votes can be shown and toggled.
"""

from __future__ import annotations

import random
import sqlite3
from datetime import datetime, timedelta

from .corpus import BIOS, FORUMS, GENERIC_COMMENTS, REPLIES, USERNAMES

SCHEMA = """
CREATE TABLE users (id INTEGER PRIMARY KEY, username TEXT NOT NULL UNIQUE, created TEXT NOT NULL,
                    biography TEXT NOT NULL DEFAULT '');
CREATE TABLE forums (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, title TEXT NOT NULL,
                     description TEXT NOT NULL, created TEXT NOT NULL);
CREATE TABLE posts (id INTEGER PRIMARY KEY, forum_id INTEGER NOT NULL REFERENCES forums(id),
                    user_id INTEGER NOT NULL REFERENCES users(id), title TEXT NOT NULL, body TEXT NOT NULL,
                    created TEXT NOT NULL, edited TEXT, score INTEGER NOT NULL DEFAULT 0);
CREATE TABLE comments (id INTEGER PRIMARY KEY, post_id INTEGER NOT NULL REFERENCES posts(id) ON DELETE CASCADE,
                       parent_id INTEGER REFERENCES comments(id) ON DELETE CASCADE,
                       user_id INTEGER NOT NULL REFERENCES users(id), body TEXT NOT NULL, created TEXT NOT NULL,
                       score INTEGER NOT NULL DEFAULT 0);
CREATE TABLE post_votes (user_id INTEGER NOT NULL REFERENCES users(id),
                         post_id INTEGER NOT NULL REFERENCES posts(id) ON DELETE CASCADE,
                         value INTEGER NOT NULL CHECK (value IN (-1, 1)), PRIMARY KEY (user_id, post_id));
CREATE TABLE comment_votes (user_id INTEGER NOT NULL REFERENCES users(id),
                            comment_id INTEGER NOT NULL REFERENCES comments(id) ON DELETE CASCADE,
                            value INTEGER NOT NULL CHECK (value IN (-1, 1)), PRIMARY KEY (user_id, comment_id));
CREATE TABLE subscriptions (user_id INTEGER NOT NULL REFERENCES users(id),
                            forum_id INTEGER NOT NULL REFERENCES forums(id), PRIMARY KEY (user_id, forum_id));
-- Who is logged in on each site of this episode (site -> user id); a missing row means logged out.
CREATE TABLE sessions (site TEXT PRIMARY KEY, user_id INTEGER NOT NULL);
CREATE INDEX posts_forum ON posts(forum_id);
CREATE INDEX posts_user ON posts(user_id);
CREATE INDEX comments_post ON comments(post_id);
CREATE INDEX comments_user ON comments(user_id);
CREATE INDEX post_votes_post ON post_votes(post_id);
CREATE INDEX comment_votes_comment ON comment_votes(comment_id);
"""

ME = 1
"""The logged-in user (MarvelsGrantMan136)."""
NOW = datetime(2023, 7, 1, 9, 0)
"""The world's present: seed activity happens before it; new posts and comments get it."""
START = datetime(2022, 6, 1)


def stamp(t: datetime) -> str:
    """Timestamps as stored and shown: "2023-03-04 17:05"."""
    return t.strftime("%Y-%m-%d %H:%M")


def build(conn: sqlite3.Connection, seed: int = 0) -> None:
    """Create and fill the forum database for world `seed`."""
    rng = random.Random(f"forum-{seed}")
    conn.executescript(SCHEMA)
    span = int((NOW - START).total_seconds() // 60) - 60 * 24 * 3

    def when(after: datetime | None = None) -> datetime:
        """A random time in the seed period, or between `after` and an hour before NOW."""
        if after is None:
            return START + timedelta(minutes=rng.randint(0, span))
        room = int((NOW - after).total_seconds() // 60) - 60
        return after + timedelta(minutes=rng.randint(min(30, room), room))

    n_users = len(USERNAMES)
    for uid, name in enumerate(USERNAMES, start=1):
        created = START - timedelta(days=rng.randint(30, 900))
        conn.execute("INSERT INTO users VALUES (?, ?, ?, ?)", (uid, name, stamp(created), rng.choice(BIOS)))

    forum_ids: dict[str, int] = {}
    for fid, (name, spec) in enumerate(FORUMS.items(), start=1):
        forum_ids[name] = fid
        created = START - timedelta(days=rng.randint(100, 700))
        conn.execute("INSERT INTO forums VALUES (?, ?, ?, ?, ?)", (fid, name, spec["title"], spec["description"], stamp(created)))

    # Subscriptions: forums differ in popularity, so subscriber counts differ.
    popularity = {fid: rng.uniform(0.1, 0.8) for fid in forum_ids.values()}
    for uid in range(1, n_users + 1):
        for fid, p in popularity.items():
            if rng.random() < p:
                conn.execute("INSERT INTO subscriptions VALUES (?, ?)", (uid, fid))

    # Posts: each picks slot values used by its title, body and some comments.
    posts = []  # (post_id, forum name, slots, author, created)
    titles: set[str] = set()
    for name, spec in FORUMS.items():
        for _ in range(rng.randint(12, 26)):
            for _attempt in range(100):
                slots = {"x": rng.choice(spec["x"]), "y": rng.choice(spec["y"])}
                title = rng.choice(spec["titles"]).format(**slots)
                title = title[0].upper() + title[1:]
                if title not in titles:
                    break
            else:
                continue
            titles.add(title)
            # The logged-in user writes about one post in ten (at least 28 in all, below),
            # so tasks about "my posts" have material.
            author = ME if rng.random() < 0.1 else rng.randint(2, n_users)
            # Sentences keep their written order (context first, the question last).
            picked = sorted(rng.sample(range(len(spec["body"])), rng.randint(2, 4)))
            body = " ".join(spec["body"][i].format(**slots) for i in picked)
            body = body[0].upper() + body[1:]
            created = when()
            cur = conn.execute(
                "INSERT INTO posts (forum_id, user_id, title, body, created) VALUES (?, ?, ?, ?, ?)",
                (forum_ids[name], author, title, body, stamp(created)),
            )
            posts.append((cur.lastrowid, name, slots, author, created))
    mine = sum(1 for p in posts if p[3] == ME)
    for post in rng.sample([p for p in posts if p[3] != ME], max(0, 28 - mine)):
        conn.execute("UPDATE posts SET user_id = ? WHERE id = ?", (ME, post[0]))
    authors = {pid: author for pid, author in conn.execute("SELECT id, user_id FROM posts")}

    # Comments: top-level ones, some with one level of replies.
    for pid, name, slots, _, created in posts:
        spec = FORUMS[name]
        tops: list[tuple[int, datetime]] = []
        for _ in range(rng.choice([0, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 5, 6, 8])):
            if tops and rng.random() < 0.3:
                parent, after = rng.choice(tops)
                text, parent_id = rng.choice(REPLIES), parent
            else:
                after = created
                pool = spec["comments"] if rng.random() < 0.5 else GENERIC_COMMENTS
                text, parent_id = rng.choice(pool).format(**slots), None
                text = text[0].upper() + text[1:]
            at = when(after)
            cur = conn.execute(
                "INSERT INTO comments (post_id, parent_id, user_id, body, created) VALUES (?, ?, ?, ?, ?)",
                (pid, parent_id, rng.randint(1, n_users), text, stamp(at)),
            )
            if parent_id is None:
                tops.append((cur.lastrowid, at))

    # Votes: a post's voters lean up or down by its "quality"; nobody votes on their own post.
    # Scores are summed here (summing in SQL per row would scan the vote tables each time).
    votes, scores = [], {}
    for pid in authors:
        quality = rng.uniform(0.35, 0.97)
        voters = rng.sample([u for u in range(1, n_users + 1) if u != authors[pid]], rng.randint(0, 30))
        for uid in voters:
            votes.append((uid, pid, 1 if rng.random() < quality else -1))
            scores[pid] = scores.get(pid, 0) + votes[-1][2]
    conn.executemany("INSERT INTO post_votes VALUES (?, ?, ?)", votes)
    conn.executemany("UPDATE posts SET score = ? WHERE id = ?", [(v, k) for k, v in scores.items()])
    votes, scores = [], {}
    for cid, author in conn.execute("SELECT id, user_id FROM comments").fetchall():
        voters = rng.sample([u for u in range(1, n_users + 1) if u != author], rng.randint(0, 8))
        for uid in voters:
            votes.append((uid, cid, 1 if rng.random() < 0.8 else -1))
            scores[cid] = scores.get(cid, 0) + votes[-1][2]
    conn.executemany("INSERT INTO comment_votes VALUES (?, ?, ?)", votes)
    conn.executemany("UPDATE comments SET score = ? WHERE id = ?", [(v, k) for k, v in scores.items()])

    conn.execute("INSERT INTO sessions VALUES ('forum', ?)", (ME,))
