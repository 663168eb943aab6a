"""Text models' tokenizers: the Python side (`TextTokenizer`, over the tokenizers library) and
the files a bundle ships for the browser side (`web_files`, over @huggingface/tokenizers)."""

from bundler.text.tokenizer import Settings, TextTokenizer, TokenBatch
from bundler.text.web import TOKENIZERS_JS, tokenizers_library, web_files

__all__ = ["TOKENIZERS_JS", "Settings", "TextTokenizer", "TokenBatch", "tokenizers_library",
           "web_files"]
