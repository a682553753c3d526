// Draws the weekly report's figures as a PDF (pdfkit, the standard Helvetica fonts, vector bar
// chart) and streams it to a writer that applies backpressure.
import PDFDocument from "pdfkit"
import type { WeeklyFigures } from "./weekly.figures.js"

/** The part of the HTTP stream writer this needs: resolves false once the client is gone. */
export interface ChunkWriter {
  write(chunk: Uint8Array): Promise<boolean>
}

export interface PdfOptions {
  /** Deflate the content streams (pdfkit's default). Tests read the text either way. */
  readonly compress?: boolean
}

// The standard fonts speak WinAnsi only: anything outside it (a workspace named in Devanagari)
// becomes "?" rather than a wrong glyph, and money in rupees is written with the currency code.
const WIN_ANSI_EXTRA = "€‚ƒ„…†‡ˆ‰Š‹ŒŽ‘’“”•–—˜™š›œžŸ"
export function pdfText(text: string): string {
  return [...text]
    .map((ch) => {
      const c = ch.codePointAt(0)!
      return (c >= 0x20 && c <= 0x7e) || (c >= 0xa0 && c <= 0xff) || WIN_ANSI_EXTRA.includes(ch) ? ch : "?"
    })
    .join("")
}

/** A formatAmount display string as the PDF writes it: "₹1,234.56" → "INR 1,234.56"; "$0.35" unchanged. */
export const pdfMoney = (display: string): string => pdfText(display.replace(/₹\s?/g, "INR "))

const MARGIN = 50
const INK = "#1f2933"
const MUTED = "#616e7c"
const ACCENT = "#2f6fde"
const RULE = "#cbd2d9"

const MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
/** 2025-03-07 → "7 Mar 2025". */
const longDate = (day: string) =>
  `${Number(day.slice(8, 10))} ${MONTHS[Number(day.slice(5, 7)) - 1]} ${day.slice(0, 4)}`

/** A round axis maximum at or above `max`, with its tick step. */
export function axisScale(max: number): { top: number; step: number } {
  if (max <= 0) return { top: 4, step: 1 }
  const raw = max / 4
  const magnitude = 10 ** Math.floor(Math.log10(raw))
  const step =
    [1, 2, 2.5, 5, 10].map((m) => m * magnitude).find((s) => s >= raw && Number.isInteger(s)) ?? Math.ceil(raw)
  return { top: Math.ceil(max / step) * step, step }
}

/** Draws the report and ends the document; read the PDF from the returned stream. */
export function drawWeeklyPdf(f: WeeklyFigures, opts: PdfOptions = {}): PDFKit.PDFDocument {
  const doc = new PDFDocument({
    size: "A4",
    margin: MARGIN,
    compress: opts.compress ?? true,
    info: {
      Title: pdfText(`Parley report ${f.period.from} to ${f.period.to}`),
      Author: "Parley",
      Subject: pdfText(`Calls, approvals and spend of ${f.workspace}`),
    },
  })
  const width = doc.page.width - 2 * MARGIN
  const bottom = () => doc.page.height - MARGIN

  // Header
  doc.fillColor(INK).font("Helvetica-Bold").fontSize(20).text("Parley report", MARGIN, MARGIN)
  doc.moveDown(0.2)
  doc.font("Helvetica").fontSize(11).fillColor(MUTED)
  doc.text(pdfText(`Workspace: ${f.workspace}`))
  doc.text(
    `Period: ${longDate(f.period.from)} to ${longDate(f.period.to)} ` +
      `(${f.period.days} ${f.period.days === 1 ? "day" : "days"}, UTC)`,
  )
  doc.text(`Generated ${f.generated_at.slice(0, 16).replace("T", " ")} UTC`)
  rule(doc, width)

  const section = (title: string) => {
    doc.moveDown(0.8)
    doc.fillColor(INK).font("Helvetica-Bold").fontSize(13).text(title, MARGIN)
    doc.moveDown(0.3)
  }
  /** A label and its value on one line, each its own text run. */
  const pair = (label: string, value: string) => {
    const y = doc.y
    doc.font("Helvetica").fontSize(11).fillColor(MUTED).text(label, MARGIN, y, { width: 200, lineBreak: false })
    doc
      .font("Helvetica-Bold")
      .fillColor(INK)
      .text(pdfText(value), MARGIN + 210, y, { width: width - 210, lineBreak: false })
    doc.x = MARGIN
    doc.y = y + 17
  }

  section("Calls")
  pair("Calls placed", f.display.placed)
  pair("Calls connected", f.display.connected)
  pair("Connect rate", f.display.connect_rate)
  pair("Minutes talked", f.display.minutes_talked)
  pair("Spend", pdfMoney(f.display.spend))

  section("Approvals")
  pair("Requested", String(f.approvals.requested))
  pair("Approved", String(f.approvals.approved))
  pair("Denied", String(f.approvals.denied))
  pair("Expired", String(f.approvals.expired))
  if (f.approvals.pending > 0) pair("Still pending", String(f.approvals.pending))

  // Chart: title, 190 pt of plot, axis labels.
  const chartHeight = 250
  if (doc.y + chartHeight > bottom()) doc.addPage()
  section("Calls per day")
  drawChart(doc, f, MARGIN, doc.y, width, 190)
  doc.x = MARGIN

  section("Outcomes")
  if (f.outcomes.length === 0) {
    doc.font("Helvetica").fontSize(11).fillColor(MUTED).text("No calls were placed in this period.", MARGIN)
  } else {
    const cols = [MARGIN, MARGIN + 260, MARGIN + 360]
    const row = (cells: string[], bold: boolean) => {
      if (doc.y + 17 > bottom()) doc.addPage()
      const y = doc.y
      doc
        .font(bold ? "Helvetica-Bold" : "Helvetica")
        .fontSize(11)
        .fillColor(bold ? INK : MUTED)
      cells.forEach((c, i) => {
        doc.text(pdfText(c), cols[i]!, y, { width: i === 0 ? 250 : 90, lineBreak: false })
      })
      doc.x = MARGIN
      doc.y = y + 17
    }
    row(["Outcome", "Calls", "Share"], true)
    for (const o of f.outcomes)
      row([o.outcome.replace(/_/g, " "), String(o.calls), `${o.share_pct.toFixed(1)}%`], false)
  }

  doc.end()
  return doc
}

