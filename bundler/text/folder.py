"""`bundle build DIR` on an optimum / transformers.js-style export folder: the model file, its
config.json and the tokenizer files read from the folder, the task told from config.json and the
model's outputs where `--task` does not say it, and the text files shipped beside the model.

    model.onnx or onnx/model.onnx     the fp32 export (a quantized sibling is not the source);
                                      a decoder: decoder_model_merged.onnx, or the two files
                                      decoder_model.onnx + decoder_with_past_model.onnx, merged
                                      into one at build time (bundler/text/merge.py)
    config.json                       architectures (*ForSequenceClassification,
                                      *ForTokenClassification...), id2label, problem_type,
                                      max_position_embeddings
    tokenizer.json                    the tokenizer (`tokenizers`, @huggingface/tokenizers)
    tokenizer_config.json, special_tokens_map.json   special tokens, model_max_length, the chat
                                      template (optional)
    generation_config.json            a decoder's EOS ids (optional); Whisper's prompt tokens
    encoder_model.onnx + decoder_model_merged.onnx   an encoder-decoder speech model (optimum's
                                      automatic-speech-recognition-with-past; in onnx/ as
                                      transformers.js keeps them): two sessions, `encoder` (the
                                      primary one) and `decoder`; the two decoder files of an
                                      unmerged export are merged as above
    preprocessor_config.json          the log-mel front end's settings (optional)
    modules.json, 1_Pooling/config.json, sentence_bert_config.json   a sentence-transformers
                                      model's modules (optional): its pooling, whether it
                                      normalizes, max_seq_length (feature-extraction's defaults)
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path
from typing import Any

from bundler.bundle.layout import TEXT_DIR  # the text files, content-hashed, beside the modules
from bundler.errors import ConfigError
from bundler.tasks.kinds.feature_extraction import SENTENCE_EMBEDDING
from bundler.text.merge import PAIRS, decoder_pair, merged_decoder

# The model file, in the order looked for: optimum writes model.onnx, transformers.js repos keep
# onnx/model.onnx beside onnx/model_quantized.onnx and friends (the fp32 one is the source).
MODEL_FILES = ("model.onnx", "onnx/model.onnx", "decoder_model_merged.onnx",
               "onnx/decoder_model_merged.onnx")
REQUIRED_FILES = ("config.json", "tokenizer.json")
OPTIONAL_FILES = ("tokenizer_config.json", "special_tokens_map.json", "generation_config.json",
                  "preprocessor_config.json")
# An encoder-decoder speech export: the encoder is the primary session, the merged decoder the
# second one (its variants are fp32 only for now).
ENCODER_FILE, MERGED_DECODER = "encoder_model.onnx", "decoder_model_merged.onnx"
SPEECH_SESSIONS = ("encoder", "decoder")
FEATURE_EXTRACTION, TEXT_CLASSIFICATION = "feature-extraction", "text-classification"
TOKEN_CLASSIFICATION = "token-classification"
TEXT_GENERATION = "text-generation"
SPEECH_RECOGNITION = "automatic-speech-recognition"
# config.json architectures of decoder-only language models (Llama, Qwen2, Gemma: *ForCausalLM)
CAUSAL_LM = ("ForCausalLM", "LMHeadModel")


@dataclasses.dataclass(frozen=True)
class ExportFolder:
    """An export folder, read: its model file, config.json's content and the text files to ship
    (by their name in the folder)."""

    folder: Path
    model: Path
    config: dict[str, Any]
    files: dict[str, Path]
    # the sessions beside the primary one (`model`), by name: a speech model's decoder
    sessions: dict[str, Path] = dataclasses.field(default_factory=dict)
    notes: tuple[str, ...] = ()  # what the build filled in that the folder left out (see
    # bundler/text/whisper_folder.py)

    def json(self, name: str) -> dict[str, Any]:
        """The content of one of `files`."""
        return _read_json(self.files[name])

    @property
    def primary_session(self) -> str | None:
        """The primary session's name when the folder has several (else the bundle's name)."""
        return SPEECH_SESSIONS[0] if self.sessions else None

    @property
    def labels(self) -> list[str] | None:
        """config.json's id2label in index order; None when it has none."""
        id2label = self.config.get("id2label")
        if not isinstance(id2label, dict) or not id2label:
            return None
        try:
            by_index = {int(key): str(value) for key, value in id2label.items()}
        except ValueError:
            raise ConfigError(f"{self.folder / 'config.json'}: id2label has a key that is not a"
                              " number") from None
        if sorted(by_index) != list(range(len(by_index))):
            raise ConfigError(f"{self.folder / 'config.json'}: id2label's keys are not 0..N-1")
        return [by_index[index] for index in range(len(by_index))]

    @property
    def activation(self) -> str:
        """How class scores are made of the logits, as transformers' text-classification
        pipeline makes them: sigmoid for multi-label classification (problem_type) and for a
        single label (a cross-encoder's relevance score: softmax of one logit is always 1),
        softmax otherwise."""
        multi = self.config.get("problem_type") == "multi_label_classification"
        return "sigmoid" if multi or len(self.labels or ()) == 1 else "softmax"

    def inferred_task(self, outputs: list[str]) -> tuple[str, str] | None:
        """(kind, why) from config.json's architectures and the model's output names; None when
        it is not clear."""
        architectures = [str(name) for name in self.config.get("architectures") or []]
        if self.sessions and "last_hidden_state" in outputs and any(
                name.endswith("ForConditionalGeneration") for name in architectures):
            return SPEECH_RECOGNITION, (f"{architectures[0]}: {ENCODER_FILE} and"
                                        f" {MERGED_DECODER}")
        classifier = any(name.endswith("ForSequenceClassification") for name in architectures)
        if classifier and "logits" in outputs and self.labels is not None:
            return TEXT_CLASSIFICATION, f"{architectures[0]} with id2label, output logits"
        tagger = any(name.endswith("ForTokenClassification") for name in architectures)
        if tagger and "logits" in outputs and self.labels is not None:
            return TOKEN_CLASSIFICATION, f"{architectures[0]} with id2label, output logits"
        causal = any(name.endswith(CAUSAL_LM) for name in architectures)
        if causal and "logits" in outputs and any(o.startswith("present.") for o in outputs):
            return TEXT_GENERATION, f"{architectures[0]} with past key/values, output logits"
        vectors = next((name for name in ("last_hidden_state", SENTENCE_EMBEDDING)
                        if name in outputs), None)
        if vectors is not None and not (classifier or tagger):
            named = architectures[0] if architectures else config_type(self.config)
            return FEATURE_EXTRACTION, f"{named}, output {vectors}"
        return None


