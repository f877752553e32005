"""Random agent histories for property tests: observations of 0-200k characters, duplicates,
any Unicode, command text inside observations, ARC commands and forced compactions."""

import random

from hypothesis import strategies as st

ALPHABETS = [
    "abcdefghijklmnopqrstuvwxyz      \n",
    "0123456789abcdef:=,.-_/ \n",
    "é漢字😀Ωßж\u200d\ufeff\x00\t\n ab",
    "_recall §0123456789abcdef catalog next page\n",
]


def make_text(seed: int, length: int) -> str:
    rng = random.Random(seed)
    alphabet = ALPHABETS[seed % len(ALPHABETS)]
    if seed % 7 == 0:  # any code point (no surrogates): the hard case for tokenizers
        return "".join(chr(rng.choice([rng.randrange(32, 0xD800), rng.randrange(0xE000, 0x110000)]))
                       for _ in range(length))
    return "".join(rng.choices(alphabet, k=length))


# Mostly short observations, some long, a few up to 200k characters.
lengths = st.one_of(st.integers(0, 300), st.integers(300, 6_000), st.integers(6_000, 200_000))

step = st.one_of(
    st.tuples(st.just("observe"), st.integers(0, 8), lengths, st.integers(0, 2**20)),
    st.tuples(st.just("repeat"), st.integers(0, 10_000)),
    st.tuples(st.just("recall"), st.integers(0, 10_000), st.one_of(st.none(), st.integers(1, 4))),
    st.tuples(st.just("catalog"), st.integers(0, 3)),
    st.tuples(st.just("compact")),
    st.tuples(st.just("overflow")),
)


def histories(max_steps: int = 200):
    return st.lists(step, max_size=max_steps)
