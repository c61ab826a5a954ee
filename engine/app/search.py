"""Search what terminals showed: ``bandpass search``, the Search screen (ctrl+f), Replay's find bar and
``bandpass replay --find`` share one query language and one index.

Why here: the query (``Matcher``: words, phrases, ``/regex/``, field filters), the index kept beside the
store and the hits are the review stage's; the front ends reach them through this module and render the
hits their own way.
"""

from __future__ import annotations

from ..review.search import Filters, Hit, SearchResult, cast_hits, episode_hits, search
from ..review.search_index import build_index
from ..review.search_query import Matcher, QueryError
from ..review.transcript import TRANSCRIPT_VERSION

__all__ = [
    "TRANSCRIPT_VERSION",
    "Filters",
    "Hit",
    "Matcher",
    "QueryError",
    "SearchResult",
    "build_index",
    "cast_hits",
    "episode_hits",
    "search",
]
