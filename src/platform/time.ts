// Time as the API writes it: instants as ISO-8601 strings in UTC, an absent one as null.

/** The instant as ISO-8601 (UTC), or null when there is none. */
export const iso = (d: Date | null | undefined): string | null => d?.toISOString() ?? null
