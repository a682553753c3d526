// A uPlot chart kept as wide as its box: resized when the box is, and destroyed with it.
import type uPlot from "uplot"

/** Follows `el`'s width (at least 240 px) at `height`; the returned function stops and destroys the plot. */
export function fitToBox(plot: uPlot, el: HTMLElement, height: number): () => void {
  const resize = new ResizeObserver(() => plot.setSize({ width: Math.max(240, el.clientWidth), height }))
  resize.observe(el)
  return () => {
    resize.disconnect()
    plot.destroy()
  }
}
