-- What a decision did (issue 34): a concession approved at another amount than proposed (within the
-- rule book's cap), where the call stood when it was decided (the callee still holding, or the call
-- over), and what a decision after the call wrote into the target's result, said as a sentence.
alter table approvals
  -- An approved concession's amount: the proposal's, or the one the approver set instead; else null.
  add column approved_value_minor bigint check (approved_value_minor > 0),
  -- on_hold: the callee was still holding and heard it; after_call: the call had ended or was ending.
  add column decided_phase text check (decided_phase in ('on_hold', 'after_call')),
  -- What a decision after the call did to the target's result: the outcome it wrote (agreed_after_call,
  -- denied_after_call, escalated_after_call, callback_scheduled) or 'unchanged'; null while not applied
  -- (decided on hold, or as the call was ending: the call's end applies it).
  add column late_outcome text,
  -- What the decision did, as the decide response said it (or, for one made as the call was ending,
  -- as the call's end applied it).
  add column effect text check (length(effect) <= 500);
