"""Text models: export folders, tokenizers, the text tasks' Python reference, and text
generation's sampling spec, native reference loop and chat templates, each twinned with a browser
module under web/text/ where the browser needs it."""