def config_type(config: dict[str, Any]) -> str:
    return str(config.get("model_type") or "a model")


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise ConfigError(f"{path}: not readable JSON ({error})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a JSON object")
    return data


def _speech_decoder(place: Path) -> Path:
    """The merged decoder beside an encoder_model.onnx: optimum's, or its two files (an export
    with --no-post-process) merged at build time."""
    if (place / MERGED_DECODER).is_file():
        return place / MERGED_DECODER
    if (pair := decoder_pair(place)) is not None:
        return merged_decoder(*pair, strict=False)
    first, second = PAIRS[0]
    raise ConfigError(f"{place} has {ENCODER_FILE} but no {MERGED_DECODER} (nor {first} +"
                      f" {second}): a speech model needs its decoder with the KV cache; export"
                      " it with --task automatic-speech-recognition-with-past")


def read_folder(folder: Path) -> ExportFolder:
    """The export folder's model, config and tokenizer files; ConfigError naming the first file
    missing."""
    sessions: dict[str, Path] = {}
    model = next((folder / name for name in MODEL_FILES if (folder / name).is_file()), None)
    for place in (folder, folder / "onnx"):  # optimum's layout, then transformers.js's
        if (place / ENCODER_FILE).is_file():
            model, sessions = place / ENCODER_FILE, {SPEECH_SESSIONS[1]: _speech_decoder(place)}
            break
    if model is None and (pair := decoder_pair(folder)) is not None:
        model = merged_decoder(*pair)
    if model is None:
        raise ConfigError(f"{folder} has no model.onnx (nor onnx/model.onnx, nor a decoder's"
                          " decoder_model.onnx + decoder_with_past_model.onnx): bundle build"
                          " takes a .onnx file or an optimum export folder (model.onnx,"
                          " config.json, tokenizer.json)")
    for name in REQUIRED_FILES:
        if not (folder / name).is_file():
            raise ConfigError(f"{folder} has no {name}: an export folder needs model.onnx,"
                              f" {' and '.join(REQUIRED_FILES)} (optimum-cli export onnx writes"
                              " them)")
    files = {name: folder / name for name in (*REQUIRED_FILES, *OPTIONAL_FILES)
             if (folder / name).is_file()}
    if "tokenizer_config.json" in files:
        _read_json(files["tokenizer_config.json"])
    if "tokenizer.json" in files:
        from bundler.text.tokenizer import browser_difference

        why = browser_difference(_read_json(files["tokenizer.json"]))
        if why is not None:
            raise ConfigError(f"{files['tokenizer.json']}: {why}, so its bundle's page would give"
                              " the model other ids than Python does; it is not built")
    return ExportFolder(folder, model, _read_json(folder / "config.json"), files, sessions)


def ship_text_files(folder: ExportFolder, staging: Path) -> dict[str, str]:
    """Copies the text files into the bundle's text/ folder under content-hashed names, beside
    the tokenizer's browser modules; their paths in the bundle by name in the folder (the task
    record's `files`)."""
    from bundler.bundle.files import rename_to_hashed
    from bundler.text.web import web_files

    target = staging / TEXT_DIR
    target.mkdir(parents=True, exist_ok=True)
    for name, path in web_files().items():  # the tokenizer's browser side, under fixed names
        shutil.copyfile(path, staging / name)
    shipped = {}
    for name, path in folder.files.items():
        copy = Path(shutil.copyfile(path, target / name))
        shipped[name] = TEXT_DIR + rename_to_hashed(copy).name
    return shipped


