// Session tokens: HS256 JWTs (jose) with claims sub, tid, role, email, iat, exp and a jti that
// logout revokes. Seven days, as the spec states.
import { randomBytes } from "node:crypto"
import { errors, jwtVerify, SignJWT } from "jose"

export const SESSION_SECONDS = 7 * 24 * 60 * 60

export interface SessionClaims {
  readonly sub: string
  readonly tid: number
  readonly role: string
  readonly email: string
  readonly iat: number
  readonly exp: number
  readonly jti: string
}

export type VerifyResult = { ok: true; claims: SessionClaims } | { ok: false; reason: "expired" | "invalid" }

export interface JwtKeys {
  sign(
    user: { id: number; tenantId: number; role: string; email: string },
    nowSeconds: number,
  ): Promise<{ token: string; claims: SessionClaims }>
  verify(token: string, nowSeconds: number): Promise<VerifyResult>
}

export function makeJwtKeys(secret: string): JwtKeys {
  const key = new TextEncoder().encode(secret)
  return {
    async sign(user, now) {
      const claims: SessionClaims = {
        sub: String(user.id),
        tid: user.tenantId,
        role: user.role,
        email: user.email,
        iat: now,
        exp: now + SESSION_SECONDS,
        jti: randomBytes(16).toString("base64url"),
      }
      const token = await new SignJWT({ tid: claims.tid, role: claims.role, email: claims.email })
        .setProtectedHeader({ alg: "HS256", typ: "JWT" })
        .setSubject(claims.sub)
        .setIssuedAt(claims.iat)
        .setExpirationTime(claims.exp)
        .setJti(claims.jti)
        .sign(key)
      return { token, claims }
    },
    async verify(token, now) {
      try {
        const { payload } = await jwtVerify(token, key, { algorithms: ["HS256"], currentDate: new Date(now * 1000) })
        const { sub, tid, role, email, iat, exp, jti } = payload as Record<string, unknown>
        if (
          typeof sub !== "string" ||
          !/^\d+$/.test(sub) ||
          typeof tid !== "number" ||
          typeof role !== "string" ||
          typeof email !== "string" ||
          typeof iat !== "number" ||
          typeof exp !== "number" ||
          typeof jti !== "string"
        )
          return { ok: false, reason: "invalid" }
        return { ok: true, claims: { sub, tid, role, email, iat, exp, jti } }
      } catch (e) {
        return { ok: false, reason: e instanceof errors.JWTExpired ? "expired" : "invalid" }
      }
    },
  }
}
