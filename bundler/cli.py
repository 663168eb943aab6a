"""The `bundle` command: a thin click layer over the commands in bundler.commands.

The build options are not written here: each click option is made from its declaration in
bundler.bundle.options, so the flags, bundle.toml and the library can never disagree.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from bundler import __version__
from bundler.bundle.options import EXECUTION_PROVIDERS, OPTIONS
from bundler.errors import first_line
from bundler.verify.tolerance import tolerance_for

# bundler.edge.session.EP_PRIORITY, repeated so `bundle --help` does not import onnxruntime.
EP_PRIORITY_NAMES = ("tensorrt", "cuda", "openvino", "directml", "rocm", "coreml", "nnapi", "qnn",
                     "cpu")
CONVERSION = tolerance_for("conversion")  # bundle export's check of the exported model


def _click_option(key: str) -> Callable[[Callable], Callable]:
    declared = OPTIONS[key]
    return click.option(*declared.flags(key), key, default=None, multiple=declared.repeatable,
                        type=click.Choice(declared.choices) if declared.choices else None,
                        help=declared.help)


def _build_options(function: Callable) -> Callable:
    for key in reversed([key for key, declared in OPTIONS.items()
                         if declared.on_command_line and key != "output"]):
        function = _click_option(key)(function)
    return click.option("--config", type=click.Path(path_type=Path), default=None,
                        help="bundle.toml to read options from (default: ./bundle.toml if"
                             " present).")(function)


def _given(flags: dict[str, Any]) -> dict[str, Any]:
    """Click gives () for a repeatable flag that was not used; None means 'not given'."""
    return {key: (None if value == () else value) for key, value in flags.items()}


def _reporter():
    from bundler.console import TerminalReporter

    return TerminalReporter()


class _Commands(click.Group):
    """Runs a command with SIGTERM/SIGHUP acting as Ctrl-C (so cleanup runs); any error ends in
    one `Error:` line, with the traceback only under --debug."""

    def invoke(self, ctx: click.Context) -> object:
        from bundler.interrupts import signals_interrupt

        debug = ctx.params.get("debug", False)
        try:
            with signals_interrupt():
                return super().invoke(ctx)
        except (click.exceptions.Exit, click.Abort):
            raise
        except click.ClickException:
            if debug:
                traceback.print_exc()
            raise
        except Exception as error:
            if debug:
                raise
            raise click.ClickException(
                f"unexpected {first_line(error, typed=True)} (a bug in onnx-bundler: rerun with"
                " --debug for the traceback and report it)") from None


@click.group(cls=_Commands)
@click.version_option(__version__, prog_name="onnx-bundler")
@click.option("--debug", is_flag=True, help="Show the Python traceback of an error.")
def main(debug: bool) -> None:
    """Ship an ONNX model to the browser: a static web app on onnxruntime-web."""


@main.command()
@click.argument("model", required=False, type=click.Path(path_type=Path))
@_click_option("output")
@_build_options
@_click_option("hosts")
@_click_option("target")
@click.option("--force", is_flag=True, help="Replace a non-empty output folder.")
def build(model: Path | None, config: Path | None, force: bool, **flags: Any) -> None:
    """Build MODEL (default: the shipped digits example) into a static web app folder."""
    from bundler.bundle.options import load_options
    from bundler.commands.build import build as run_build

    options = load_options(config, {**_given(flags), "model": model})
    run_build(options=options, force=force, reporter=_reporter())


@main.command()
@click.argument("directory", type=click.Path(path_type=Path))
@_click_option("execution_providers")
@_click_option("dims")
@click.option("--report", type=click.Path(path_type=Path), default=None,
              help="Write the full report (comparisons, console output) as JSON here.")
@click.option("--fallback/--no-fallback", default=True,
              help="Also check that load() falls back to WASM without WebGPU (default).")
@_click_option("sample")
@_click_option("inputs")
@click.option("--image", "images", multiple=True, type=click.Path(path_type=Path),
              help="A task bundle: compare the browser's labels/boxes with the Python reference"
                   " on this image (repeat; default: a picture made in code).")
@click.option("--audio", "sounds", multiple=True, type=click.Path(path_type=Path),
              help="An audio-stream bundle: compare chunk scores on this .wav (repeat).")
@click.option("--text-file", "texts", multiple=True, type=click.Path(path_type=Path),
              help="A text bundle: compare embeddings, labels or entities on these texts (a JSON"
                   " list of"
                   " strings, or one text a line; repeat; default: built-in sentences).")
@click.option("--prompt", "prompts", multiple=True,
              help="A text-generation bundle: continue this prompt (repeat; default: the"
                   " built-in check prompts).")
@click.option("--steps", type=click.IntRange(1, 4096), default=None,
              help="A text-generation bundle: tokens compared per prompt (greedy ids, and"
                   " teacher-forced logits within tolerance; default 32).")
@click.option("--validation", type=click.Path(path_type=Path), default=None,
              help=".npz of real inputs (one array per input), or for a text bundle a .txt or"
                   " .jsonl of texts (one a line): report the shipped variant's agreement with"
                   " fp32 on them, judged by the build's budget with the same bounds as auto.")
@click.option("--original", type=click.Path(path_type=Path), default=None,
              help="With --validation: the model the bundle was built from, when it ships no"
                   " fp32 variant to compare with.")
def test(directory: Path, execution_providers: tuple[str, ...], dims: tuple[str, ...],
         report: Path | None, fallback: bool, sample: str | None,
         inputs: tuple[str, ...], images: tuple[Path, ...], sounds: tuple[Path, ...],
         texts: tuple[Path, ...], prompts: tuple[str, ...], steps: int | None,
         validation: Path | None, original: Path | None) -> None:
    """Prove in headless Chromium that DIRECTORY's model computes what native onnxruntime does."""
    from bundler.bundle.options import flag_of, validate
    from bundler.commands.test import check

    flags = _given({"execution_providers": execution_providers, "dims": dims, "sample": sample,
                    "inputs": inputs})
    given = validate({key: value for key, value in flags.items() if value is not None}, Path.cwd(),
                     spelling=flag_of)
    check(directory, execution_providers=given.get("execution_providers", EXECUTION_PROVIDERS),
          dims=given.get("dims"), report=report, check_fallback=fallback, reporter=_reporter(),
          sample=given.get("sample"), inputs=given.get("inputs"),
          task_files=(*images, *sounds, *texts), prompts=prompts, steps=steps,
          validation=validation, original=original)


