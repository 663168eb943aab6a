"""Variants of a text-generation model measured on generation (bundler.text.quality): greedy-token
agreement with fp32 on the check prompts and perplexity change on the check text (or on held-out
texts given with --validation), through the export's tokenizer; recorded in bundle.json and
judged by `--quantize auto`."""

from __future__ import annotations

import json
import math

import pytest

from bundler.text.quality import CHECK_TEXT, agreement, measure_generation, reference
from bundler.variants.int4_options import Int4Options, for_generation
from bundler.variants.registry import make_variant
from tests import decoder_models
from tests.conftest import run_cli


@pytest.fixture(scope="module")
def export(tmp_path_factory: pytest.TempPathFactory) -> decoder_models.Export:
    return decoder_models.gpt2_folder(tmp_path_factory.mktemp("quality") / "model")


def test_agreement_counts_tokens_before_the_first_difference() -> None:
    assert agreement([[1, 2, 3, 4]], [[1, 2, 3, 4]]) == 1.0
    # after parting, the texts differ: a later match (4) does not count
    assert agreement([[1, 2, 3, 4], [5, 6]], [[1, 9, 3, 4], [5, 6]]) == 3 / 6
    assert agreement([[1, 2, 3, 4]], [[1, 2]]) == 0.5  # stopped early (EOS)


def test_fp32_perplexity_is_the_torch_models_and_itself_agrees(export, tmp_path) -> None:
    import torch

    check = reference(export.onnx, export.folder)
    assert len(check.texts) == len(CHECK_TEXT) and len(check.prompts) == 4
    with torch.no_grad():  # transformers' own loss on the same ids (mean over next tokens)
        losses = [(export.model(torch.tensor([ids]), labels=torch.tensor([ids])).loss.item(),
                   len(ids) - 1) for ids in check.texts]
    torch_nll = sum(loss * n for loss, n in losses) / sum(n for _, n in losses)
    assert check.nll == pytest.approx(torch_nll, rel=1e-4)
    same = measure_generation(check, export.onnx)
    assert (same.tokens, same.perplexity, same.top1_agreement) == (1.0, 1.0, 1.0)
    assert same.steps == sum(map(len, check.tokens)) and same.measured_on == "check-text"


def test_the_check_fits_a_model_with_few_positions(tmp_path) -> None:
    """Prompt plus steps, and the check text, cut to the model's 40 positions: a longer run
    failed in onnxruntime's position Gather."""
    short = decoder_models.gpt2_folder(tmp_path / "model", positions=40)
    check = reference(short.onnx, short.folder)
    assert all(len(ids) + len(new) <= 40 for ids, new in zip(check.prompts, check.tokens,
                                                               strict=True))
    assert max(map(len, check.texts)) == 40


def test_a_quantized_variant_is_measured_against_fp32s_runs(export, tmp_path) -> None:
    check = reference(export.onnx, export.folder)
    variant = tmp_path / "int8.onnx"
    make_variant("int8", export.onnx, variant)
    metrics = measure_generation(check, variant)
    with_own = reference(variant, export.folder)  # the variant's own greedy tokens and nll
    assert metrics.tokens == agreement(check.tokens, with_own.tokens) < 1.0
    assert metrics.perplexity == pytest.approx(math.exp(with_own.nll - check.nll), rel=1e-9)
    assert metrics.cosine < 1.0 and metrics.rows == sum(len(ids) for ids in check.texts)


def test_auto_picks_a_generation_bundles_variant_by_tokens_and_perplexity(export, tmp_path):
    output = tmp_path / "bundle"
    result = run_cli("build", export.folder, "-o", output, "--quantize", "auto", "--variants",
                     "fp32,fp16,int4", "--no-verify")
    assert result.returncode == 0, result.stderr
    bundle = json.loads((output / "bundle.json").read_text(encoding="utf-8"))
    selection = bundle["selection"]
    assert selection["budget"] == "tokens>=0.9,perplexity<=1.05"
    candidates = {c["name"]: c for c in selection["candidates"]}
    for candidate in candidates.values():
        accuracy = candidate["accuracy"]
        assert accuracy["data"] == "check-text" and accuracy["samples"] == len(CHECK_TEXT)
        fits = accuracy["tokens_agreement"] >= 0.9 and accuracy["perplexity_ratio"] <= 1.05
        assert candidate["within_budget"] == fits
    assert candidates["fp32"]["accuracy"]["tokens_agreement"] == 1.0
    # without browser timings, the smallest within budget ships
    fitting = [c for c in candidates.values() if c["within_budget"]]
    assert selection["chosen"] == min(fitting, key=lambda c: c["bytes"])["name"]
    assert [v["name"] for v in bundle["sessions"][0]["variants"]] == [selection["chosen"]]


def test_validation_texts_are_the_held_out_text_of_perplexity(export, tmp_path) -> None:
    held_out = ["A lighthouse keeper counted the ships that passed in the night.",
                "Rain fell on the market square while the bakers opened their doors.",
                "x"]  # a text of one token predicts nothing: left out
    check = reference(export.onnx, export.folder, texts=held_out)
    assert check.data == "validation" and len(check.texts) == 2
    assert check.nll != reference(export.onnx, export.folder).nll  # other text, other figure
    path = tmp_path / "held-out.txt"
    path.write_text("\n".join(held_out) + "\n", encoding="utf-8")
    output = tmp_path / "bundle"
    result = run_cli("build", export.folder, "-o", output, "--quantize", "auto", "--variants",
                     "fp32,int4", "--no-verify", "--validation", path)
    assert result.returncode == 0, result.stderr
    bundle = json.loads((output / "bundle.json").read_text(encoding="utf-8"))
    candidates = {c["name"]: c["accuracy"] for c in bundle["selection"]["candidates"]}
    variant = tmp_path / "int4.onnx"
    made = make_variant("int4", export.onnx, variant, int4=for_generation(Int4Options()))
    expected = measure_generation(check, variant, made.native_config)
    assert candidates["int4"]["data"] == "validation" and candidates["int4"]["samples"] == 2
    assert candidates["int4"]["perplexity_ratio"] == pytest.approx(expected.perplexity, rel=1e-5)
    assert candidates["fp32"]["perplexity_ratio"] == 1.0
    # bundle test's --validation takes texts for encoders and classifiers only, and says so
    result = run_cli("test", output, "--validation", path)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "a text-generation bundle's texts are judged when it is built" in result.stderr
