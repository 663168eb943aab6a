"""Which variant is the default: the one rule, for what a build writes and what a reader picks.

bundle.json's `default_variant` is a variant name, or a map from execution provider to one.
`default_variant(value, ep)` is the variant `load()` picks on `ep` when not told which; the page's
copy of the rule is `pickVariant` in web/bundle.core.mjs, and tests/data/default_variant_cases.json
holds the cases both are tested on. `default_to_ship` is the value a build writes, `per_ep_default`
the value of a choice made per EP (auto's).

Pure Python (no onnx or onnxruntime), so the options code uses it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

DefaultVariant = str | dict[str, str]  # a variant name, or one per execution provider


def default_variant(value: str | Mapping[str, str], ep: str) -> str:
    """The variant picked on `ep`: `value` when it is a name; when it is a map per EP, its entry
    for `ep`, else (an EP it does not name) its first entry."""
    if isinstance(value, str):
        return value
    return value.get(ep, next(iter(value.values())))


def named_defaults(value: str | Mapping[str, str]) -> list[str]:
    """Every variant `value` names, once each, in its order: the variants some EP picks by
    default."""
    return [value] if isinstance(value, str) else list(dict.fromkeys(value.values()))


def per_ep_default(by_ep: Mapping[str, str]) -> DefaultVariant:
    """The default of a choice made on each EP (`by_ep`, not empty): one name where every EP chose
    the same, else the map."""
    names = named_defaults(by_ep)
    return names[0] if len(names) == 1 else dict(by_ep)


def default_to_ship(shipped: Sequence[str], given: DefaultVariant | None = None,
                    preferred: str | None = None) -> DefaultVariant:
    """The default a build writes: the one `given` (the user's, or auto's choice), else
    `preferred` when it ships, else the first variant shipped."""
    if given:
        return given
    return preferred if preferred in shipped else shipped[0]
