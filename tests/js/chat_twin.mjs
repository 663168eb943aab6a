// The chat templates' Node side for tests/test_text_chat.py: imports chat.mjs from the folder in
// argv[2] (staged there with jinja.mjs beside it, as a bundle ships them), renders each case of
// the JSON table in argv[3] and prints, as JSON, the texts or the errors' messages.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const { chatTemplate, renderChat, specialTokens } = await import(
  pathToFileURL(join(process.argv[2], 'chat.mjs')).href);
const cases = JSON.parse(readFileSync(process.argv[3], 'utf8'));
const results = cases.map(({ config, messages, addGenerationPrompt, tools }) => {
  try {
    return { text: renderChat(chatTemplate(config), messages, {
      addGenerationPrompt, tokens: specialTokens(config), tools,
    }) };
  } catch (error) {
    return { error: error.message };
  }
});
process.stdout.write(JSON.stringify(results));
