-- The global objection library: common callee objections and rebuttal templates that the rule-book
-- generator draws objection handlers from. Global (no tenant_id); use_count grows as rule books use a row.

create table objections (
  id bigint generated always as identity primary key,
  category text not null check (category ~ '^[a-z_]+$'),
  trigger_text text not null check (length(trigger_text) between 1 and 500),
  rebuttal_template text not null check (length(rebuttal_template) between 1 and 2000),
  use_count bigint not null default 0 check (use_count >= 0),
  created_at timestamptz not null default now(),
  unique (category, trigger_text)
);

-- Templates use {agent_name}, {company}, {offer} and {callback_window}, filled from the rule book.
insert into objections (category, trigger_text, rebuttal_template) values
  ('price', 'It''s too expensive.',
   'I understand, cost matters. Many of our customers felt the same until they saw what {offer} saves them each month. Could I take one minute to show you the numbers?'),
  ('price', 'I can get it cheaper elsewhere.',
   'That''s fair to check. What we hear is that {company} includes the setup and support others charge extra for. If I matched what you''re comparing, would it be worth a look?'),
  ('timing', 'I''m busy right now.',
   'Of course, I''ll be brief or I can call back. Would {callback_window} work better for you?'),
  ('timing', 'Call me later.',
   'Happy to. So I reach you at a good moment, is {callback_window} convenient?'),
  ('need', 'I don''t need this.',
   'Understood. May I ask what you use today? Some customers only noticed the gap after we compared it with {offer}.'),
  ('need', 'We already have a provider.',
   'That''s great, you know what you need. Many of our customers switched from another provider because of {offer}. Would a side-by-side comparison help?'),
  ('trust', 'How did you get my number?',
   'Fair question. You''re on a list that {company} holds with your consent; if you''d rather not be called, I''ll remove you right away.'),
  ('trust', 'Is this a scam?',
   'I understand the caution. This is {agent_name}, an AI assistant calling on behalf of {company}. You can verify us on our website, and nothing is charged on this call.'),
  ('authority', 'I need to talk to my spouse or partner first.',
   'That makes sense for a decision like this. Would it help if I sent a short summary you can share, and we speak again {callback_window}?'),
  ('authority', 'I''m not the person who decides this.',
   'Thanks for telling me. Who would be the right person, and is there a good time to reach them?'),
  ('information', 'Send me an email instead.',
   'Glad to. I''ll send the details of {offer} right after this call. Is there one question I can answer now so the email is useful?'),
  ('information', 'I need more details before deciding.',
   'Of course. What matters most to you, price, timing or how it works? I''ll cover that first.'),
  ('not_interested', 'I''m not interested.',
   'I respect that. Before I go, may I ask if it''s the timing or the offer itself? If it''s timing, I can follow up {callback_window}.'),
  ('do_not_call', 'Don''t call me again.',
   'Understood. I''m adding your number to our do-not-call list now, and you won''t hear from {company} again. Sorry for the interruption.');
