-- The keys of a provider credential's extra object that the provider does not use (the spec's
-- extra is a free object): kept with the credential, but as their values may be secrets they are
-- encrypted like the secret (AES-256-GCM envelope, bound to tenant and provider) and never returned.

alter table provider_credentials
  add column ignored_extra_enc text check (ignored_extra_enc ~ '^v[0-9]+:');
