// GET /api/sim/personas: the simulated callees of the sim carrier and simulation campaigns, one per
// behaviour, each with the last digit of a test number that selects it.
import { Effect } from "effect"
import { z } from "zod"
import { SIM_PERSONAS } from "../../src/personas/sim-personas.js"
import { json } from "../reply.js"
import { route } from "../route.js"

export default route({
  method: "GET",
  path: "/api/sim/personas",
  auth: "jwt",
  summary:
    "The sim carrier's callees, one per behaviour: a dialed number's last digit (suffix; digits lists every one) " +
    "selects who answers",
  tags: ["simulation"],
  responses: {
    200: {
      description: "Simulated callees",
      schema: z.object({
        personas: z.array(
          z.object({
            id: z.string(),
            name: z.string(),
            description: z.string(),
            behaviour: z.string(),
            suffix: z.string(),
            digits: z.array(z.number().int()),
          }),
        ),
      }),
    },
  },
  handler: () => Effect.succeed(json({ personas: SIM_PERSONAS })),
})
