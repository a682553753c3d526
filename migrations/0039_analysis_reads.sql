-- Post-call analysis reads a call's approved concession and callback (src/analysis/analysis.repo.ts
-- loadCallWork, a group of calls per statement at the hangup rate): by the call, not by a scan of the
-- workspace's approvals.
create index approvals_call_idx on approvals (call_id) where call_id is not null;
