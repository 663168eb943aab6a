"""Every name in a bundle folder and the role of each file: the one place they are declared.

    bundle.json           the manifest (bundler.bundle.manifest), for tools
    bundle.files.mjs      the same content and its files' URLs, for bundle.mjs
    bundle.mjs, ...       the browser modules (WEB_FILES), copied from web/
    bundle.d.ts/.d.mts    the model's TypeScript types (bundler.bundle.typings)
    package.json          makes the folder an npm package (bundler.bundle.files)
    models/               the variants' model files, content-hashed (models/fp32.3f2a9c1e.onnx)
    runtime/              the onnxruntime-web builds, content-hashed
    coi-serviceworker.js  cross-origin isolation where a host cannot set headers
    text/                 a text model's tokenizer modules (TEXT_FILES, bundler.text.web)

An edge folder (`--target edge`) holds edge.json, models/<variant>.ort and EDGE_OPERATORS_CONFIG.
This module imports nothing from bundler, so every other module may import it.
"""

from __future__ import annotations

MANIFEST_FILE = "bundle.json"
EDGE_MANIFEST = "edge.json"
FILES_MODULE = "bundle.files.mjs"
PACKAGE_JSON = "package.json"
NODE_ENTRY = "node.mjs"
COI_WORKER = "coi-serviceworker.js"
DECLARATION_FILES = ("bundle.d.ts", "bundle.d.mts")
MODELS_DIR = "models/"
RUNTIME_DIR = "runtime/"
TASKS_DIR = "tasks/"
TEXT_DIR = "text/"
WORK_DIR = ".work"  # the build's scratch folder inside the staging folder; never shipped
EDGE_OPERATORS_CONFIG = "required_operators_and_types.config"

# web/tasks/: the task API's modules, imported by bundle.mjs (see bundler.tasks); each task kind's
# web_module is among them (tests/test_task_kinds.py)
TASK_MODULES = ("index.mjs", "image.mjs", "resample.mjs", "classify.mjs", "detect.mjs",
                "audio.mjs", "text.mjs", "entities.mjs", "logmel.mjs")
# web/text/: a text bundle's tokenizer (bundler.text.web): the wrapper from web/ and the
# @huggingface/tokenizers module it imports by relative URL, copied from the npm cache. Only text
# bundles carry them, so they are not among WEB_FILES.
TEXT_TOKENIZER_MODULE = TEXT_DIR + "tokenizer.mjs"
TOKENIZERS_LIBRARY = TEXT_DIR + "tokenizers.mjs"
TEXT_FILES = (TEXT_TOKENIZER_MODULE, TOKENIZERS_LIBRARY)
# A text-generation bundle's too (bundler.text.web.generation_modules): the loop, what the decoding
# loops share (the kept KV cache, streamed text), the sampling spec, chat templates and
# @huggingface/jinja's ESM file, which chat.mjs imports as ./jinja.mjs; and the demo page's chat
# (task-demo.mjs imports it).
GENERATION_FILES = tuple(TEXT_DIR + name for name in ("generate.mjs", "decoding.mjs",
                                                      "sampling.mjs", "chat.mjs", "jinja.mjs",
                                                      "chat-demo.mjs"))
# A speech-recognition bundle's (automatic-speech-recognition): the transcription loop, what the
# decoding loops share, the Whisper decoding spec, its windows, the sampling spec whisper.mjs
# takes exp64 from, and live transcription (listen.mjs, last: TEXT_ENTRY_MODULES takes it).
SPEECH_FILES = tuple(TEXT_DIR + name for name in ("transcribe.mjs", "decoding.mjs", "whisper.mjs",
                                                  "whisper_windows.mjs", "sampling.mjs",
                                                  "listen.mjs"))
# The text modules the task API imports (web/tasks/text.mjs), each where the bundle carries it:
# bundle.files.mjs imports them by a literal import(), which an app's bundler follows.
TEXT_ENTRY_MODULES = (TEXT_TOKENIZER_MODULE, GENERATION_FILES[0], SPEECH_FILES[0],
                      SPEECH_FILES[-1])
# The browser modules copied from web/ into every bundle.
WEB_FILES = ("bundle.mjs", "bundle.core.mjs", "bundle.fetch.mjs", "bundle.preflight.mjs",
             "bundle.session.mjs", "bundle.worker-session.mjs", "bundle.worker.mjs", NODE_ENTRY,
             "app.mjs", "task-demo.mjs", *(TASKS_DIR + name for name in TASK_MODULES))
# The demo's pages a user template folder may replace; every other bundle name is reserved.
REPLACEABLE = {"app.mjs", "task-demo.mjs"}
RESERVED = {MANIFEST_FILE, FILES_MODULE, PACKAGE_JSON, *WEB_FILES, *DECLARATION_FILES,
            COI_WORKER, RUNTIME_DIR.rstrip("/"), MODELS_DIR.rstrip("/"),
            TASKS_DIR.rstrip("/"), TEXT_DIR.rstrip("/")} - REPLACEABLE
# What the npm package ships: the loader and its modules, types, manifest, models and runtime (the
# demo page, index.html and app.mjs, is left out).
PACKAGE_FILES = ("bundle.mjs", "bundle.core.mjs", FILES_MODULE, "bundle.fetch.mjs",
                 "bundle.preflight.mjs", "bundle.session.mjs", "bundle.worker-session.mjs",
                 "bundle.worker.mjs", TASKS_DIR, TEXT_DIR, *DECLARATION_FILES, MANIFEST_FILE,
                 NODE_ENTRY, MODELS_DIR, RUNTIME_DIR)

# Static hosting (bundler.hosting.publish): files over the size limit with these suffixes are
# split into NAME.part0, NAME.part1, ...; these and the text files get .br/.gz siblings.
SPLITTABLE = {".wasm", ".onnx", ".ort", ".data", ".bin"}
COMPRESSIBLE = SPLITTABLE | {".html", ".mjs", ".js", ".json", ".css", ".ts", ".svg", ".txt",
                             ".map"}
ENCODINGS = {"br": ".br", "gzip": ".gz"}  # Content-Encoding -> the suffix of its sibling file
# The folders whose files are split and compressed once; the pages around them may be redone.
HEAVY_DIRS = (MODELS_DIR, RUNTIME_DIR)
# Not in bundle.json's `files` table: the manifest's own two forms (written last).
UNLISTED = (MANIFEST_FILE, FILES_MODULE)
