import path from 'node:path';

// Entry and output only: the bundle needs no loader, rule or plugin.
export default {
  entry: './src/index.js',
  output: { path: path.resolve(import.meta.dirname, 'dist') },
};
