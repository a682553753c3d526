// @echogarden/fvad-wasm ships JavaScript only: its default export is the Emscripten module's
// factory (src/providers/audio/vad.ts types what it resolves to).
declare module "@echogarden/fvad-wasm" {
  const createModule: () => Promise<unknown>
  export default createModule
}
