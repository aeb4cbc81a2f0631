"""The kit's infrastructure exceptions, in a module that imports nothing.

`InfraError` is the line between the agent's mistakes and the machinery's: anything
raised as one (a browser or page that died, a site that did not answer, an evaluation
that could not run) makes the rollout retry or drop the episode, and it is never scored
as reward 0. Modules at every level (the browser, the task suites, the WebArena site
checks, the CLI) raise or catch it, so it lives here, below all of them, rather than in
one of them.
"""


class InfraError(RuntimeError):
    """The browser, the page or the site failed. Not the agent's fault: never reward 0."""


class BrowserNotFound(InfraError):
    """No Chromium to launch: the message says where the kit looked and how to install one."""


class InfraWarning(UserWarning):
    """Many episodes of a step failed for infrastructure reasons: the step learned from few."""
