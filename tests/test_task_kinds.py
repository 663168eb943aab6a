"""The task kind registry: every kind is the module of its name and has every part (settings,
resolution, graph, twin pipeline, check, demo, `bundle run` report, browser twin), and `--task`
offers exactly the registered kinds (and the browser's KINDS table the same ones)."""

from __future__ import annotations

import dataclasses
import importlib
import json
import re
import subprocess
import typing

import pytest

from bundler.bundle.layout import TASK_MODULES
from bundler.bundle.options import OPTIONS, load_options
from bundler.cli import build
from bundler.resources import resource
from bundler.site.npmtools import node_executable
from bundler.tasks.check import TaskComparison, columns
from bundler.tasks.kinds.registry import GENERIC, KINDS, TASK_KINDS, kind_of
from bundler.tasks.spec import TaskSpec, parse_task
from tests.conftest import run_cli

SETTINGS = {field.name for field in dataclasses.fields(TaskSpec)} - {"kind", "given"}
TASKS = [name for name in TASK_KINDS if name != GENERIC]
WEB_TASKS = resource("web") / "tasks"


@pytest.mark.parametrize("name", TASK_KINDS)
def test_every_kind_is_the_module_of_its_name(name: str):
    kind = importlib.import_module(f"bundler.tasks.kinds.{name.replace('-', '_')}").KIND
    assert kind is KINDS[name] is kind_of(name) and kind.name == name
    assert set(kind.settings) <= SETTINGS and len(set(kind.settings)) == len(kind.settings)


def test_generic_is_the_default_and_has_no_task_parts():
    assert TaskSpec().kind == GENERIC == TASK_KINDS[0]
    parts = [field.name for field in dataclasses.fields(KINDS[GENERIC])
             if field.name not in ("name", "settings")]
    assert all(getattr(KINDS[GENERIC], part) in (None, False) for part in parts)


@pytest.mark.parametrize("name", TASKS)
def test_every_task_kind_has_every_part(name: str):
    kind = KINDS[name]
    assert kind.media in ("image", "audio", "text") and kind.answers and kind.heading
    assert kind.compared
    assert kind.method and re.search(rf"export (async )?function {kind.method}\(",
                                     (WEB_TASKS / "index.mjs").read_text(encoding="utf-8"))
    assert kind.web_module in TASK_MODULES and (WEB_TASKS / kind.web_module).is_file()
    assert callable(kind.looks_like) and callable(kind.resolve) and callable(kind.compare)
    assert callable(kind.report)
    # an image kind is fed pixels through the prepended graph and answers from the output; a
    # kind whose graph is only a speed-up (text-generation's new key/value slices) says so
    assert (kind.postprocess is not None) == (kind.media == "image")
    assert (kind.preprocess is not None) == (kind.media == "image" or kind.preprocess_optional)
    # the check: an answer against itself passes, against nothing fails
    answer: list = [{"label": "a", "index": 0, "score": 0.9, "start": 0.0, "end": 0.1,
                     "box": {"x": 1.0, "y": 2.0, "width": 3.0, "height": 4.0}}]
    if kind.media == "text":  # an answer per text: its vector, its classes or its entities
        answer = {"embed": [[0.6, 0.8]],
                  "tokens": [[{"entity": "PER", "score": 0.9, "start": 0, "end": 3,
                               "word": "Ada"}]],
                  "generate": [{"tokens": [5, 7], "logits": [[1.0, 2.0], [3.0, 0.5]],
                                "range": [1.0, 2.5]}]}.get(kind.method, [answer])
    if kind.method == "transcribe":  # an answer per audio: its windows' tokens and logits
        probed = {"at": [[5, 6], [7, 8], [0, 1]], "logits": [[1.0, 0.0], [1.0, 0.5], [1.0, 0.0]],
                  "range": [2.0, 2.0, 2.0]}
        answer = [{"windows": [[5, 7]], "tokens": [5, 7], "text": "a",
                   "steps": [{**probed, "raw": probed["logits"]}],
                   "logits": [probed["logits"]]}]
    same = TaskComparison("wasm", "fp32", "file")
    kind.compare(answer, answer, same, 1e-4)
    assert same.passed, same.error
    other = TaskComparison("wasm", "fp32", "file")
    kind.compare(answer, [], other, 1e-4)
    assert not other.passed
    if kind.method in ("generate", "transcribe"):  # greedy tokens agree or not
        parted = [{**answer[0], "tokens": [5, 8]}]
        differs = TaskComparison("wasm", "fp32", "file")
        kind.compare(answer, parted, differs, 1e-4)
        assert not differs.passed and "part from native's at step 1 ([8] for [7])" in str(
            differs.error)


def test_every_task_setting_applies_to_some_kind():
    assert set().union(*(kind.settings for kind in KINDS.values())) == SETTINGS


def test_task_choices_come_from_the_registry(tmp_path):
    assert typing.get_args(typing.get_type_hints(TaskSpec)["kind"]) == TASK_KINDS
    assert all(name in OPTIONS["task"].help for name in TASK_KINDS)
    for name in TASK_KINDS:
        assert parse_task(name, tmp_path).kind == name
        assert load_options(None, {"task": {"kind": name}}, cwd=tmp_path).task.kind == name
    flag = next(param for param in build.params if param.name == "task")
    assert flag.help == OPTIONS["task"].help
    result = run_cli("build", "--task", "segmentation", "-o", tmp_path / "dist")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert f"expected one of {', '.join(TASK_KINDS)}, got 'segmentation'" in result.stderr, (
        result.stderr)


