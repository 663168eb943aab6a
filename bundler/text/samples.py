"""The sentences a text bundle is checked on (the build's browser check and `bundle test`):
short and long, several scripts, emoji, a duplicate-meaning pair; real text, never random
ids."""

from __future__ import annotations

CHECK_TEXTS = (
    "The cat sat on the mat.",
    "A cat was sitting on the rug.",
    "Stock markets fell sharply after the announcement.",
    "Le chat dort au soleil près de la fenêtre.",
    "Der Zug nach München hat zwanzig Minuten Verspätung.",
    "El gato duerme en el sofá.",
    "猫はソファーで寝ています。",
    "这只猫在沙发上睡觉。",
    "Кошка спит на диване.",
    "القطة نائمة على الأريكة.",
    "I love this! 😍🎉",
    "",
    "A longer sentence, with several clauses, numbers like 3.14 and 2026, and punctuation;"
    " it is here so that the batch is padded and the attention mask matters.",
)

# A text-generation bundle's check prompts: a few of the sentences above (each is continued for
# bundler.tasks.kinds.text_generation.CHECK_STEPS tokens per variant and EP), of several scripts
# and a byte-level emoji, none empty.
CHECK_PROMPTS = (CHECK_TEXTS[0], CHECK_TEXTS[3], CHECK_TEXTS[6], CHECK_TEXTS[10])
