-- A run's turn sequence moves off the runs row into a row of its own, so storing turns (which takes
-- seqs in the same statement that inserts them, under this row's lock) never waits on the run row's
-- lease and status updates, and those never wait on a burst of turns. Made on a run's first turns.
create table run_turn_seqs (
  run_id bigint primary key references runs (id) on delete cascade,
  -- the last turn seq handed out in this run (turns.seq is strictly increasing per run).
  last_seq bigint not null default 0
);
insert into run_turn_seqs (run_id, last_seq) select id, turn_seq from runs where turn_seq > 0;
alter table runs drop column turn_seq;
