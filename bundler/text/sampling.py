"""The sampling spec: how a generation step turns logits into a token id, the same in Python (this
module, numpy) and in the browser (web/text/sampling.mjs), so that a seeded run draws the same
tokens on both sides. Every step below uses only IEEE-754 float64 +, -, *, /, comparisons and
floor, in the stated order, so both sides compute bit-identical values; Math.exp and numpy's exp
may differ in the last bit, hence the spec's own `exp64`.

1. **Scores.** The step's logits (float32 from the model) are widened to float64 (exact).
2. **Repetition penalty** (HF semantics), when `repetition_penalty != 1`: for every distinct id in
   `seen` (the prompt's ids and those generated so far), a score < 0 is multiplied by the
   penalty, any other divided by it.
3. **Greedy** when `do_sample` is false or `temperature == 0`: the argmax, lowest id on ties. No
   uniform is drawn.
4. **Temperature**: every score divided by `temperature`.
5. **Top-k**, when `0 < top_k < vocab`: the threshold is the k-th largest score counting
   duplicates; scores below it become -inf (ties at the threshold stay, as in HF).
6. **Top-p** (nucleus), when `top_p < 1`: weights `w[i] = exp64(score[i] - max)` (0 for
   -inf); `total` = their sum in id order. The kept set is the shortest prefix of the finite
   scores in order (score descending, id ascending) whose running sum of weights (in that order)
   is >= `top_p * total`, at least one token (all of them if rounding leaves the sum short); the
   rest become -inf. (Summing the total in id order lets an implementation sort only the top
   scores.)
7. **Draw**: weights `w[i] = exp64(score[i] - max)` (0 for -inf); `total` = their sum in id order;
   one uniform `u` in [0, 1); the token is the lowest id whose running sum (id order) is
   `> u * total` with `w[i] > 0`, else the highest id with `w[i] > 0` (the rounding edge). This
   is the inverse CDF of the float64 softmax, without dividing by `total`.

**exp64(x)** for x <= 0: 0 when x < -700 (below 1e-304, nothing to draw); else
`k = floor(x / LN2 + 0.5)`, `r = (x - k * LN2_HI) - k * LN2_LO` (fdlibm's split of ln 2),
`p` = Horner's form of the Taylor series of exp(r) to degree 13 (`c[0] = 1`, `c[n] = c[n-1] / n`,
`p = c[13]`, then `p = p * r + c[n]` for n = 12 down to 0), and the result `p * 2**k` (exact).

**PRNG**: mulberry32 over a uint32 seed (`a = a + 0x6D2B79F5`; `t = imul(a ^ a >>> 15, a | 1)`;
`t = (t + imul(t ^ t >>> 7, t | 61)) ^ t`; out `t ^ t >>> 14`, all mod 2**32). A uniform takes
two outputs `x`, `y`: `u = ((x >>> 5) * 2**26 + (y >>> 6)) / 2**53`, exactly representable. One
uniform per sampled step; greedy steps draw none. A sampler is seeded once per generation call.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

import numpy as np

from bundler.errors import ConfigError

MASK32 = 0xFFFFFFFF
LN2 = 0.6931471805599453  # the float64 nearest ln 2, used only to pick k
LN2_HI = 6.93147180369123816490e-01
LN2_LO = 1.90821492927058770002e-10
EXP_FLOOR = -700.0
DEGREE = 13


def _coefficients() -> list[float]:
    coefficients = [1.0]
    for n in range(1, DEGREE + 1):
        coefficients.append(coefficients[-1] / n)
    return coefficients


COEFFICIENTS = _coefficients()


@dataclasses.dataclass(frozen=True)
class SamplingOptions:
    """A generation call's sampling settings; the defaults are greedy decoding."""

    do_sample: bool = False
    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    repetition_penalty: float = 1.0
    seed: int = 0

    def __post_init__(self) -> None:
        if not self.temperature >= 0:
            raise ConfigError(f"temperature must be >= 0, got {self.temperature}")
        if isinstance(self.top_k, bool) or not isinstance(self.top_k, int) or self.top_k < 0:
            raise ConfigError(f"top_k must be an integer >= 0, got {self.top_k}")
        if not 0 < self.top_p <= 1:
            raise ConfigError(f"top_p must be in (0, 1], got {self.top_p}")
        if not self.repetition_penalty > 0:
            raise ConfigError(f"repetition_penalty must be > 0, got {self.repetition_penalty}")
        if not isinstance(self.seed, int) or not 0 <= self.seed <= MASK32:
            raise ConfigError(f"seed must be an integer in [0, 2**32), got {self.seed}")

    @property
    def greedy(self) -> bool:
        return not self.do_sample or self.temperature == 0


