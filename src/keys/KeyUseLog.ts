// The writer behind auth's KeyUseLog port: API keys' last uses land in api_keys, this domain's table.
import { Layer } from "effect"
import { KeyUseLog } from "../auth/Auth.js"
import { recordKeyUses } from "./keys.repo.js"

export const KeyUseLogLive = Layer.succeed(KeyUseLog, recordKeyUses)
