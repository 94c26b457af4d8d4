"""The tiny pair's chat corpus: four task categories whose predictability differs like real
workloads.

structured (JSON records copied from the request) > code (small functions named in the request)
> prose (descriptions assembled from many sentence variants) > creative (poems from random words).
Every example is generated from a seed, so `make tiny-models` rebuilds the same corpus.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass

from helpers.common.prompts import CATEGORIES

__all__ = [
    "build_corpus",
    "make_examples",
]  # used only inside helpers.tiny

_FIRST = (
    "Ada",
    "Bruno",
    "Chen",
    "Dara",
    "Elena",
    "Farid",
    "Greta",
    "Hugo",
    "Ines",
    "Jonas",
    "Kira",
    "Luca",
    "Mira",
    "Nadia",
    "Omar",
    "Priya",
    "Quinn",
    "Rosa",
    "Sven",
    "Tara",
    "Umar",
    "Vera",
    "Wen",
    "Yara",
    "Zane",
    "Alma",
    "Boris",
    "Clara",
    "Diego",
    "Emil",
    "Fiona",
    "Goran",
)
_LAST = (
    "Moreno",
    "Novak",
    "Okafor",
    "Petrov",
    "Quist",
    "Rahman",
    "Silva",
    "Tanaka",
    "Ueda",
    "Varga",
    "Weber",
    "Xu",
    "Young",
    "Zhou",
    "Adler",
    "Berg",
    "Costa",
    "Duran",
    "Eriksen",
    "Fischer",
)
_CITIES = (
    "Porto",
    "Lyon",
    "Oslo",
    "Kyoto",
    "Lima",
    "Cairo",
    "Dublin",
    "Quito",
    "Riga",
    "Seoul",
    "Tunis",
    "Vienna",
    "Zagreb",
    "Bergen",
    "Cusco",
    "Dakar",
    "Genoa",
    "Hanoi",
    "Izmir",
    "Malmo",
)
_JOBS = (
    "pilot",
    "baker",
    "nurse",
    "teacher",
    "painter",
    "farmer",
    "chemist",
    "tailor",
    "drummer",
    "plumber",
    "editor",
    "florist",
    "surveyor",
    "welder",
    "librarian",
    "architect",
)
_PETS = ("owl", "cat", "dog", "parrot", "turtle", "rabbit", "goat", "lizard", "hamster", "ferret")
_NOUNS = (
    "price",
    "speed",
    "count",
    "weight",
    "score",
    "height",
    "budget",
    "length",
    "volume",
    "rate",
    "total",
    "amount",
    "limit",
    "size",
    "distance",
    "level",
)
_ITEMS = ("orders", "names", "files", "users", "tasks", "books", "cards", "rows", "events", "songs")
_PLACES = (
    "harbor",
    "market",
    "bridge",
    "castle",
    "library",
    "garden",
    "station",
    "museum",
    "square",
    "cathedral",
    "river",
    "hill",
    "tower",
    "park",
)
_FOODS = ("bread", "fish", "cheese", "olives", "noodles", "soup", "rice", "pastries", "dumplings")
_SEASONS = ("spring", "summer", "autumn", "winter")
_ADJS = ("quiet", "busy", "old", "bright", "windy", "narrow", "gentle", "crowded", "green", "proud")
_POEM_WORDS = (
    "lantern",
    "river",
    "copper",
    "wind",
    "harbor",
    "feather",
    "candle",
    "mirror",
    "thread",
    "ember",
    "meadow",
    "anchor",
    "glass",
    "orchard",
    "signal",
    "shadow",
    "willow",
    "stone",
    "violin",
    "compass",
    "snow",
    "salt",
    "bell",
    "ladder",
)
_POEM_ADJS = (
    "silver",
    "hollow",
    "patient",
    "broken",
    "sleepy",
    "distant",
    "restless",
    "tender",
    "burning",
    "quiet",
    "golden",
    "crooked",
    "pale",
    "wild",
    "velvet",
    "ancient",
)
_POEM_VERBS = (
    "hums",
    "waits",
    "remembers",
    "drifts",
    "trembles",
    "sings",
    "listens",
    "burns",
    "wanders",
    "breaks",
    "glows",
    "whispers",
    "falls",
    "turns",
    "sleeps",
    "calls",
)
_POEM_PLACES = (
    "below the hill",
    "across the water",
    "in the dark",
    "beside the door",
    "under the moon",
    "through the rain",
    "over the roofs",
    "along the shore",
    "behind the glass",
    "inside the clock",
    "past the gate",
    "near the fire",
)


@dataclass(frozen=True)
class Example:
    """One chat exchange of the corpus: a task category, the user turn and the assistant answer."""

    category: str
    user: str
    assistant: str

    def messages(self, with_answer: bool = True) -> list[dict[str, str]]:
        """The exchange as chat messages (the user turn alone when with_answer is False)."""
        msgs = [{"role": "user", "content": self.user}]
        if with_answer:
            msgs.append({"role": "assistant", "content": self.assistant})
        return msgs


def _person(rng: random.Random) -> dict[str, object]:
    """A random person record."""
    return {
        "name": f"{rng.choice(_FIRST)} {rng.choice(_LAST)}",
        "age": rng.randint(18, 90),
        "city": rng.choice(_CITIES),
        "job": rng.choice(_JOBS),
        "pet": rng.choice(_PETS),
    }


def _structured_example(rng: random.Random) -> Example:
    """A request listing people's fields in any order; the answer is canonical JSON of them."""
    people = [_person(rng) for _ in range(rng.randint(1, 3))]
    parts = []
    for p in people:
        fields = list(p.items())
        rng.shuffle(fields)
        parts.append(", ".join(f"{k} {v}" for k, v in fields))
    user = rng.choice(
        ("Make JSON records for: ", "Convert to JSON: ", "Give me JSON for these people: ")
    )
    user += "; ".join(parts) + "."
    records = [{**p, "id": i + 1, "active": p["age"] < 65} for i, p in enumerate(people)]
    return Example("structured", user, json.dumps(records, indent=2))


