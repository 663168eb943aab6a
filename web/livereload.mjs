// livereload.mjs: the client `bundle serve` injects into HTML pages (never part of a build).
// It follows the server's event stream: when a new build is served the page reloads; when a
// rebuild failed, its error is shown over the page (the last good build is still what runs).
const loadedBuild = new URL(import.meta.url).searchParams.get('build');
const OVERLAY_ID = 'bundler-error-overlay';

function showError(error) {
  document.getElementById(OVERLAY_ID)?.remove();
  if (!error) return;
  const overlay = document.createElement('div');
  overlay.id = OVERLAY_ID;
  overlay.setAttribute('role', 'alert');
  overlay.style.cssText = 'position:fixed;inset:0;z-index:2147483647;overflow:auto;'
    + 'background:rgba(20,22,28,.92);color:#f4f5f7;font:15px/1.5 system-ui,sans-serif;padding:2rem;';
  const title = document.createElement('h2');
  title.textContent = 'bundle serve: the last change broke the build';
  title.style.cssText = 'margin:0 0 1rem;color:#ff8a8a;';
  const message = document.createElement('pre');
  message.className = 'bundler-error';
  message.textContent = error;
  message.style.cssText = 'white-space:pre-wrap;font:14px/1.5 ui-monospace,monospace;'
    + 'background:#2a0f12;border-left:4px solid #ff5c5c;padding:1rem;';
  const note = document.createElement('p');
  note.textContent = 'This page still runs what it loaded before. Fix the problem and save: '
    + 'the page reloads when the build is good again.';
  const close = document.createElement('button');
  close.textContent = 'Dismiss';
  close.addEventListener('click', () => overlay.remove());
  overlay.append(title, message, note, close);
  document.body.append(overlay);
}

const events = new EventSource('/__bundler__/events');
events.addEventListener('message', (event) => {
  const { build, error } = JSON.parse(event.data);
  if (build !== loadedBuild) {
    events.close();
    window.location.reload();
    return;
  }
  showError(error);
});
