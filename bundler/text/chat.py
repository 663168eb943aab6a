"""Chat templates: a tokenizer_config.json's `chat_template` rendered over a message list, in Python
as transformers' `apply_chat_template(tokenize=False)` renders it (jinja2's sandbox with
trim_blocks and lstrip_blocks, loop controls, HF's `raise_exception`, `strftime_now` and
`tojson`, the special tokens as variables), and in the browser by web/text/chat.mjs through
@huggingface/jinja, for the same text on both sides.

chat.mjs imports `./jinja.mjs`: a bundle that ships it copies `jinja_dist()` (the package's
self-contained ESM file) next to it under the name `JINJA_FILE`.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import jinja2
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

from bundler.errors import ConfigError

JINJA_PACKAGE = "@huggingface/jinja"
JINJA_VERSION = "0.5.13"
JINJA_FILE = "jinja.mjs"
SPECIAL_TOKENS = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token",
                  "mask_token")


def jinja_dist() -> Path:
    """The path of @huggingface/jinja's ESM build (one file, no imports), installed once into
    the tool cache; what a bundle ships as `JINJA_FILE` beside chat.mjs."""
    from bundler.site.npmtools import npm_tool

    folder = npm_tool({JINJA_PACKAGE: JINJA_VERSION})
    return folder / "node_modules" / JINJA_PACKAGE / "dist" / "index.js"


def chat_template(tokenizer_config: Mapping[str, Any], name: str | None = None) -> str:
    """The template a tokenizer_config.json names: a string, or one of a list of
    {name, template} (`name`, else "default")."""
    value = tokenizer_config.get("chat_template")
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        named = {item.get("name"): item.get("template") for item in value
                 if isinstance(item, dict)}
        wanted = name or "default"
        if isinstance(named.get(wanted), str):
            return named[wanted]
        raise ConfigError(f"tokenizer_config.json has no chat template named {wanted!r}"
                          f" (it has {', '.join(map(str, named))})")
    raise ConfigError("tokenizer_config.json has no chat_template")


def special_tokens(tokenizer_config: Mapping[str, Any]) -> dict[str, str]:
    """bos_token, eos_token, … as strings (tokenizer_config.json may store an AddedToken
    {content: …})."""
    tokens = {}
    for key in SPECIAL_TOKENS:
        value = tokenizer_config.get(key)
        if isinstance(value, dict):
            value = value.get("content")
        if isinstance(value, str):
            tokens[key] = value
    return tokens


class _Generation(Extension):
    """`{% generation %}…{% endgeneration %}` renders its body (transformers uses the tag to mask
    assistant tokens, which rendering does not need)."""

    tags = {"generation"}

    def parse(self, parser: Any) -> jinja2.nodes.Node:
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_body"), [], [], body).set_lineno(lineno)

    def _body(self, caller: Any) -> str:
        return caller()


def _raise_exception(message: str) -> None:
    raise jinja2.exceptions.TemplateError(message)


def _tojson(value: Any, ensure_ascii: bool = False, indent: int | None = None,
            separators: Any = None, sort_keys: bool = False) -> str:
    # jinja2's own tojson escapes HTML characters; transformers' does not
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


@functools.lru_cache(maxsize=16)
def _compile(template: str) -> jinja2.Template:
    environment = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                                extensions=[_Generation, loopcontrols])
    environment.filters["tojson"] = _tojson
    environment.globals["raise_exception"] = _raise_exception
    environment.globals["strftime_now"] = lambda format: datetime.now().strftime(format)
    try:
        return environment.from_string(template)
    except jinja2.exceptions.TemplateSyntaxError as error:
        raise ConfigError(f"the chat template does not parse: {error.message}"
                          f" (line {error.lineno})") from None


def render_chat(template: str, messages: Sequence[Mapping[str, Any]], *,
                add_generation_prompt: bool = False, tokens: Mapping[str, str] | None = None,
                tools: Sequence[Mapping[str, Any]] | None = None,
                documents: Sequence[Mapping[str, Any]] | None = None,
                **variables: Any) -> str:
    """The text `template` renders for `messages`; `tokens` are the special tokens
    (`special_tokens(tokenizer_config)`), `variables` any more the template reads."""
    compiled = _compile(template)
    try:
        return compiled.render(messages=list(messages), tools=tools, documents=documents,
                               add_generation_prompt=add_generation_prompt,
                               **dict(tokens or {}), **variables)
    except jinja2.exceptions.TemplateError as error:
        raise ConfigError(f"the chat template failed: {error.message}") from None