class Mulberry32:
    """The spec's PRNG: uint32 outputs and float64 uniforms in [0, 1)."""

    def __init__(self, seed: int) -> None:
        self.state = seed & MASK32

    def next_uint32(self) -> int:
        self.state = (self.state + 0x6D2B79F5) & MASK32
        a = self.state
        t = ((a ^ (a >> 15)) * (a | 1)) & MASK32
        t = ((t + (((t ^ (t >> 7)) * (t | 61)) & MASK32)) & MASK32) ^ t
        return (t ^ (t >> 14)) & MASK32

    def uniform(self) -> float:
        high, low = self.next_uint32() >> 5, self.next_uint32() >> 6
        return (high * 67108864 + low) / 9007199254740992


def exp64(x: np.ndarray) -> np.ndarray:
    """The spec's exp for x <= 0, elementwise, bit-identical to sampling.mjs's exp64."""
    x = np.asarray(x, dtype=np.float64)
    live = x >= EXP_FLOOR
    safe = np.where(live, x, 0.0)
    k = np.floor(safe / LN2 + 0.5)
    r = (safe - k * LN2_HI) - k * LN2_LO
    p = np.full_like(r, COEFFICIENTS[DEGREE])
    for coefficient in reversed(COEFFICIENTS[:DEGREE]):
        p = p * r + coefficient
    return np.where(live, np.ldexp(p, k.astype(np.int32)), 0.0)


def penalize(scores: np.ndarray, seen: Iterable[int], penalty: float) -> np.ndarray:
    """Step 2: scores of seen ids, < 0 multiplied by the penalty, others divided by it."""
    scores = scores.copy()
    ids = np.unique(np.fromiter(seen, dtype=np.int64))
    if penalty != 1 and ids.size:
        values = scores[ids]
        scores[ids] = np.where(values < 0, values * penalty, values / penalty)
    return scores


def argmax(scores: np.ndarray) -> int:
    """Step 3: the highest score, lowest id on ties (numpy's argmax picks the first)."""
    return int(np.argmax(scores))


def top_k_filter(scores: np.ndarray, top_k: int) -> np.ndarray:
    """Step 5: scores below the k-th largest (duplicates counted) become -inf."""
    if not 0 < top_k < scores.size:
        return scores
    threshold = np.sort(scores)[::-1][top_k - 1]
    return np.where(scores < threshold, -np.inf, scores)


def top_p_filter(scores: np.ndarray, top_p: float) -> np.ndarray:
    """Step 6: keeps the shortest prefix (score descending, id ascending) whose weight reaches
    top_p of the total; the rest become -inf."""
    if top_p >= 1:
        return scores
    weights = exp64(scores - np.max(scores))
    total = np.cumsum(weights)[-1]  # sequential in id order, as the spec's loop
    finite = np.flatnonzero(np.isfinite(scores))
    order = finite[np.lexsort((finite, -scores[finite]))]  # last key is the primary one
    running = np.cumsum(weights[order])
    reached = np.flatnonzero(running >= top_p * total)
    keep = int(reached[0]) + 1 if reached.size else order.size
    kept = np.full_like(scores, -np.inf)
    kept[order[:keep]] = scores[order[:keep]]
    return kept


def draw(scores: np.ndarray, uniform: float) -> int:
    """Step 7: the inverse-CDF draw of the float64 softmax of `scores` at `uniform`."""
    weights = exp64(scores - np.max(scores))
    running = np.cumsum(weights)
    hits = np.flatnonzero((running > uniform * running[-1]) & (weights > 0))
    return int(hits[0]) if hits.size else int(np.flatnonzero(weights > 0)[-1])


class Sampler:
    """One generation call's token chooser: `next(logits, seen)` applies the spec in order."""

    def __init__(self, options: SamplingOptions | None = None) -> None:
        self.options = options or SamplingOptions()
        self.random = Mulberry32(self.options.seed)

    def next(self, logits: np.ndarray, seen: Iterable[int] = ()) -> int:
        options = self.options
        scores = np.asarray(logits, dtype=np.float32).astype(np.float64).reshape(-1)
        scores = penalize(scores, seen, options.repetition_penalty)
        if options.greedy:
            return argmax(scores)
        scores = scores / options.temperature
        scores = top_p_filter(top_k_filter(scores, options.top_k), options.top_p)
        return draw(scores, self.random.uniform())
