// Chat templates in the browser (and Node): a tokenizer_config.json's chat_template rendered over
// a message list by @huggingface/jinja, to the same text as bundler/text/chat.py (jinja2, as
// transformers renders it). './jinja.mjs' is that package's self-contained ESM build, which a
// bundle ships beside this file (bundler.text.chat.jinja_dist, JINJA_FILE).
import { Template } from './jinja.mjs';

const SPECIAL_TOKENS = ['bos_token', 'eos_token', 'unk_token', 'sep_token', 'pad_token',
  'cls_token', 'mask_token'];
const compiled = new Map();

/** The template a tokenizer_config.json names: a string, or one of a list of {name, template}
 * (`name`, else "default"). */
export function chatTemplate(tokenizerConfig, name) {
  const value = tokenizerConfig.chat_template;
  if (typeof value === 'string') return value;
  if (Array.isArray(value)) {
    const wanted = name ?? 'default';
    const found = value.find((item) => item?.name === wanted);
    if (typeof found?.template === 'string') return found.template;
    const names = value.map((item) => item?.name).join(', ');
    throw new Error(`tokenizer_config.json has no chat template named '${wanted}' (it has ${names})`);
  }
  throw new Error('tokenizer_config.json has no chat_template');
}

/** bos_token, eos_token, … as strings (tokenizer_config.json may store an AddedToken
 * {content: …}). */
export function specialTokens(tokenizerConfig) {
  const tokens = {};
  for (const key of SPECIAL_TOKENS) {
    let value = tokenizerConfig[key];
    if (value && typeof value === 'object') value = value.content;
    if (typeof value === 'string') tokens[key] = value;
  }
  return tokens;
}

/** The text `template` renders for `messages`. `tokens`: the special tokens
 * (specialTokens(tokenizerConfig)); `variables`: any more the template reads. */
export function renderChat(template, messages, {
  addGenerationPrompt = false, tokens = {}, tools = null, documents = null, variables = {},
} = {}) {
  let program = compiled.get(template);
  if (!program) {
    try {
      program = new Template(template);
    } catch (error) {
      throw new Error(`the chat template does not parse: ${error.message}`);
    }
    compiled.set(template, program);
  }
  try {
    return program.render({
      messages, tools, documents, add_generation_prompt: addGenerationPrompt, ...tokens,
      ...variables,
    });
  } catch (error) {
    throw new Error(`the chat template failed: ${error.message}`);
  }
}
