"""Ranking tools for a plain-language query: BM25F (BM25 over weighted fields), standard library only.

Why not a library: ``rank_bm25`` scores one flat text per document, has no field weights, and
computes its statistics once over the whole corpus at construction, where a search here must
count only the tools the caller may use (a tool it may not use must not even weigh on the
ranking); bm25s and the search engines are far more than forty lines of arithmetic need. So the
index keeps per-document weighted term counts, and ``search`` derives BM25's statistics (the
number of documents, each term's document frequency, the average length) from the documents
it is allowed, so a caller's ranking is the one an index of its own tools would give.

A document is a tool's fields: its name, title, description, parameters (names and
descriptions) and group (its app or toolset); a term in the name weighs more than one in a
parameter's description.
"""
import heapq
import itertools
import math
import re
from collections import defaultdict
from typing import Iterable, Sequence

#: How much one occurrence of a term counts in each field (BM25F's field weights).
FIELD_WEIGHTS = {"name": 3.0, "title": 2.0, "description": 1.0, "parameters": 0.6, "group": 0.5}
#: BM25's usual constants: term frequency saturation, and length normalisation.
K1, B = 1.2, 0.75

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_WORD = re.compile(r"[a-z0-9]+")
#: Words that say nothing about which tool is meant ("change a book's title").
_STOP_WORDS = frozenset("a an and are as at be by for from in is it its of on one or s the this to with".split())


def stem(word: str) -> str:
    """A light English stem: plurals and the common verb endings, enough for "books" to find
    "book" and "changed" to find "change" (a full stemmer would buy little on tool texts; the
    query and the tools go through the same one, so a stem need only be consistent)."""
    for suffix, replacement in (("ies", "y"), ("ing", ""), ("ed", ""), ("es", ""), ("s", "")):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3 and not word.endswith("ss"):
            word = word[: len(word) - len(suffix)] + replacement
            break
    # "change", "changed", "changes": one stem ("chang"), whichever ending came off.
    return word[:-1] if word.endswith("e") and len(word) > 3 else word


def terms(text: str) -> list:
    """The stemmed words of ``text``: snake_case and camelCase split, stop words dropped."""
    words = _WORD.findall(_CAMEL.sub(" ", text or "").lower())
    return [stem(word) for word in words if word not in _STOP_WORDS]


class ToolIndex:
    """An inverted index of documents ``(key, {field: text})``, built once (``search`` reads it
    only: one index may serve every request of a process at once)."""

    def __init__(self, documents: Iterable):
        self.keys: list = []
        self.lengths: list = []
        self.postings: dict = defaultdict(list)  # term -> [(document number, weighted frequency)]
        for number, (key, fields) in enumerate(documents):
            counts: dict = defaultdict(float)
            for field_name, text in fields.items():
                for term in terms(text):
                    counts[term] += FIELD_WEIGHTS[field_name]
            self.keys.append(key)
            self.lengths.append(sum(counts.values()))
            for term, frequency in counts.items():
                self.postings[term].append((number, frequency))
        self.postings = dict(self.postings)

    def search(self, query: str, allowed: Sequence[bool], limit: int) -> list:
        """The keys of the ``limit`` documents that match ``query`` best, best first, among those
        ``allowed`` (one flag per document, in index order): the others count for nothing."""
        count = sum(map(bool, allowed))
        if not count:
            return []
        average = sum(itertools.compress(self.lengths, allowed)) / count or 1.0
        scores: dict = {}
        base, per_length, lengths = K1 * (1 - B), K1 * B / average, self.lengths
        for term in set(terms(query)):
            hits = [(number, frequency) for number, frequency in self.postings.get(term, ()) if allowed[number]]
            if not hits:
                continue
            weight = math.log(1 + (count - len(hits) + 0.5) / (len(hits) + 0.5)) * (K1 + 1)  # idf (k1 + 1)
            for number, frequency in hits:
                scores[number] = scores.get(number, 0.0) + weight * frequency / (
                    frequency + base + per_length * lengths[number])
        # Ties keep index order (names sorted), so the same query always answers the same.
        best = heapq.nsmallest(limit, scores.items(), key=lambda item: (-item[1], item[0]))
        return [self.keys[number] for number, _ in best]
