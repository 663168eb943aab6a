// node.mjs: what the package's "node" export condition gives (Node.js, and the server side of
// SSR frameworks such as Next.js). Importing it works, so a server render of a page that imports
// the model does not fail; calling load() there rejects with code 'unsupported-environment',
// since the bundle runs onnxruntime-web, which needs a browser (or a Web Worker). Call load() on
// the client only (in Next.js: in a 'use client' component, from useEffect or an event handler).
import { BundleError } from './bundle.core.mjs';

export { BundleError, ERROR_CODES, SCHEMA_VERSION } from './bundle.core.mjs';

function browserOnly() {
  return new BundleError('unsupported-environment', 'this model runs in the browser only: load()' +
    ' was called in Node.js (or on the server side of an SSR framework); call it on the client,' +
    ' e.g. in useEffect');
}

export async function load() {
  throw browserOnly();
}

export async function loadManifest() {
  throw browserOnly();
}

export async function preflight() {
  throw browserOnly();
}