# Families whose position ids start after the padding index (fairseq's convention): their
# max_position_embeddings counts pad_token_id + 1 positions no token takes.
OFFSET_POSITIONS = {"roberta", "xlm-roberta", "camembert", "longformer", "bart", "mpnet"}
_NO_LIMIT = 1_000_000  # transformers' model_max_length of "no limit" is 1e30
SENTENCE_SETTINGS = "sentence_bert_config.json"  # a sentence-transformers model's max_seq_length


def max_length(folder: ExportFolder) -> int | None:
    """Tokens a text is cut to: a sentence-transformers model's max_seq_length
    (sentence_bert_config.json, what encode() cuts to), else tokenizer_config.json's
    model_max_length when it is a real limit, else the positions config.json's model has; None
    when none says."""
    settings = folder.folder / SENTENCE_SETTINGS
    limit = _read_json(settings).get("max_seq_length") if settings.is_file() else None
    if isinstance(limit, int) and limit > 0:
        return limit
    if "tokenizer_config.json" in folder.files:
        limit = _read_json(folder.files["tokenizer_config.json"]).get("model_max_length")
        if isinstance(limit, int | float) and 0 < limit < _NO_LIMIT:
            return int(limit)
    positions = folder.config.get("max_position_embeddings")
    if not isinstance(positions, int):
        return None
    if folder.config.get("model_type") in OFFSET_POSITIONS:
        positions -= int(folder.config.get("pad_token_id") or 0) + 1
    return positions


# 1_Pooling/config.json's pooling_mode (a name, or a list of them concatenated) -> the pooling
# setting that does the same (the others: none); sentence-transformers before 5.x wrote a
# pooling_mode_* key for each mode, true where it is on, as most hub repositories still have it
_POOLING_MODES = {"cls": "cls", "mean": "mean", "max": "max", "lasttoken": "last",
                  "mean_sqrt_len_tokens": None, "weightedmean": None}
_LEGACY_POOLING_KEYS = {"pooling_mode_cls_token": "cls", "pooling_mode_mean_tokens": "mean",
                        "pooling_mode_max_tokens": "max", "pooling_mode_lasttoken": "lasttoken",
                        "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len_tokens",
                        "pooling_mode_weightedmean_tokens": "weightedmean"}


@dataclasses.dataclass(frozen=True)
class SentenceModules:
    """A sentence-transformers model's modules.json and its modules' configs: what
    SentenceTransformer.encode() does past the encoder, as feature-extraction's defaults."""

    path: Path  # modules.json
    pooling_modes: tuple[str, ...]  # the Pooling module's modes (cls, mean...), concatenated
    normalize: bool  # a Normalize module follows the pooling
    # modules past the pooling that only the model's own pooled output applies (Dense...)
    unapplied: tuple[str, ...]

    @property
    def pooling(self) -> str:
        """The pooling setting that pools as the model's Pooling module does; ConfigError where
        none does."""
        settings = [_POOLING_MODES.get(mode) for mode in self.pooling_modes]
        if len(settings) == 1 and settings[0] is not None:
            return settings[0]
        modes = " + ".join(self.pooling_modes)
        raise ConfigError(f"{self.path}: the model's pooling ({modes or 'none'}) is not one"
                          " bundle build does (cls, mean, max or lasttoken, one at a time): give"
                          " --task pooling=mean, cls, max or last, or export it with"
                          " `optimum-cli export onnx --library sentence_transformers` (its"
                          f" {SENTENCE_EMBEDDING} output pools in the model)")


def sentence_modules(folder: Path) -> SentenceModules | None:
    """The folder's modules.json and its modules' configs, read; None when it has none."""
    listed = folder / "modules.json"
    if not listed.is_file():
        return None
    modes: tuple[str, ...] = ()
    normalize, unapplied = False, []
    for module in _read_modules(listed):
        kind = str(module.get("type", "")).rsplit(".", 1)[-1]  # sentence_transformers...X
        if kind == "Pooling":
            modes = _pooling_modes(_read_json(folder / str(module.get("path", ""))
                                              / "config.json"))
        elif kind == "Normalize":
            normalize = True
        elif kind != "Transformer":
            unapplied.append(f"{module.get('path') or module.get('name')} ({kind})")
    return SentenceModules(listed, modes, normalize, tuple(unapplied))


def _pooling_modes(config: dict[str, Any]) -> tuple[str, ...]:
    mode = config.get("pooling_mode")
    if mode is None:
        return tuple(name for key, name in _LEGACY_POOLING_KEYS.items() if config.get(key) is True)
    return (str(mode),) if isinstance(mode, str) else tuple(str(name) for name in mode)


def _read_modules(path: Path) -> list[dict[str, Any]]:
    try:
        modules = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise ConfigError(f"{path}: not readable JSON ({error})") from None
    if not isinstance(modules, list) or not all(isinstance(m, dict) for m in modules):
        raise ConfigError(f"{path}: expected a JSON list of modules")
    return modules
