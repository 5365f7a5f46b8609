-- How each run was started (its `trigger`'s kind: api, plan, parent, schedule,
-- event, webhook), for `GET /v1/runs?trigger=<kind>`. Rows written before this
-- column existed read 'api' until their run's next index write.
ALTER TABLE runs ADD COLUMN trigger_kind TEXT NOT NULL DEFAULT 'api';

CREATE INDEX runs_by_trigger ON runs (trigger_kind, created_at DESC, run_id DESC);
