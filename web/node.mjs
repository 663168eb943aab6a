// node.mjs: what the package's "node" export condition gives (Node.js, and the server side of
// SSR frameworks such as Next.js). Importing it works, so a server render of a page that imports
// the model does not fail; calling load() there rejects with code 'unsupported-environment',
// since the bundle runs onnxruntime-web, which needs a browser (or a Web Worker). Call load() on
// the client only (in Next.js: in a 'use client' component, from useEffect or an event handler).

const MESSAGE = 'this model runs in the browser only: load() was called in Node.js (or on the' +
  ' server side of an SSR framework); call it on the client, e.g. in useEffect';

export class BundleError extends Error {
  constructor(code, message) {
    super(message);
    this.name = 'BundleError';
    this.code = code;
  }
}

export async function load() {
  throw new BundleError('unsupported-environment', MESSAGE);
}

export async function loadManifest() {
  throw new BundleError('unsupported-environment', MESSAGE);
}
