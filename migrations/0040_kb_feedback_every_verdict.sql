-- Every verdict is kept (issue 32): a reviewer's next verdict on a turn is a new kb_feedback row, not
-- an update of their earlier one, so the rollup counts every flag and GET /kb/feedback?turn_id= lists
-- them all. The learning policy counts each reviewer's latest verdict on a line (src/kb/learning.ts).
-- Links of rules to older verdicts are left as they were; a reviewer's next verdict on the line
-- takes them off their earlier rows.
alter table kb_feedback drop constraint kb_feedback_tenant_id_turn_id_reviewer_key;

-- A turn's verdicts (the list's turn_id filter, a contact's erase and export), which the unique
-- constraint's index used to serve.
create index kb_feedback_turn_idx on kb_feedback (tenant_id, turn_id, id desc);

-- Each reviewer's latest verdict on a line: the policy's count, and whether a listed verdict stands.
create index kb_feedback_reviewer_line_idx on kb_feedback (tenant_id, workflow_id, line_key, reviewer, id desc);
drop index kb_feedback_line_idx;
