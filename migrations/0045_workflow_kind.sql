-- What a workflow is for (issue 36), in one column instead of three marks: a workspace's own campaign
-- (the only kind its workflow list shows), a simulation campaign's hidden workflow (rehearsal), an
-- outreach call's one-callee copy (outreach) or a public demo call's (demo, in the demo workspace,
-- billed to nobody). simulation_of stays the rehearsal's pointer to the workflow it rehearses and
-- compliance.outreach_of the outreach copy's to its source; neither marks anything any more.
alter table workflows
  add column kind text not null default 'campaign' check (kind in ('campaign', 'rehearsal', 'outreach', 'demo'));

update workflows set kind = 'rehearsal' where simulation_of is not null;
update workflows set kind = 'outreach' where compliance ? 'outreach_of' and simulation_of is null;
update workflows set kind = 'demo' where tenant_id in (select tenant_id from demo_workspace) and kind = 'campaign';

-- A rehearsal always names the workflow it rehearses, and nothing else names one.
alter table workflows
  add constraint workflows_rehearsal_of check ((kind = 'rehearsal') = (simulation_of is not null));

-- The workspace's workflow list (GET /api/workflows: its campaigns, newest first).
create index workflows_campaigns_idx on workflows (tenant_id, id desc) where kind = 'campaign';
