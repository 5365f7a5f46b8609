-- The run index (docs/architecture.md, "The run index"): one row per run,
-- written by the run's coordinator when the run is created and whenever its
-- status changes, and read by `GET /v1/runs`. Times are milliseconds since
-- the epoch. `seq` is the run's journal seq when the row was taken: an upsert
-- replaces a row only with a newer one, so a late retry never overwrites a
-- newer status.
CREATE TABLE runs (
  run_id TEXT PRIMARY KEY,
  workflow_id TEXT NOT NULL,
  workflow_version INTEGER NOT NULL,
  status TEXT NOT NULL,
  mode TEXT NOT NULL,
  parent_run_id TEXT,
  created_by TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  finished_at INTEGER,
  error_code TEXT,
  error_message TEXT,
  seq INTEGER NOT NULL
);

-- The listing is newest first, (created_at, run_id) descending, filtered by at
-- most one of these columns at a time in the common case.
CREATE INDEX runs_by_created ON runs (created_at DESC, run_id DESC);
CREATE INDEX runs_by_workflow ON runs (workflow_id, created_at DESC, run_id DESC);
CREATE INDEX runs_by_status ON runs (status, created_at DESC, run_id DESC);
CREATE INDEX runs_by_parent ON runs (parent_run_id, created_at DESC, run_id DESC);
