"""Text as the keyword indexes see it: pre-segmentation of stored text, the message's date in words, and
the terms of a query.

Shared by the SQLite and OpenSearch (BM25) adapters so both back ends search the same terms. It
imports nothing but the stop-word list, so the OpenSearch adapter (the Lambda path) never loads SQLite.

* Stored text: each Han ideograph and Hiragana character becomes its own token (Lucene's standard
  tokenizer does this too), and each emoji becomes a word token (``emoji127829`` for 🍕), because the
  standard tokenizer's treatment of emoji varies between Lucene versions.
* Query text: split into word tokens on whitespace and punctuation, duplicates dropped, English stop words
  (``memstack.stopwords``) dropped unless nothing else is left, at most ``MAX_QUERY_TERMS`` (the longest)
  kept. The terms are handed to a ``match`` query joined by spaces, never to ``query_string``, so
  query syntax (``AND``, ``*``, ``:``, quotes, brackets) is plain text.
"""

from __future__ import annotations

import re
from datetime import datetime

from memstack.dates import date_words
from memstack.stopwords import STOP_WORDS

MAX_QUERY_TERMS = 8
"""Most distinct terms a keyword query keeps: the longest ones (length stands in for rarity; ties keep the
earlier term), in their original order. FTS5's ``bm25()`` costs about 0.3 µs per matching row and query
term, so a turn-length message (15 terms, ~400 matching rows in one LoCoMo conversation) ranked in 3.4 ms;
with 8 terms it takes 1.7 ms, and evidence recall on LoCoMo's questions (all shorter) is unchanged
(0.666 → 0.665, keyword mode, top_k 4)."""

_UNIGRAM = re.compile(r"([\u3040-\u309f\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f])")
"""Hiragana and Han ideographs (CJK unified, extensions A–G, compatibility): one token per character."""

_EMOJI = re.compile(r"[\u2300-\u23ff\u2600-\u27bf\u2b00-\u2bff\U0001f000-\U0001f3fa\U0001f400-\U0001faff]")
"""Emoji and pictographs (skin-tone modifiers U+1F3FB–1F3FF excluded; they carry no meaning to search)."""

_QUERY_SEPARATORS = re.compile(
    r"[\s\x00-\x2f\x3a-\x40\x5b-\x60\x7b-\x7f\u2000-\u206f\u3000-\u303f"
    r"\uff01-\uff0f\uff1a-\uff20\uff3b-\uff40\uff5b-\uff65]+"
)
"""Whitespace and punctuation (ASCII, general, CJK and full-width) that split a query into tokens."""


def indexed_text(text: str) -> str:
    """The text as stored in the ``text`` field: CJK characters spaced apart, emoji spelled as words.

    Example: ``"東京🍕 pizza"`` → ``" 東  京  emoji127829  pizza"``.
    """
    text = _EMOJI.sub(lambda m: f" emoji{ord(m.group())} ", text)
    return _UNIGRAM.sub(r" \1 ", text)


def keyword_text(text: str, created_at: datetime, context: str = "") -> str:
    """What a chunk's keyword field holds: ``indexed_text(context)`` when there is context, then
    ``indexed_text(text)``, then its message's date in words and numbers (``memstack.dates.date_words``,
    e.g. ``"October 13 2023"``), so a query naming a date or a month matches that day's messages on every
    backend, and a reply is found by the words of the turn it answers (docs/adr/0015).

    Args:
        text: the chunk's text.
        created_at: its message's ``created_at`` (aware; the date is taken in UTC).
        context: ``IndexEntry.context``: the previous message's text for a first chunk, else ``""``.
    """
    before = f"{indexed_text(context)}\n" if context else ""
    return f"{before}{indexed_text(text)}\n{date_words(created_at)}"


def query_terms(text: str) -> list[str]:
    """The word tokens of a free-text query, as the keyword search sends them (see the module docstring).

    Returns:
        The terms in their original order; ``[]`` when the text has no word token (the search then
        returns an empty list without asking OpenSearch).
    """
    terms: dict[str, str] = {}
    for token in _QUERY_SEPARATORS.split(indexed_text(text)):
        key = token.casefold()
        if token and key not in terms:
            terms[key] = token
    kept = [token for key, token in terms.items() if key not in STOP_WORDS] or list(terms.values())
    if len(kept) > MAX_QUERY_TERMS:
        longest = set(sorted(range(len(kept)), key=lambda i: (-len(kept[i]), i))[:MAX_QUERY_TERMS])
        kept = [term for i, term in enumerate(kept) if i in longest]
    return kept
