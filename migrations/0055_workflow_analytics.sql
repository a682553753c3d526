-- Campaign analytics (issue 39, GET /api/workflows/{id}/analytics): a workflow's calls by when they
-- were placed (the columns a call's updates never change, so those stay HOT updates), and agent
-- turns with a measured latency by run and time (the few audio turns, not every turn), for the
-- latency percentiles. Not enough for the 200 ms goal at a million calls (bench/RESULTS.md): rollups
-- maintained as calls end are the next step.
create index calls_workflow_started_idx on calls (workflow_id, started_at);
create index turns_latency_idx on turns (run_id, at) include (latency_ms)
  where latency_ms is not null and speaker = 'agent';