@main.command()
@click.argument("directory", type=click.Path(path_type=Path))
@click.option("--ep", "execution_providers", multiple=True,
              help="Execution provider to measure (repeat; default: every one the bundle ships).")
@click.option("--variant", "variants", multiple=True,
              help="Variant to measure (repeat; default: every variant the bundle ships).")
@click.option("--runs", default=20, show_default=True, type=click.IntRange(1, 10_000),
              help="Steady-state runs per EP and variant, after 15 warm-up runs.")
@click.option("--threads", default=None, type=click.IntRange(1, 64),
              help="WASM threads in the browser (default: what load() chooses).")
@_click_option("dims")
@click.option("--json", "json_path", type=click.Path(path_type=Path), default=None,
              help="Write every figure (and each run's time) as JSON here.")
@click.option("--plot", "plot_path", type=click.Path(path_type=Path), default=None,
              help="Write a PNG of latency and size per variant (needs onnx-bundler[plot]).")
@click.option("--profile", is_flag=True,
              help="Also time each operator, in the browser and natively (top 10).")
@click.option("--prompt-tokens", default=16, show_default=True, type=click.IntRange(1, 100_000),
              help="Text generation: the prompt's length; a text encoder: each text's, in the"
                   " bundle's tokens.")
@click.option("--new-tokens", default=64, show_default=True, type=click.IntRange(1, 100_000),
              help="Text generation: the tokens each generate() call makes (fewer if it ends).")
@click.option("--calls", default=3, show_default=True, type=click.IntRange(1, 1000),
              help="Text generation, speech recognition and text encoders: generate(),"
                   " transcribe() calls per EP and variant, or the task's calls per batch; the"
                   " first is reported apart from the mean of the later ones.")
@click.option("--audio", type=click.Path(path_type=Path), default=None,
              help="Speech recognition: transcribe this .wav (default: the build's check"
                   " audio).")
def bench(directory: Path, execution_providers: tuple[str, ...], variants: tuple[str, ...],
          runs: int, threads: int | None, dims: tuple[str, ...], json_path: Path | None,
          plot_path: Path | None, profile: bool, prompt_tokens: int, new_tokens: int,
          calls: int, audio: Path | None) -> None:
    """Measure DIRECTORY's bundle in headless Chromium per EP and variant (cold load, first run,
    warm-up, steady state, bytes, memory) beside native onnxruntime on the same inputs; a
    text-generation bundle by its generate() calls (load, time to first token, prefill and
    decode tokens/s, bytes on the wire); a speech-recognition bundle by its transcribe() calls
    (real-time factor, encoder ms, decoder steps/s, first text, bytes on the wire); a text
    encoder by embed(), classify() or tokens() on batches of 1 and 8 texts (load, texts/s,
    bytes on the wire; with --dim, --profile or --plot, its model's single runs instead)."""
    from bundler.bundle.options import flag_of, validate
    from bundler.commands.bench import GenerationLengths
    from bundler.commands.bench import bench as run_bench

    flags = _given({"execution_providers": execution_providers, "dims": dims})
    given = validate({key: value for key, value in flags.items() if value is not None},
                     Path.cwd(), spelling=flag_of)
    run_bench(directory, execution_providers=given.get("execution_providers"),
              variants=variants or None, runs=runs, threads=threads, dims=given.get("dims"),
              json_path=json_path, plot_path=plot_path, profile=profile, reporter=_reporter(),
              generation=GenerationLengths(prompt_tokens, new_tokens, calls), audio=audio)