def _code_body(rng: random.Random, fn: str, a: str, b: str, coll: str) -> tuple[str, str]:
    """One small function of a random kind: (description for the request, source code)."""
    kind = rng.randrange(6)
    if kind == 0:
        return (
            f"returns {a} multiplied by {b}",
            f'def {fn}({a}, {b}):\n    """Return {a} multiplied by {b}."""\n    return {a} * {b}\n',
        )
    if kind == 1:
        return (
            f"limits {a} to the range from low to high",
            f'def {fn}({a}, low, high):\n    """Clamp {a} to [low, high]."""\n'
            f"    if {a} < low:\n        return low\n    if {a} > high:\n        return high\n    "
            f"return {a}\n",
        )
    if kind == 2:
        return (
            f"adds up the {a} of all {coll}",
            f'def {fn}({coll}):\n    """Sum the {a} of every item in {coll}."""\n    total = 0\n'
            f"    for item in {coll}:\n        total += item.{a}\n    return total\n",
        )
    if kind == 3:
        return (
            f"keeps the {coll} whose {a} is above {b}",
            f'def {fn}({coll}, {b}):\n    """Return the {coll} with {a} greater than {b}."""\n'
            f"    return [item for item in {coll} if item.{a} > {b}]\n",
        )
    if kind == 4:
        return (
            f"counts how many {coll} have a {a}",
            f'def {fn}({coll}):\n    """Count the {coll} that have a {a}."""\n    count = 0\n'
            f"    for item in {coll}:\n        if item.{a} is not None:\n            count += 1\n  "
            "  return count\n",
        )
    return (
        f"looks up the {a} of a key in {coll}, with {b} as the default",
        f'def {fn}({coll}, key, {b}=None):\n    """Return the {a} stored under key, or {b}."""\n'
        f"    if key in {coll}:\n        return {coll}[key].{a}\n    return {b}\n",
    )


def _code_example(rng: random.Random) -> Example:
    """A request naming a Python function and what it does; the answer is the function."""
    a, b = rng.sample(_NOUNS, 2)
    coll = rng.choice(_ITEMS)
    verb = rng.choice(("get", "compute", "check", "find", "scale", "count", "pick", "apply"))
    fn = f"{verb}_{a}"
    desc, src = _code_body(rng, fn, a, b, coll)
    user = rng.choice(
        (
            "Write a Python function `{fn}` that {desc}.",
            "Implement `{fn}`: it {desc}.",
            "Python: define `{fn}`, which {desc}.",
        )
    )
    return Example("code", user.format(fn=fn, desc=desc), f"```python\n{src}```")


