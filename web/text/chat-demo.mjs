// chat-demo.mjs: the demo page's chat for a text-generation bundle (index.html's #task section,
// started by task-demo.mjs). The conversation goes through the tokenizer's chat template when
// tokenizer_config.json has one (model.generate(messages)); without one each message is a plain
// prompt continued on its own. The reply streams in as it is decoded (onToken), the Stop button
// aborts it (AbortSignal), the sampling settings are read at each send, and the prompt's length,
// the time to first token and decode tokens/s are shown. Text reaches the page only through textContent.
import { readJson } from '../tasks/text.mjs';

const $ = (id) => document.getElementById(id);

// The settings' inputs -> generate() options (temperature 0: greedy).
const SETTINGS = {
  temperature: 'chat-temperature', topK: 'chat-top-k', topP: 'chat-top-p',
  repetitionPenalty: 'chat-repetition-penalty', seed: 'chat-seed', maxNewTokens: 'chat-max-new-tokens',
};

function settings() {
  const options = {};
  for (const [option, id] of Object.entries(SETTINGS)) {
    const value = Number($(id).value);
    if ($(id).value.trim() === '' || !Number.isFinite(value)) {
      throw new RangeError(`${$(id).labels[0]?.textContent ?? option}: give a number`);
    }
    options[option] = value;
  }
  return options;
}

function bubble(role, text) {
  const item = document.createElement('li');
  item.dataset.role = role;
  const who = document.createElement('strong');
  who.textContent = `${role}: `;
  const said = document.createElement('span');
  said.textContent = text;
  item.append(who, said);
  $('task-results').append(item);
  return said;
}

export async function startChatDemo(model, { setStatus }) {
  const config = await readJson(model, model.manifest.task, 'tokenizer_config.json');
  const chat = Boolean(config.chat_template);
  $('chat-mode').textContent = chat
    ? 'The conversation goes through the tokenizer\'s chat template.'
    : 'This tokenizer has no chat template: each message is a prompt continued on its own.';
  const messages = [];
  let running = null; // the reply's AbortController
  const send = async () => {
    const content = $('task-text').value;
    if (running || !content.trim()) return;
    let options;
    try {
      options = settings();
    } catch (error) {
      setStatus(error.message, 'error');
      return;
    }
    running = new AbortController();
    $('task-run').disabled = true;
    $('chat-stop').disabled = false;
    $('task-text').value = '';
    bubble('user', content);
    const reply = bubble('assistant', '');
    const input = chat ? [...messages, { role: 'user', content }] : content;
    $('chat-stats').textContent = 'generating…';
    try {
      const run = await model.generate(input, {
        ...options, signal: running.signal,
        onToken: (piece) => { reply.textContent += piece; },
      });
      reply.textContent = run.text;
      if (chat) messages.push({ role: 'user', content }, { role: 'assistant', content: run.text });
      const { firstTokenMs, decodeTokensPerS } = run.timings;
      $('chat-stats').textContent = `${run.promptIds.length} prompt tokens · first token ${
        firstTokenMs?.toFixed(0) ?? '–'} ms · ${decodeTokensPerS?.toFixed(1) ?? '–'} tokens/s · ${
        run.tokenIds.length} new tokens`;
    } catch (error) {
      if (error.name !== 'AbortError') {
        reply.parentElement.remove();
        $('chat-stats').textContent = '';
        throw error;
      }
      // a stopped reply stays on the page but not in the conversation the model sees
      reply.parentElement.dataset.stopped = 'true';
      $('chat-stats').textContent = 'stopped';
    } finally {
      running = null;
      $('task-run').disabled = false;
      $('chat-stop').disabled = true;
    }
  };
  const guarded = () => send().catch(
    (error) => setStatus(`Could not generate: ${error.message}`, 'error'));
  $('task-run').addEventListener('click', guarded);
  $('task-text').addEventListener('keydown', (event) => event.key === 'Enter' && guarded());
  $('chat-stop').addEventListener('click', () => running?.abort());
  $('chat-clear').addEventListener('click', () => {
    running?.abort();
    messages.length = 0;
    $('task-results').replaceChildren();
    $('chat-stats').textContent = '';
  });
  $('task-run').disabled = false;
}