@main.command()
@click.argument("source", metavar="[MODEL | DIR]", required=False,
                type=click.Path(path_type=Path))
@_build_options
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on; 0.0.0.0 shares the page with the network.")
@click.option("--port", default=8000, show_default=True, type=click.IntRange(0, 65535),
              help="Port to listen on; 0 picks a free one.")
@click.option("--open", "open_browser", is_flag=True, help="Open the page in a browser.")
def serve(source: Path | None, config: Path | None, host: str, port: int, open_browser: bool,
          **flags: Any) -> None:
    """Build MODEL (default: bundle.toml's model, else the example) and serve it on HOST:PORT,
    rebuilding and reloading the page when the model, bundle.toml or --templates change. An export
    folder (optimum's, with config.json) is built the same way and rebuilt when a file in it
    changes. A built DIR is served as it is, reloading when it changes."""
    from bundler.commands.serve import serve as run_serve

    run_serve(source, flags=_given(flags), config=config, host=host, port=port,
              open_browser=open_browser, reporter=_reporter())


@main.command()
@click.argument("url")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("--max-file-size", default="25MiB", show_default=True,
              help="Largest file the host accepts (Cloudflare Pages: 25MiB).")
def doctor(url: str, as_json: bool, max_file_size: str) -> None:
    """Check a deployed bundle at URL over HTTP, as a browser would fetch it: types, bytes,
    encodings, cache headers, sizes, cross-origin isolation, real 404s. Exits 1 on a problem
    that breaks loading or makes it download more than it must."""
    import json

    from bundler.commands.doctor import doctor as run_doctor
    from bundler.errors import ConfigError
    from bundler.hosting.doctor.report import COLUMNS
    from bundler.hosting.sizes import parse_size

    try:
        limit = parse_size(max_file_size)
    except ValueError as error:
        raise ConfigError(f"--max-file-size: {error}") from None
    reporter = _reporter()
    report = run_doctor(url, limit, reporter=None if as_json else reporter)
    if as_json:
        click.echo(json.dumps(report.to_json(), indent=2))
    else:
        reporter.table(f"{report.url} (host: {report.host}; sessions:"
                       f" {', '.join(report.sessions)})", COLUMNS, report.rows)
        if report.problems:
            reporter.table("Problems", ("Severity", "Files", "Problem", "Fix"),
                           report.grouped_problems())
        errors = sum(problem.severity == "error" for problem in report.problems)
        reporter.info(f"{errors} error(s), {len(report.problems) - errors} warning(s)"
                      if report.problems else "No problems found.")
    if not report.ok:
        raise SystemExit(1)


