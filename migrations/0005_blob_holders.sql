-- Which runs hold which blobs (docs/architecture.md, "Blobs"): one row per
-- (blob, run) that carries a reference to it, written before the blob's bytes
-- are stored in R2 (`sha256/<hex>` in the BLOBS bucket). `GET /v1/blobs/{digest}`
-- serves a blob to a token that may read a run of `workflow_id`; releasing a
-- run (delete, erase) removes its rows and deletes the blobs nobody else holds.
CREATE TABLE blob_holders (
  digest TEXT NOT NULL,
  run_id TEXT NOT NULL,
  workflow_id TEXT NOT NULL,
  PRIMARY KEY (digest, run_id)
);

CREATE INDEX blob_holders_by_run ON blob_holders (run_id);
