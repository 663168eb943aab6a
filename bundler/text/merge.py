"""Two-file decoder exports (optimum's `decoder_model.onnx` + `decoder_with_past_model.onnx`,
exported without merging) made one merged decoder at build time, so that the bundle ships one set
of weights: optimum's merge_decoders puts both graphs under an If on a `use_cache_branch` input,
their shared initializers once. The merged file is kept in the user cache, keyed by both files'
contents, so a rebuild does not merge again.

optimum (the `optimum` extra: optimum-onnx, which pulls in torch and transformers) is imported
only here, only for such a folder."""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

from bundler.errors import ConfigError

# Where a folder keeps the pair, in the order looked for (transformers.js repos: under onnx/).
PAIRS = (("decoder_model.onnx", "decoder_with_past_model.onnx"),
         ("onnx/decoder_model.onnx", "onnx/decoder_with_past_model.onnx"))
MERGED = "decoder_model_merged.onnx"


def decoder_pair(folder: Path) -> tuple[Path, Path] | None:
    """The folder's no-past and with-past decoders; None when it has no such pair."""
    for first, second in PAIRS:
        if (folder / first).is_file() and (folder / second).is_file():
            return folder / first, folder / second
    return None


def _digest(paths: tuple[Path, ...]) -> str:
    digest = hashlib.sha256()
    for path in paths:  # a model's external data files too: they are its weights
        for part in sorted([path, *path.parent.glob(path.name + "_data*"),
                            *path.parent.glob(path.name + ".data")]):
            with part.open("rb") as stream:
                while chunk := stream.read(1 << 20):
                    digest.update(chunk)
    return digest.hexdigest()[:24]


def merged_decoder(decoder: Path, with_past: Path, strict: bool = True) -> Path:
    """One merged decoder of the pair (in the user cache; made once). `strict=False` for an
    encoder-decoder's pair, whose with-past decoder does not output the cross-attention cache
    (it is constant), as optimum's own post-processing merges it."""
    from bundler.site.runtime import cache_root

    target = cache_root() / "merged" / _digest((decoder, with_past)) / MERGED
    if target.is_file():
        return target
    try:
        from optimum.onnx.graph_transformations import merge_decoders
    except ImportError:
        raise ConfigError(f"{decoder.parent} holds {decoder.name} and {with_past.name}: merging"
                          " them needs optimum (pip install 'onnx-bundler[optimum]'), or export"
                          " one model (optimum-cli export onnx without --no-post-process)"
                          ) from None
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as scratch:
        made = Path(scratch) / MERGED
        try:
            merge_decoders(decoder, with_past, save_path=made, strict=strict)
        except Exception as error:  # optimum's own checks: the graphs do not pair up
            raise ConfigError(f"cannot merge {decoder.name} and {with_past.name}:"
                              f" {str(error).splitlines()[0] if str(error) else error!r}"
                              ) from None
        # its external data first, if it has any: the model file there means the merge is done
        for path in sorted(Path(scratch).iterdir(), key=lambda path: path.name == MERGED):
            os.replace(path, target.parent / path.name)
    return target