@main.command("inspect")
@click.argument("source", metavar="MODEL|DIR", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the analysis as JSON.")
@click.option("--html", type=click.Path(path_type=Path), default=None,
              help="Also write a self-contained page with a graph view here.")
@click.option("--netron", is_flag=True, help="Open the model in Netron (pip install netron).")
@click.option("--session", default=None, metavar="NAME",
              help="A bundle folder's session to inspect (default: its first, the primary one).")
def inspect_command(source, as_json, html, netron, session):
    """Opsets, inputs/outputs, parameters, operators and per-target support of MODEL (or of a
    bundle's default variant), with warnings for what will hurt and the fix to try."""
    from bundler.commands.inspect import inspect

    inspect(source, as_json=as_json, html=html, netron=netron, session=session,
            reporter=_reporter())


@main.command("run")
@click.argument("source", metavar="DIR|MODEL", type=click.Path(path_type=Path))
@click.option("--ep", "eps", default=",".join(EP_PRIORITY_NAMES), show_default=True,
              help="Execution providers to try, in order (CPU is always the last resort).")
@click.option("--input", "inputs", multiple=True,
              help="NAME=file.npy or NAME=VALUE (a number fills the shape; a JSON list); the"
                   " others get the build's seeded inputs (repeat).")
@_click_option("dims")
@click.option("--variant", default=None, help="Variant of a bundle folder (default: its default).")
@click.option("--whole-graph", is_flag=True,
              help="Count an accelerator as failed when it would leave nodes to the CPU.")
@click.option("--save", type=click.Path(path_type=Path), default=None,
              help="Write the outputs to this .npz file.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.option("--image", type=click.Path(path_type=Path), default=None,
              help="Classify or detect in this image file (a bundle built with --task).")
@click.option("--audio", type=click.Path(path_type=Path), default=None,
              help="Stream this .wav file through an audio-stream bundle: chunks and segments.")
@click.option("--text", "texts", multiple=True,
              help="Embed, classify or continue this text (a bundle built from a text export"
                   " folder; repeat for a batch).")
@click.option("--pair", "pairs", multiple=True,
              help="With --text: score each text with this second text as one input (a"
                   " cross-encoder's query and passage; one --pair per --text).")
@click.option("--top-k", type=click.IntRange(1), default=None,
              help="Classes to print with --image or --text (default: the task's top_k).")
@click.option("--threshold", type=click.FloatRange(0, 1), default=None,
              help="Score threshold of detections with --image (default: the task's).")
@click.option("--session", "session_name", default=None, metavar="NAME",
              help="A bundle folder's session to run on its tensors (default: the primary one).")
def run_command(source, eps, inputs, dims, variant, whole_graph, save, as_json, image, audio,
                texts, pairs, top_k, threshold, session_name):
    """Run DIR's model (or MODEL) with native onnxruntime on the first execution provider this
    machine really has, say why earlier ones were skipped, and compare with the reference
    outputs recorded at build time."""
    from bundler.bundle.options import flag_of, validate
    from bundler.commands.run import run

    given = validate({"dims": dims} if dims else {}, Path.cwd(), spelling=flag_of)
    run(source, eps=eps, inputs=inputs, dims=given.get("dims"), variant=variant, as_json=as_json,
        save=save, whole_graph=whole_graph, image=image, audio=audio, top_k=top_k,
        threshold=threshold, reporter=_reporter(), texts=texts, session_name=session_name,
        pairs=pairs)


@main.command("export")
@click.argument("source", metavar="MODULE:FACTORY|FILE")
@click.option("--input", "inputs", multiple=True,
              help="Example input NAME=D0,D1,...[@dtype]; D is SIZE or DIMNAME:SIZE (dynamic)."
                   " Axis 0 is the dynamic batch (repeat per input).")
@click.option("-o", "--output", type=click.Path(path_type=Path), default=Path("model.onnx"),
              show_default=True, help="The ONNX file to write.")
@click.option("--opset", default=17, show_default=True, type=click.IntRange(7, 30),
              help="ONNX opset to export at.")
@click.option("--output-names", default=None, help="Comma list of output names.")
@click.option("--static-batch", is_flag=True, help="Keep axis 0 fixed instead of dynamic.")
@click.option("--batch-sizes", default="1,3", show_default=True,
              help="Batch sizes to validate at (comma list).")
@click.option("--samples", default=3, show_default=True, type=click.IntRange(1, 100),
              help="Random inputs per batch size.")
@click.option("--rtol", default=CONVERSION.rtol, show_default=True, type=float,
              help="Relative tolerance of the check against PyTorch (np.allclose).")
@click.option("--atol", default=CONVERSION.atol, show_default=True, type=float,
              help="Absolute tolerance of the check against PyTorch (np.allclose).")
@click.option("--build", "then_build", is_flag=True, help="Then bundle build the exported model.")
@click.option("--build-output", type=click.Path(path_type=Path), default=Path("dist"),
              show_default=True, help="Output folder of --build.")
def export_cli(source, inputs, output, opset, output_names, static_batch, batch_sizes, samples,
               rtol, atol, then_build, build_output):
    """Export a PyTorch model (module:factory, a TorchScript file or a torch.export .pt2) to
    ONNX in eval mode with a dynamic batch, and validate it against PyTorch (np.allclose on
    random inputs at two batch sizes); a mismatch is an error. Needs onnx-bundler[torch]."""
    from bundler.commands.export import export_command
    from bundler.errors import ConfigError

    try:
        sizes = [int(size) for size in batch_sizes.split(",") if size.strip()]
    except ValueError:
        raise ConfigError(f"--batch-sizes {batch_sizes!r}: expected a comma list of integers,"
                          " e.g. 1,3") from None
    export_command(source, inputs, output, opset=opset,
                   output_names=[n.strip() for n in (output_names or "").split(",") if n.strip()],
                   static_batch=static_batch, batch_sizes=sizes, samples=samples, rtol=rtol,
                   atol=atol, build_output=build_output if then_build else None,
                   reporter=_reporter())
