// The recogniser stand-in for a machine without PocketSphinx (npm install && npm start on a bare
// machine): it is told, by the simulated callee, the line being spoken, and answers it once the
// utterance it heard ends. It hears the audio all the same (an utterance is still found by the
// voice-activity detector, and a frame-less end answers nothing), so every stage of a call but the
// recognition itself runs as with a real recogniser. Only the simulator's calls can use it.
import type { StreamingRecognizer } from "./streaming.interface.js"

export class ScriptRecognizer implements StreamingRecognizer {
  private frames = 0

  /** `script`: the line the simulated callee is saying now (undefined when silent). */
  constructor(private readonly script: () => string | undefined) {}

  frame(): void {
    this.frames++
  }

  partial(): string {
    return ""
  }

  async end(): Promise<string> {
    const heard = this.frames > 0
    this.frames = 0
    return heard ? (this.script() ?? "") : ""
  }

  free(): void {}
}
