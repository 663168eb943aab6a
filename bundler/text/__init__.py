"""Text models: export folders, tokenizers and the text tasks' Python reference."""
