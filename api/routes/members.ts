// The team of a workspace: GET /members, POST /members/invite, PATCH and DELETE /members/{user_id},
// POST /members/leave, POST /members/invitations/{invitation_id}/revoke; and, for the invited
// person, POST /auth/invitations/inspect and /auth/invitations/accept. Who may call which is the
// route's permission (src/auth/permissions.ts); the rules of the team are src/members.
import { Effect } from "effect"
import { z } from "zod"
import { ROLES } from "../../src/auth/permissions.js"
import {
  acceptInvitation,
  changeRole,
  inspectInvitation,
  invite,
  leaveWorkspace,
  listMembers,
  removeFromWorkspace,
  revokeInvitation,
} from "../../src/members/members.service.js"
import { AppConfig } from "../../src/platform/AppConfig.js"
import { trustedBaseUrl } from "../base-url.js"
import { json } from "../reply.js"
import { route } from "../route.js"
import { Email, Id } from "../schemas.js"
import { sessionCookie, userOf } from "../session.js"

const InvitedRole = z.enum(["admin", "supervisor", "analyst"], {
  message: "must be admin, supervisor or analyst (an owner is made by a transfer)",
})
const Token = z.string().min(1, "is required").max(200, "must be at most 200 characters")

export const membersList = route({
  method: "GET",
  path: "/members",
  auth: "jwt-only",
  summary: "The workspace's members and its open invitations",
  tags: ["members"],
  responses: {
    200: {
      description:
        "{members: [{user_id, email, full_name, role, email_verified, joined_at}], invitations: [{id, email, role, " +
        "status: pending|expired, invited_by_user_id, created_at, expires_at}]}",
    },
  },
  handler: ({ principal }) =>
    Effect.gen(function* () {
      const user = yield* userOf(principal)
      return json(yield* listMembers(user.tenantId))
    }),
})

export const membersInvite = route({
  method: "POST",
  path: "/members/invite",
  auth: "jwt-only",
  permission: "admin",
  audit: "service",
  summary: "Invite an address to join with a role: an emailed single-use link, valid 7 days",
  tags: ["members"],
  body: { json: z.object({ email: Email, role: InvitedRole }) },
  responses: {
    201: { description: "{invitation, email_sent}; a pending invitation to the same address is replaced" },
    409: {
      description:
        "ALREADY_MEMBER, MEMBER_OF_ANOTHER_WORKSPACE, INVITATION_LIMIT, or WORKFLOW_NOT_READY (owner unverified)",
    },
  },
  handler: ({ principal, body, clientIp, headers }) =>
    Effect.gen(function* () {
      const user = yield* userOf(principal)
      const config = yield* AppConfig
      const b = body!
      const made = yield* invite(
        { principal: user, ip: clientIp },
        { email: b.email, role: b.role, baseUrl: trustedBaseUrl(config, headers) },
      )
      return json(made, 201)
    }),
})

export const membersUpdate = route({
  method: "PATCH",
  path: "/members/{user_id}",
  auth: "jwt-only",
  permission: "admin",
  audit: "service",
  summary: "Change a member's role; role owner transfers ownership (the owner only; they become an admin)",
  tags: ["members"],
  params: z.object({ user_id: Id }),
  body: { json: z.object({ role: z.enum(ROLES, { message: `must be one of ${ROLES.join(", ")}` }) }) },
  responses: {
    200: { description: "The member {user_id, email, full_name, role, email_verified, joined_at}" },
    409: { description: "OWNER_REQUIRED: the owner's role changes only by a transfer" },
  },
  handler: ({ principal, params, body, clientIp }) =>
    Effect.gen(function* () {
      const user = yield* userOf(principal)
      return json(yield* changeRole({ principal: user, ip: clientIp }, params.user_id, body!.role))
    }),
})

export const membersDelete = route({
  method: "DELETE",
  path: "/members/{user_id}",
  auth: "jwt-only",
  permission: "admin",
  audit: "service",
  summary: "Remove a member (never the owner): their sessions end and they can no longer sign in",
  tags: ["members"],
  params: z.object({ user_id: Id }),
  responses: { 200: { description: "{removed: true, user_id}" }, 409: { description: "OWNER_REQUIRED" } },
  handler: ({ principal, params, clientIp }) =>
    Effect.gen(function* () {
      const user = yield* userOf(principal)
      return json(yield* removeFromWorkspace({ principal: user, ip: clientIp }, params.user_id))
    }),
})

export const membersLeave = route({
  method: "POST",
  path: "/members/leave",
  auth: "jwt-only",
  permission: "read",
  summary: "Leave the workspace (anyone but the owner, who transfers ownership first)",
  tags: ["members"],
  responses: { 200: { description: "{removed: true, user_id}" }, 409: { description: "OWNER_REQUIRED" } },
  handler: ({ principal, clientIp }) =>
    Effect.gen(function* () {
      const user = yield* userOf(principal)
      return json(yield* leaveWorkspace({ principal: user, ip: clientIp }))
    }),
})

export const invitationRevoke = route({
  method: "POST",
  path: "/members/invitations/{invitation_id}/revoke",
  auth: "jwt-only",
  permission: "admin",
  audit: "service",
  summary: "Revoke an open invitation: its link stops working (idempotent)",
  tags: ["members"],
  params: z.object({ invitation_id: Id }),
  responses: { 200: { description: "The invitation, status revoked" } },
  handler: ({ principal, params, clientIp }) =>
    Effect.gen(function* () {
      const user = yield* userOf(principal)
      return json(yield* revokeInvitation({ principal: user, ip: clientIp }, params.invitation_id))
    }),
})

export const invitationInspect = route({
  method: "POST",
  path: "/auth/invitations/inspect",
  auth: "public",
  summary: "What an invitation link is for: {email, role, workspace{id, name}, expires_at}",
  tags: ["auth", "members"],
  body: { json: z.object({ token: Token }) },
  handler: ({ body }) => Effect.map(inspectInvitation(body!.token), (found) => json(found)),
})

export const invitationAccept = route({
  method: "POST",
  path: "/auth/invitations/accept",
  auth: "public",
  summary: "Join a workspace by an invitation link, with a password of your choosing; signs you in",
  tags: ["auth", "members"],
  body: {
    json: z.object({
      token: Token,
      password: z.string().min(10, "must be at least 10 characters").max(256, "must be at most 256 characters"),
      full_name: z.string().trim().min(1).max(200, "must be at most 200 characters").optional(),
    }),
  },
  responses: {
    201: { description: "{token, expires_in, expires_at, user, tenant}; sets the svc_session cookie" },
    400: { description: "INVALID_TOKEN (used, revoked, unknown) or TOKEN_EXPIRED" },
  },
  handler: ({ body, clientIp }) =>
    Effect.map(
      acceptInvitation({ token: body!.token, password: body!.password, fullName: body!.full_name, ip: clientIp }),
      (session) => json(session, 201, { "Set-Cookie": sessionCookie(session.token), "Cache-Control": "no-store" }),
    ),
})

export const memberRoutes = [
  membersList,
  membersInvite,
  membersLeave,
  membersUpdate,
  membersDelete,
  invitationRevoke,
  invitationInspect,
  invitationAccept,
]