def test_the_browser_kinds_table_matches_the_registry(tmp_path):
    """web/tasks/index.mjs's KINDS (what the demo dispatches on) has each task kind's method and
    media, as the Python kinds say."""
    script = tmp_path / "kinds.mjs"
    script.write_text(f"import {{ KINDS }} from '{(WEB_TASKS / 'index.mjs').as_uri()}';\n"
                      "process.stdout.write(JSON.stringify(KINDS));\n", encoding="utf-8")
    result = subprocess.run([str(node_executable()), str(script)], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {
        name: {"method": KINDS[name].method, "media": KINDS[name].media} for name in TASKS}


def test_a_speech_window_parting_at_a_near_tie_is_a_tie_not_a_failure():
    """Where the browser's window tokens part from native's, native's scores of both tokens at
    that step decide: within the tolerance of the logit range a tie (said, passing), else, or
    when the browser's token is not among native's probes, a failure."""
    compare = kind_of("automatic-speech-recognition").compare
    assert compare is not None
    logits = [[2.0, 1.0, 0.0], [1.0, 0.999, 0.0], [1.0, 0.0, -1.0]]
    steps = {"at": [[5, 6, 9], [7, 8, 9], [0, 1, 2]], "logits": logits, "raw": logits,
             "range": [10.0, 10.0, 10.0]}
    native = [{"windows": [[5, 7]], "tokens": [5, 7], "steps": [steps]}]

    def compared(window: list[int], tolerance: float = 1e-3) -> TaskComparison:
        result = TaskComparison("wasm", "fp32", "file")
        compare(native, [{"windows": [window], "tokens": window, "logits": [logits]}], result,
                tolerance)
        return result

    tie = compared([5, 8, 3])
    assert tie.passed and tie.ties == [
        "transcript 0 window 0: a near-tie at step 1: native's scores of its 7 and the browser's"
        " 8 differ by 0.0001 of the logit range (tolerance 0.001); the rest of the window is"
        " not compared"]
    assert "near-tie at step 1" in tie.row("automatic-speech-recognition")[-1]
    for window, tolerance in (([5, 8], 1e-5), ([6, 7], 1e-3), ([5, 3], 1e-3), ([5], 1e-3)):
        parted = compared(window, tolerance)
        assert not parted.passed and not parted.ties and "part from native's" in str(
            parted.error)
    assert compared([5, 7]).passed and not compared([5, 7]).ties


def test_a_speech_windows_teacher_forced_logits_are_compared_with_natives():
    """Every window's logits, the browser's decoder fed native's tokens, within the tolerance of
    each step's logit range plus native's own spread (a quantized combination's; the worst of the
    transcripts'), whatever the tokens: the worst ratio is the row's score difference; one out of
    bound fails the row naming the transcript, window and step, even where the tokens agree."""
    compare = kind_of("automatic-speech-recognition").compare
    assert compare is not None
    raw = [[10.0, 0.0], [8.0, 2.0]]
    steps = {"at": [[5, 6], [7, 6]], "logits": raw, "raw": raw, "range": [10.0, 10.0]}
    window = {"windows": [[5, 7]], "tokens": [5, 7], "steps": [steps]}
    near = [[[10.0, 0.0], [8.15, 2.0]]]  # 1.5 % of the range off at step 1
    far = [[[10.0, 0.0], [8.3, 2.0]]]

    def compared(native: list[dict], logits: list, tokens: list[int] | None = None
                 ) -> TaskComparison:
        result = TaskComparison("wasm", "int4", "speech.wav")
        got = {"windows": [tokens or [5, 7]], "tokens": tokens or [5, 7], "logits": logits}
        compare(native, [got] * len(native), result, 0.01)
        return result

    alone = compared([window], near)
    assert alone.error == ("transcript 0 window 0: the teacher-forced logits differ at step 1 by"
                           " 0.015 of the logit range (tolerance 0.01)")
    spread = [window, {**window, "spread": 0.013}]  # measured on the second transcript
    within = compared(spread, near)
    assert within.passed and within.worst_score_difference == pytest.approx(0.015)
    assert within.row("automatic-speech-recognition")[5] == "0.015"
    beyond = compared(spread, far)
    assert beyond.error == ("transcript 0 window 0: the teacher-forced logits differ at step 1"
                            " by 0.03 of the logit range (tolerance 0.01 + native's own spread"
                            " 0.013)")
    # tokens parted (not at a near-tie) fail; with the logits out of bound too, the logits
    # are named: they are compared first
    assert "part from native's" in str(compared([window], [raw], [5, 6]).error)
    assert "teacher-forced logits differ" in str(compared([window], far, [5, 6]).error)
    missing = compared([window], [])
    assert missing.error == "transcript 0: teacher-forced logits of 0 windows for native's 1"
    short = compared([window], [raw[:1]])
    assert "gave teacher-forced logits of shape (1, 2) for native's (2, 2)" in str(short.error)


@pytest.mark.parametrize(("kind", "counted", "difference"), [
    ("feature-extraction", "texts (native, browser)", "worst 1 - cosine"),
    ("text-generation", "prompts (native, browser)", "worst logit difference / range"),
    ("object-detection", "detections (native, browser)", "worst score difference"),
])
def test_the_task_check_table_names_what_each_kind_compares(kind, counted, difference):
    headings = columns(kind)
    assert headings[4:6] == [counted, difference]
    assert ("lowest IoU" in headings) == (kind == "object-detection")
    row = TaskComparison("wasm", "fp32", "check-texts.json", 3, 3, 0.5, 0.97).row(kind)
    assert len(row) == len(headings) and row[-1] == "pass"
