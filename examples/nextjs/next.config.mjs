// A static export (out/), so that any static host serves the app; the bundle needs no setting here.
export default { output: 'export' };
