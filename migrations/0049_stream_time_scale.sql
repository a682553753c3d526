-- Media streams of simulated calls run their audio at the simulator's time scale (issue 37): the
-- token minted for such a call carries it, so the stream's flood limit (messages a second) is the
-- real-time limit at that pace. A carrier's token is minted at 1: real time, the limit unchanged.
alter table media_stream_tokens
  add column time_scale double precision not null default 1
    check (time_scale >= 0.002 and time_scale <= 1);
