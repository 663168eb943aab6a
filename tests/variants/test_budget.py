"""The error budget: parsing, bounds and explanations."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest

from bundler.errors import ConfigError
from bundler.variants.budget import (
    DEFAULT_BUDGET,
    budget_for,
    default_budget,
    parse_budget,
)
from bundler.variants.metrics import Metrics


def test_parse_budget() -> None:
    budget = parse_budget(" cosine >= 0.999, top1>=0.99,max_abs<=0.01 , mean_rel<=1e-2")
    assert [key for key, _ in budget.terms] == ["cosine", "top1", "max_abs", "mean_rel"]
    # parsed decimals: a tolerance far below the given digits
    assert [bound for _, bound in budget.terms] == pytest.approx([0.999, 0.99, 0.01, 0.01],
                                                                 abs=1e-12)
    assert str(budget) == "cosine>=0.999,top1>=0.99,max_abs<=0.01,mean_rel<=0.01"
    assert parse_budget(str(DEFAULT_BUDGET)) == DEFAULT_BUDGET


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "the error budget is empty"),
        ("cosine>=0.999,psnr>=30", "'psnr>=30' has unknown key 'psnr'; accepted: cosine>=, top1>="),
        ("cosine<=0.999", "cosine takes >= \\(a lower bound\\)"),
        ("max_abs>=0.1", "max_abs takes <= \\(an upper bound\\)"),
        ("cosine>=high", "'high' is not a number"),
        ("cosine 0.999", "is not KEY>=VALUE or KEY<=VALUE; accepted: cosine>="),
        ("top1>=1.5", "top1 must be between 0 and 1"),
        ("cosine>=0.9,cosine>=0.99", "names cosine twice"),
        ("cosine>=0.9,", "term '' is not KEY>=VALUE"),
    ],
)
def test_parse_budget_errors(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_budget(text)


def test_budget_accepts_and_explains() -> None:
    budget = parse_budget("cosine>=0.999,top1>=0.99,max_abs<=0.05")
    good = Metrics(max_abs=0.01, mean_rel=0.001, cosine=0.9995, top1_agreement=1.0)
    bad = Metrics(max_abs=0.2, mean_rel=0.001, cosine=0.998, top1_agreement=0.995)
    no_classes = Metrics(max_abs=0.01, mean_rel=0.001, cosine=0.9995, top1_agreement=None)

    assert budget.accepts(good) and budget.accepts(no_classes)
    assert budget.explain(good) == "within budget (cosine>=0.999,top1>=0.99,max_abs<=0.05)"
    assert not budget.accepts(bad)
    assert budget.explain(bad) == "cosine 0.998 is not >= 0.999; max_abs 0.2 is not <= 0.05"


def test_a_budget_survives_its_own_string() -> None:
    # bundle.json and the options keep the string form; six significant digits would turn
    # cosine>=0.9999995 into cosine>=1
    text = "cosine>=0.9999995,max_abs<=1,mean_rel<=1e-05"
    assert str(parse_budget(text)) == text
    assert str(parse_budget(str(parse_budget(text)))) == text


def test_budget_kinds_and_plan_import_neither_numpy_nor_onnxruntime() -> None:
    code = (
        "import sys\n"
        "from bundler.variants.budget import parse_budget\n"
        "from bundler.variants.kinds import VARIANT_KINDS\n"
        "from bundler.variants.plan import variants_to_make\n"
        "import bundler.bundle.options\n"
        "parse_budget('cosine>=0.999'); variants_to_make('auto', None, None)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in"
        " ('numpy', 'onnx', 'onnxruntime')))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True)
    assert result.stdout.strip() == "[]"


def test_decoded_keys_are_judged_by_their_wilson_bound() -> None:
    from bundler.variants.metrics import Agreement

    budget = parse_budget("boxes>=0.99")
    base = Metrics(0.0, 0.0, 1.0, None, per_sample=((1.0, 0.0),) * 100, measured_on="validation")
    many = dataclasses.replace(base, decoded=(Agreement("boxes", 1000, 1000),))
    assert budget.accepts(many) and budget.shortfall(many) is None
    few = dataclasses.replace(base, decoded=(Agreement("boxes", 100, 100),))
    assert budget.failures(few) == [
        "boxes 0.963 (95% lower bound of 100 boxes; estimate 1) is not >= 0.99"]
    assert budget.shortfall(few) == (
        "100 held-out samples (validation) cannot show boxes>=0.99: even if all agree, its 95%"
        " lower bound is 0.963; it takes at least 381 samples (pass --validation)")
    none = dataclasses.replace(base, decoded=(Agreement("boxes", 0, 0),))
    assert budget.failures(none) == ["boxes: none in the 100 samples to compare"]
    assert budget.accepts(none, exact=True)  # fp32 is exact by construction
    assert "have no boxes to compare" in str(budget.shortfall(none))
    generated = dataclasses.replace(many, measured_on="generated")
    assert budget.failures(generated) == ["boxes cannot be shown on generated inputs"]
    assert parse_budget("labels>=0.99,frames>=0.98,boxes>=0.9")  # every decoded key parses
    with pytest.raises(ConfigError, match="labels must be between 0 and 1"):
        parse_budget("labels>=2")


def test_generation_terms_judge_tokens_and_perplexity() -> None:
    budget = parse_budget("tokens>=0.9, perplexity<=1.05")
    assert str(budget) == "tokens>=0.9,perplexity<=1.05"
    logits = {"max_abs": 0.1, "mean_rel": 0.01, "cosine": 0.99, "top1_agreement": 0.9}
    kept = Metrics(**logits, tokens=0.95, perplexity=1.01, steps=128)
    drifted = Metrics(**logits, tokens=0.5, perplexity=1.2, steps=128)
    assert budget.accepts(kept)
    assert budget.explain(drifted) == "tokens 0.5 is not >= 0.9; perplexity 1.2 is not <= 1.05"
    # a bundle of another task has no generation to judge: never vacuously within
    assert budget.failures(Metrics(**logits)) == [
        "tokens is measured on text-generation and speech-recognition bundles only",
        "perplexity is measured on text-generation and speech-recognition bundles only"]
    assert budget_for(None, generation=True) == default_budget("text-generation")
    assert budget_for(None, generation=False) == DEFAULT_BUDGET
    assert budget_for("tokens>=1", generation=False) == parse_budget("tokens>=1")
    with pytest.raises(ConfigError, match="tokens must be between 0 and 1"):
        parse_budget("tokens>=2")
    with pytest.raises(ConfigError, match="perplexity takes <="):
        parse_budget("perplexity>=1")
