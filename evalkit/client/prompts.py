"""The three stress questions (docs/conventions.md phrasings) and the seeded long-prompt text, sent by stress and load.

Every question has one known answer: arithmetic for shorts, a secret code hidden in each long prompt, a count
for generations. Secret codes are letters only, so a code can never be read as a short's number and back.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib.resources import files

LONG_QUESTION = "What is the secret code? Reply with only the code."
CODE_LETTERS = "ABCDEFGHJKLMNPQRSTUVWXYZ"


@dataclass(frozen=True)
class ShortQuestion:
    """`What is a op b?` with its integer answer."""

    a: int
    op: str
    b: int

    @property
    def text(self) -> str:
        """The prompt, in the phrasing the sim recognises."""
        return f"What is {self.a} {self.op} {self.b}? Reply with only the number."

    @property
    def answer(self) -> int:
        """The correct integer."""
        return {"+": self.a + self.b, "-": self.a - self.b, "*": self.a * self.b}[self.op]


@dataclass(frozen=True)
class GenQuestion:
    """`Count from 1 to n` — a generation whose every token is checkable."""

    n: int

    @property
    def text(self) -> str:
        """The prompt, in the phrasing the sim recognises."""
        return f"Count from 1 to {self.n}, separated by commas. Reply with only the numbers."

    @property
    def answer(self) -> str:
        """`1, 2, ..., n`."""
        return ", ".join(str(i) for i in range(1, self.n + 1))


@dataclass(frozen=True)
class LongSpec:
    """Everything that fixes one long prompt except its length: first word, filler seed, code and where it sits."""

    first_word: str
    filler_seed: int
    code: str
    code_at: float  # fraction of the filler before the code sentence
    salt: str = ""  # the run's salt (stress): first, so no earlier run's prompt shares a prefix cache block with it

    def text(self, sentences: int) -> str:
        """The long prompt with `sentences` filler sentences; longer is always a superset of shorter's filler."""
        return long_prompt_text(self, sentences)


def filler_words() -> tuple[str, ...]:
    """The filler vocabulary from `prompts/stress/filler_words.txt`."""
    return _filler_words()


@lru_cache(maxsize=1)
def _filler_words() -> tuple[str, ...]:
    raw = files("evalkit_prompts").joinpath("stress/filler_words.txt").read_text(encoding="utf-8")
    return tuple(w.strip() for w in raw.splitlines() if w.strip() and not w.startswith("#"))


def random_code(rng: random.Random) -> str:
    """A secret code like `KQZX-WMTA-PLRD` (letters only, matches `[A-Z0-9-]+`)."""
    return "-".join("".join(rng.choice(CODE_LETTERS) for _ in range(4)) for _ in range(3))


@lru_cache(maxsize=64)
def _filler_sentences(seed: int, count: int) -> tuple[str, ...]:
    # Cached because fitting a prompt to a token count rebuilds the same text several times.
    rng = random.Random(seed)
    words = _filler_words()
    out = []
    for _ in range(count):
        n = rng.randint(8, 16)
        ws = [rng.choice(words) for _ in range(n)]
        out.append(ws[0].capitalize() + " " + " ".join(ws[1:]) + ".")
    return tuple(out)


def long_prompt_text(spec: LongSpec, sentences: int) -> str:
    """The first word, `sentences` seeded filler sentences with the code sentence inside, then the question."""
    # Generate in blocks of 256 so that a longer prompt's filler starts with a shorter one's (stable fitting).
    block = max(256, -(-sentences // 256) * 256)
    filler = list(_filler_sentences(spec.filler_seed, block)[:sentences])
    at = min(len(filler), round(spec.code_at * len(filler)))
    filler.insert(at, f"The secret code is {spec.code}.")
    body = " ".join(filler)
    salt = f"Run {spec.salt}. " if spec.salt else ""
    return f"{salt}{spec.first_word.capitalize()}: {body}\n\n{LONG_QUESTION}"


_TOKEN_RE = re.compile(r"\s*\w+|\s*[^\w\s]")


def local_token_count(text: str) -> int:
    """Tokens by the sim's rule (docs/conventions.md); the dry run's estimate when no server can count."""
    return len(_TOKEN_RE.findall(text))


def chat_tokens_local(messages: list[dict[str, str]]) -> int:
    """A chat prompt's tokens by the sim's rule: per message tokens + 4, plus 2."""
    return sum(local_token_count(m["content"]) + 4 for m in messages) + 2
