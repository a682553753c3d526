// GET /api/reports/weekly: the workspace's calls, connect rate, minutes, spend, approvals and
// outcomes over from..to (inclusive UTC dates, at most 366 days) as a PDF, streamed.
import { Effect } from "effect"
import { z } from "zod"
import { periodOf, reportFilename, weeklyReport } from "../../src/reports/reports.service.js"
import { drawWeeklyPdf, pipePdf } from "../../src/reports/weekly.pdf.js"
import { stream } from "../reply.js"
import { route } from "../route.js"
import { callerOf } from "../session.js"

export default route({
  method: "GET",
  path: "/api/reports/weekly",
  auth: "jwt",
  summary:
    "Report of a period as a PDF: from and to are inclusive dates (YYYY-MM-DD, UTC), to not before from, at most " +
    "366 days",
  tags: ["reports"],
  query: z.object({
    from: z.string({ error: "is required" }).max(10, "must be a date written YYYY-MM-DD"),
    to: z.string({ error: "is required" }).max(10, "must be a date written YYYY-MM-DD"),
  }),
  responses: {
    200: { description: "The report (attachment parley-report-<from>-to-<to>.pdf)", contentType: "application/pdf" },
  },
  handler: ({ principal, query }) =>
    Effect.gen(function* () {
      const c = yield* callerOf(principal)
      const period = yield* periodOf(query.from, query.to)
      const figures = yield* weeklyReport(c.tenantId, period)
      return stream("application/pdf", (writer) => pipePdf(drawWeeklyPdf(figures), writer), 200, {
        "Content-Disposition": `attachment; filename="${reportFilename(period)}"`,
        "Cache-Control": "private, no-store",
      })
    }),
})
