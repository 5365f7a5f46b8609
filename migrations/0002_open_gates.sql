-- How many gates of the run are open (docs/architecture.md, "The run index"),
-- as of the row's `seq`: `GET /v1/gates` lists the open gates of the runs that
-- have any, newest run first, through the partial index below. Rows written
-- before this column existed read 0 until their run's next index write.
ALTER TABLE runs ADD COLUMN open_gates INTEGER NOT NULL DEFAULT 0;

CREATE INDEX runs_with_open_gates ON runs (created_at DESC, run_id DESC) WHERE open_gates > 0;
