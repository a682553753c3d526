// Voice activity on telephone audio: WebRTC's VAD (libfvad, compiled to WebAssembly by
// @echogarden/fvad-wasm, 20 KB, no model to fetch), one verdict per 20 ms frame of 8 kHz audio, a
// few microseconds each. The WebAssembly module is loaded once per process and shared; each
// detector owns its own state in it (a call's VAD must not hear another call's frames).
import fvad from "@echogarden/fvad-wasm"
import { FRAME_SAMPLES, PHONE_RATE } from "./g711.js"

/** How eagerly frames are called speech: 0 (most) to 3 (least; fewer false alarms on noisy lines). */
export type VadMode = 0 | 1 | 2 | 3

interface FvadModule {
  _fvad_new(): number
  _fvad_free(inst: number): void
  _fvad_set_mode(inst: number, mode: number): number
  _fvad_set_sample_rate(inst: number, rate: number): number
  _fvad_process(inst: number, frame: number, length: number): number
  _malloc(bytes: number): number
  _free(ptr: number): void
  HEAP16: Int16Array
}

let loading: Promise<FvadModule> | undefined
let loaded: FvadModule | undefined
const loadModule = (): Promise<FvadModule> => {
  loading ??= (fvad() as Promise<FvadModule>).then((m) => (loaded = m))
  return loading
}

/** One call's voice activity detector. free() it when the call ends. */
export class Vad {
  private freed = false

  private constructor(
    private readonly m: FvadModule,
    private readonly inst: number,
    /** A frame's samples in the module's memory (reused for every frame). */
    private readonly buf: number,
  ) {}

  static async create(mode: VadMode = 2): Promise<Vad> {
    return Vad.make(await loadModule(), mode)
  }

  /** Loads the WebAssembly module (once a process), so detectors can be made at once (now()). */
  static async load(): Promise<void> {
    await loadModule()
  }

  /** A detector made at once; throws unless load() has finished. */
  static now(mode: VadMode = 2): Vad {
    if (loaded === undefined) throw new Error("fvad: the module is not loaded yet (await Vad.load())")
    return Vad.make(loaded, mode)
  }

  private static make(m: FvadModule, mode: VadMode): Vad {
    const inst = m._fvad_new()
    if (inst === 0) throw new Error("fvad: out of memory")
    if (m._fvad_set_mode(inst, mode) !== 0 || m._fvad_set_sample_rate(inst, PHONE_RATE) !== 0) {
      m._fvad_free(inst)
      throw new Error("fvad: mode or sample rate refused")
    }
    const buf = m._malloc(FRAME_SAMPLES * 2)
    return new Vad(m, inst, buf)
  }

  /** Whether one 20 ms frame (160 samples) holds speech. */
  voiced(frame: Int16Array): boolean {
    if (this.freed) throw new Error("fvad: used after free")
    if (frame.length !== FRAME_SAMPLES) throw new RangeError(`a frame is ${FRAME_SAMPLES} samples, not ${frame.length}`)
    // HEAP16 may be replaced when the module's memory grows: read it at each use.
    this.m.HEAP16.set(frame, this.buf >> 1)
    const r = this.m._fvad_process(this.inst, this.buf, FRAME_SAMPLES)
    if (r < 0) throw new Error("fvad: frame refused")
    return r === 1
  }

  free(): void {
    if (this.freed) return
    this.freed = true
    this.m._free(this.buf)
    this.m._fvad_free(this.inst)
  }
}
