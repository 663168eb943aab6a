"""The default-variant rule (bundler.variants.default): the cases web/bundle.core.mjs's pickVariant
is tested on too (tests/data/default_variant_cases.json, run in Node by test_bundle_node.py)."""

import json
from pathlib import Path

import pytest

from bundler.variants.default import default_to_ship, default_variant

CASES = json.loads((Path(__file__).parents[1] / "data" / "default_variant_cases.json")
                   .read_text(encoding="utf-8"))


@pytest.mark.parametrize("case", CASES, ids=lambda case: f"{case['default_variant']}@{case['ep']}")
def test_default_variant_picks_as_the_page_does(case: dict) -> None:
    assert default_variant(case["default_variant"], case["ep"]) == case["picks"]


@pytest.mark.parametrize(("shipped", "given", "preferred", "written"), [
    (("fp32",), None, None, "fp32"),
    (("int8", "fp32"), None, None, "int8"),  # the first shipped
    (("fp32", "int8-static"), None, "int8-static", "int8-static"),  # edge's recommendation
    (("fp32",), None, "int8-static", "fp32"),  # recommended but not shipped
    (("fp32", "int8"), "int8", "fp32", "int8"),  # the user's (or auto's) choice wins
    (("fp32", "int8"), {"webgpu": "fp32", "wasm": "int8"}, None,
     {"webgpu": "fp32", "wasm": "int8"}),
])
def test_default_to_ship(shipped, given, preferred, written) -> None:
    assert default_to_ship(shipped, given, preferred) == written
