"""Chat templates (bundler/text/chat.py, web/text/chat.mjs): templates in the shape of ChatML/Qwen2,
Llama-3, Gemma and Phi-3 render the same text in Python (jinja2), in Node (@huggingface/jinja,
staged as a bundle ships it) and in transformers' apply_chat_template."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from tokenizers import Tokenizer
from tokenizers.models import WordLevel
from transformers import PreTrainedTokenizerFast

from bundler.errors import ConfigError
from bundler.site.npmtools import node_executable
from bundler.text.chat import JINJA_FILE, chat_template, jinja_dist, render_chat, special_tokens

ROOT = Path(__file__).resolve().parent.parent
TEMPLATES = ROOT / "tests" / "data" / "chat_templates"
TWIN = ROOT / "tests" / "js" / "chat_twin.mjs"

CONFIGS = {
    "qwen2": {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>", "bos_token": None},
    "llama3": {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"},
    "gemma": {"bos_token": {"content": "<bos>", "lstrip": False}, "eos_token": "<eos>"},
    "phi3": {"bos_token": "<s>", "eos_token": "<|endoftext|>", "unk_token": "<unk>"},
}
TOOLS = [{"type": "function", "function": {
    "name": "weather", "description": "Today's weather in a city, «as reported»",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}}]
CONVERSATIONS = {
    "one turn": [{"role": "user", "content": "Hello! How are you?"}],
    "system": [{"role": "system", "content": "You answer in French."},
               {"role": "user", "content": "  What is 2 + 2?  "}],
    "multi-turn": [{"role": "user", "content": "Name a colour."},
                   {"role": "assistant", "content": "Blue."},
                   {"role": "user", "content": "Another, with an accent: é, 🙂"}],
    "system multi-turn": [{"role": "system", "content": "Be brief."},
                          {"role": "user", "content": "Hi"},
                          {"role": "assistant", "content": "Hello."},
                          {"role": "user", "content": "Bye\n"}],
    "tool call": [{"role": "user", "content": "Weather in Oslo?"},
                  {"role": "assistant", "content": "", "tool_calls": [{"type": "function",
                   "function": {"name": "weather", "arguments": {"city": "Oslo"}}}]},
                  {"role": "tool", "content": "{\"sky\": \"clear\"}"}],
}


def _config(name: str) -> dict[str, Any]:
    template = (TEMPLATES / f"{name}.jinja").read_text(encoding="utf-8")
    return {"chat_template": template, **CONFIGS[name]}


PLAIN = ["one turn", "system", "multi-turn", "system multi-turn"]
CASES = [(name, conversation, prompt, None)
         for name in CONFIGS for conversation in PLAIN for prompt in (True, False)]
CASES += [("qwen2", "one turn", True, TOOLS), ("qwen2", "multi-turn", False, TOOLS),
          ("qwen2", "tool call", True, TOOLS)]


def _python(name: str, conversation: str, prompt: bool, tools: Any) -> dict[str, str]:
    config = _config(name)
    try:
        return {"text": render_chat(chat_template(config), CONVERSATIONS[conversation],
                                    add_generation_prompt=prompt, tokens=special_tokens(config),
                                    tools=tools)}
    except ConfigError as error:
        return {"error": error.message}


def _transformers(name: str, conversation: str, prompt: bool, tools: Any) -> str:
    config = _config(name)
    vocab = {token: index for index, token in enumerate(["[x]", *special_tokens(config).values()])}
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(WordLevel(vocab, "[x]")),
                                        **special_tokens(config))
    tokenizer.chat_template = config["chat_template"]
    return tokenizer.apply_chat_template(CONVERSATIONS[conversation], tools=tools, tokenize=False,
                                         add_generation_prompt=prompt)


@pytest.fixture(scope="module")
def node_results(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, str]]:
    folder = tmp_path_factory.mktemp("chat")
    shutil.copy(ROOT / "web" / "text" / "chat.mjs", folder / "chat.mjs")
    shutil.copy(jinja_dist(), folder / JINJA_FILE)
    table = [{"config": _config(name), "messages": CONVERSATIONS[conversation],
              "addGenerationPrompt": prompt, "tools": tools}
             for name, conversation, prompt, tools in CASES]
    (folder / "cases.json").write_text(json.dumps(table))
    result = subprocess.run([str(node_executable()), str(TWIN), str(folder),
                             str(folder / "cases.json")], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.mark.parametrize("index", range(len(CASES)),
                         ids=[f"{c[0]}-{c[1]}-{c[2]}-{'tools' if c[3] else ''}" for c in CASES])
def test_python_node_and_transformers_render_the_same(index: int, node_results: list) -> None:
    ours = _python(*CASES[index])
    assert node_results[index] == ours
    if "text" in ours:
        assert ours["text"] == _transformers(*CASES[index])
    else:
        with pytest.raises(Exception, match=ours["error"].split(": ", 1)[1][:20]):
            _transformers(*CASES[index])


def test_the_cases_render_what_the_templates_say() -> None:
    text = _python("llama3", "system", True, None)["text"]
    assert text == ("<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
                    "You answer in French.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\n"
                    "What is 2 + 2?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n")
    assert _python("gemma", "system", True, None) == {
        "error": "the chat template failed: System role not supported"}


def test_named_templates_and_missing_ones() -> None:
    config = {"chat_template": [{"name": "default", "template": "a"},
                                {"name": "tool_use", "template": "b"}]}
    assert chat_template(config) == "a" and chat_template(config, "tool_use") == "b"
    with pytest.raises(ConfigError, match="no chat template named 'rag'"):
        chat_template(config, "rag")
    with pytest.raises(ConfigError, match="has no chat_template"):
        chat_template({})
    with pytest.raises(ConfigError, match="does not parse"):
        render_chat("{% for %}", [])


def test_jinja_dist_is_a_self_contained_module() -> None:
    source = jinja_dist().read_text(encoding="utf-8")
    assert "export {" in source and "\nimport " not in source
