"""Which variants a build makes and which one `load()` picks (for `auto`, select.py chooses).

The rule for `quantize`, `variants` and `default_variant` (docs/how-to/quantize.md says the
same):

- neither quantize nor variants: fp32 ships, and is the default;
- `quantize = K`: K ships; with `variants = [A, B]` too, K, A and B ship (K first, no repeats);
  K is the default;
- `variants = [A, B]` alone: A and B ship; A is the default;
- `default_variant` (a name, or one per EP) picks another default among those that ship, and
  naming one that does not ship is an error;
- `quantize = auto`: the candidates (`variants`, else every kind) are made, measured and checked
  in the browser, and select.py ships one. Auto chooses the default, so `default_variant` with
  auto is an error.

Pure Python (no onnx or onnxruntime), so the options code uses it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple, cast

from bundler.errors import ConfigError
from bundler.variants.default import DefaultVariant, default_to_ship, named_defaults
from bundler.variants.kinds import VARIANT_KINDS, VariantKind


class VariantPlan(NamedTuple):
    kinds: tuple[VariantKind, ...]  # what ships, or the candidates of auto
    default: DefaultVariant | None  # None: auto chooses

    @property
    def auto(self) -> bool:
        return self.default is None


def variants_to_make(
    quantize: str | None,
    variants: Sequence[str] | None,
    default_variant: str | Mapping[str, str] | None,
) -> VariantPlan:
    """The plan for these three options (None: not given); a one-line ConfigError for a
    contradiction."""
    listed = _kinds(variants or ())
    if quantize == "auto":
        if default_variant is not None:
            raise ConfigError(
                "default_variant: auto chooses the default variant; drop default_variant, or"
                " ship fixed variants with variants = [...] and default_variant"
            )
        return VariantPlan(listed or VARIANT_KINDS, None)
    kinds = _kinds([quantize, *listed] if quantize else listed) or ("fp32",)
    given = None if default_variant is None else _shipped_default(default_variant, kinds)
    return VariantPlan(kinds, default_to_ship(kinds, given))


def _kinds(names: Sequence[str]) -> tuple[VariantKind, ...]:
    """`names` in order without repeats, each a known kind."""
    unknown = [name for name in names if name not in VARIANT_KINDS]
    if unknown:
        raise ConfigError(
            f"variants: unknown {unknown[0]!r}; choose from {', '.join(VARIANT_KINDS)}"
        )
    return cast(tuple[VariantKind, ...], tuple(dict.fromkeys(names)))


def _shipped_default(
    default_variant: str | Mapping[str, str], kinds: Sequence[str]
) -> DefaultVariant:
    default = default_variant if isinstance(default_variant, str) else dict(default_variant)
    missing = [name for name in named_defaults(default) if name not in kinds]
    if missing:
        raise ConfigError(
            f"default_variant: {missing[0]!r} is not shipped (variants: {', '.join(kinds)})"
        )
    return default
