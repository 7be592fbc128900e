"""The FTS5 query for a prompt: its words, quoted and OR-ed. Pure.

A prompt is user text, not FTS5 syntax: `AND`, `NEAR(`, `col:`, `*`, `^`, quotes or a lone `-`
must not change the query or make it fail to parse. So the query is built only from the prompt's
words (runs of Unicode letters, digits and underscores, `\\w+`), each one a quoted string, joined
with OR. A quoted string cannot carry syntax (the only special character inside one is `"`, which
a word never contains); the index's tokenizer still splits it (`invoice_reconciler` becomes the
phrase "invoice reconciler", matching the same words in the text).

Stop words (English function words and the words of "what did I say earlier" questions) and
one-character words are dropped: they match nearly every message and only dilute BM25. A prompt
with nothing left means no recall (`None`).
"""

from __future__ import annotations

import re

#: At most this many distinct words per query; a pasted log as a prompt must stay a cheap query.
MAX_TERMS = 32

_WORD = re.compile(r"\w+", re.UNICODE)

STOP_WORDS = frozenset(
    """
    a about above after again against all also am an and any are as at be because been before being
    below between both but by can could did do does doing done down during each few for from further
    had has have having he her here hers herself him himself his how i if in into is it its itself
    just let me more most my myself no nor not now of off on once only or other our ours ourselves
    out over own please same she should so some such than that the their theirs them themselves then
    there these they this those through to too under until up very was we were what when where which
    while who whom why will with would you your yours yourself yourselves
    again earlier before previously remember recall mentioned said say tell told know ask asked
    thing things something anything one ok okay yes hi hello thanks thank
    """.split()
)


def prompt_terms(prompt: str) -> list[str]:
    """The prompt's search words, lowercased, first occurrence order, stop words dropped."""
    seen: dict[str, None] = {}
    for match in _WORD.finditer(prompt or ""):
        word = match.group(0).lower()
        if len(word) < 2 or word in STOP_WORDS or word.strip("_") == "":
            continue
        seen.setdefault(word, None)
        if len(seen) >= MAX_TERMS:
            break
    return list(seen)


def fts_query(prompt: str) -> str | None:
    """`"w1" OR "w2" ...` for the prompt's words, or None when there is nothing to search for."""
    terms = prompt_terms(prompt)
    if not terms:
        return None
    return " OR ".join('"%s"' % t.replace('"', '""') for t in terms)