_PROSE_OPENERS = (
    "{city} is a {adj} city known for its {place}.",
    "{city} sits by the {place}, and it is {adj} most of the year.",
    "People describe {city} as {adj}, with a famous {place} at its center.",
)
_PROSE_MIDDLE = (
    "Many people there work as {job}s, and the {job}s of {city} are proud of their craft.",
    "In {season} the streets fill with music, and visitors come to see the {place2}.",
    "The local food is simple: {food} in the morning and {food2} at night.",
    "Its oldest {place2} was built long ago and is still open to the public.",
    "Families often walk to the {place2} on weekends and stay until the evening.",
    "The weather is mild in {season}, but the {place} can be cold after sunset.",
    "Most visitors remember the {food} sold near the {place2}.",
)
_PROSE_CLOSERS = (
    "If {first} visits the {place}, {first} will see the city at its best.",
    "{city} is small, but {first} will find that it rewards anyone who stays.",
    "In short, {first} should expect a {adj} {season} in {city}.",
)


def _prose_example(rng: random.Random) -> Example:
    """A request about a city for a named person; the answer is a paragraph of varied sentences."""
    city, first, last = rng.choice(_CITIES), rng.choice(_FIRST), rng.choice(_LAST)
    slots = {
        "city": city,
        "first": first,
        "adj": rng.choice(_ADJS),
        "place": rng.choice(_PLACES),
        "place2": rng.choice(_PLACES),
        "job": rng.choice(_JOBS),
        "season": rng.choice(_SEASONS),
        "food": rng.choice(_FOODS),
        "food2": rng.choice(_FOODS),
    }
    middle = rng.sample(_PROSE_MIDDLE, rng.randint(2, 4))
    sentences = [rng.choice(_PROSE_OPENERS), *middle, rng.choice(_PROSE_CLOSERS)]
    ask = rng.choice(
        ("Tell them about the city.", "What is the city like?", "Describe it for them.")
    )
    user = f"{first} {last} is moving to {city}. {ask}"
    return Example("prose", user, " ".join(s.format(**slots) for s in sentences))


def _creative_example(rng: random.Random) -> Example:
    """A request for a poem with some given words; each line uses one of them among random words."""
    words = rng.sample(_POEM_WORDS, rng.randint(3, 5))
    lines = []
    for w in words:
        form = rng.randrange(3)
        adj, verb, where = rng.choice(_POEM_ADJS), rng.choice(_POEM_VERBS), rng.choice(_POEM_PLACES)
        if form == 0:
            lines.append(f"the {adj} {w} {verb} {where}")
        elif form == 1:
            lines.append(f"a {w} of {rng.choice(_POEM_WORDS)} {verb} {where}")
        else:
            lines.append(f"and every {w} {verb}, {adj} and {rng.choice(_POEM_ADJS)}")
    user = (
        rng.choice(
            (
                "Write a short poem with the words: ",
                "A poem, please, using: ",
                "Compose a few lines about: ",
            )
        )
        + ", ".join(words)
        + "."
    )
    return Example("creative", user, "\n".join(lines))


_GENERATORS: dict[str, Callable[[random.Random], Example]] = {
    "structured": _structured_example,
    "code": _code_example,
    "prose": _prose_example,
    "creative": _creative_example,
}


def make_examples(category: str, n: int, seed: int) -> list[Example]:
    """`n` examples of one category, reproducible from `seed`."""
    rng = random.Random(f"{category}-{seed}")
    return [_GENERATORS[category](rng) for _ in range(n)]


def build_corpus(n_per_category: int, seed: int = 0) -> list[Example]:
    """A shuffled training corpus with `n_per_category` examples of each category."""
    examples = [ex for cat in CATEGORIES for ex in make_examples(cat, n_per_category, seed)]
    random.Random(seed).shuffle(examples)
    return examples
