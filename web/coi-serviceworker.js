// coi-serviceworker.js: cross-origin isolation where the host cannot send COOP/COEP headers
// (GitHub Pages). One file, two roles:
// - in a page (<script src="coi-serviceworker.js"></script>, a classic script): registers itself
//   as the service worker of its folder, unless the page is isolated already;
// - as that service worker: answers every request of the folder's pages from the network with
//   Cross-Origin-Opener-Policy and Cross-Origin-Embedder-Policy added, so from the next
//   navigation on the page is cross-origin isolated and onnxruntime-web gets wasm threads.
// The page is never reloaded behind the user's back: the first visit runs single-threaded.
/* eslint-env browser, serviceworker */
'use strict';

const ISOLATION = {
  'Cross-Origin-Opener-Policy': 'same-origin',
  'Cross-Origin-Embedder-Policy': 'require-corp',
  'Cross-Origin-Resource-Policy': 'cross-origin',
};

function withIsolation(response) {
  if (response.status === 0) return response; // opaque: its headers cannot be read or changed
  const headers = new Headers(response.headers);
  for (const [name, value] of Object.entries(ISOLATION)) headers.set(name, value);
  return new Response(response.body, {
    status: response.status, statusText: response.statusText, headers,
  });
}

if (typeof window === 'undefined') {
  self.addEventListener('install', () => self.skipWaiting());
  self.addEventListener('activate', (event) => event.waitUntil(self.clients.claim()));
  self.addEventListener('fetch', (event) => {
    const request = event.request;
    // Chromium throws on this combination when the request is passed on (crbug 823392).
    if (request.cache === 'only-if-cached' && request.mode !== 'same-origin') return;
    event.respondWith(fetch(request).then(withIsolation));
  });
} else if (!window.crossOriginIsolated && window.isSecureContext && navigator.serviceWorker) {
  navigator.serviceWorker.register(document.currentScript.src).catch((error) => {
    console.warn(`coi-serviceworker: not registered (${error.message}); wasm runs single-threaded`);
  });
}
