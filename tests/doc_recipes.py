"""The agent recipes of docs/serve.md, as the end-to-end tests run them.

Each recipe is the fenced block after a ``<!-- recipe:NAME -->`` line; the tests take the
recipe from the page and swap in their own proxy address, so a recipe that stops working fails
a test.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

DOC = Path(__file__).resolve().parents[1] / "docs" / "serve.md"
DOC_URL = "http://127.0.0.1:8788"
"""The proxy address the recipes use (serve's default port); Codex's recipe uses 8789."""


def recipe(name: str) -> str:
    """The text of the fenced block marked ``<!-- recipe:NAME -->``.

    Raises:
        LookupError: when the page has no such recipe.
    """
    found = re.search(rf"<!-- recipe:{re.escape(name)} -->\n```[a-z]*\n(.*?)\n```", DOC.read_text(), re.DOTALL)
    if found is None:
        raise LookupError(f"docs/serve.md has no recipe {name!r}")
    return found.group(1)


def command(name: str, url: str) -> tuple[dict[str, str], list[str]]:
    """A one-line shell recipe as ``(environment, argv)``, its proxy address swapped for
    ``url`` (which may end in ``/v1``, as the recipe's own may)."""
    words = shlex.split(recipe(name).replace(DOC_URL, url.removesuffix("/v1")))
    env = {}
    while words and re.match(r"^[A-Z_]+=", words[0]):
        key, _, value = words.pop(0).partition("=")
        env[key] = value
    return env, words