function rule(doc: PDFKit.PDFDocument, width: number) {
  doc.moveDown(0.6)
  doc
    .moveTo(MARGIN, doc.y)
    .lineTo(MARGIN + width, doc.y)
    .lineWidth(0.5)
    .strokeColor(RULE)
    .stroke()
}

/** One bar per day on labelled axes: calls (y) against the day (x, UTC). */
function drawChart(doc: PDFKit.PDFDocument, f: WeeklyFigures, x0: number, y0: number, width: number, height: number) {
  const left = x0 + 44 // room for the y tick labels and the axis title
  const plotW = width - 44
  const plotTop = y0 + 6
  const plotH = height - 40 // room for the day labels and the axis title below
  const baseY = plotTop + plotH
  const max = Math.max(0, ...f.per_day.map((d) => d.calls))
  const { top, step } = axisScale(max)
  const slot = plotW / Math.max(1, f.per_day.length)

  // Grid and y ticks
  doc.font("Helvetica").fontSize(8).fillColor(MUTED)
  for (let v = 0; v <= top; v += step) {
    const y = baseY - (v / top) * plotH
    doc
      .moveTo(left, y)
      .lineTo(left + plotW, y)
      .lineWidth(0.25)
      .strokeColor(RULE)
      .stroke()
    doc.text(String(v), x0 + 10, y - 3, { width: 30, align: "right", lineBreak: false })
  }

  // Bars
  const barW = Math.max(0.5, slot * 0.7)
  f.per_day.forEach((d, i) => {
    if (d.calls === 0) return
    const h = (d.calls / top) * plotH
    const x = left + i * slot + (slot - barW) / 2
    doc
      .rect(x, baseY - h, barW, h)
      .fillColor(ACCENT)
      .fill()
    if (f.per_day.length <= 31) {
      doc
        .fillColor(INK)
        .fontSize(7)
        .text(String(d.calls), x - 6, baseY - h - 9, { width: barW + 12, align: "center", lineBreak: false })
    }
  })

  // Axes
  doc
    .moveTo(left, plotTop)
    .lineTo(left, baseY)
    .lineTo(left + plotW, baseY)
    .lineWidth(0.8)
    .strokeColor(INK)
    .stroke()

  // Day labels, thinned so they never overlap (about 34 pt each)
  const every = Math.max(1, Math.ceil(34 / slot))
  doc.fontSize(7).fillColor(MUTED)
  f.per_day.forEach((d, i) => {
    if (i % every !== 0) return
    const cx = left + i * slot + slot / 2
    doc
      .moveTo(cx, baseY)
      .lineTo(cx, baseY + 3)
      .lineWidth(0.5)
      .strokeColor(INK)
      .stroke()
    doc.text(d.day.slice(5), cx - 17, baseY + 5, { width: 34, align: "center", lineBreak: false })
  })

  // Axis titles
  doc.fontSize(9).fillColor(INK)
  doc.text("Day (UTC)", left, baseY + 20, { width: plotW, align: "center", lineBreak: false })
  const midY = plotTop + plotH / 2
  doc.save().rotate(-90, { origin: [x0 + 4, midY] })
  doc.text("Calls", x0 + 4 - 20, midY - 4, { width: 40, align: "center", lineBreak: false })
  doc.restore()

  doc.y = y0 + height
}

/**
 * Sends the document to the writer chunk by chunk, waiting for the socket after each one; stops
 * (and discards the rest) when the client goes away.
 */
export async function pipePdf(doc: PDFKit.PDFDocument, writer: ChunkWriter): Promise<void> {
  try {
    for await (const chunk of doc as AsyncIterable<Buffer>) {
      if (!(await writer.write(chunk))) break
    }
  } finally {
    doc.destroy()
  }
}
