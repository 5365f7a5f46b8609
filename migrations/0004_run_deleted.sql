-- Retention (docs/architecture.md, "Retention"): a run whose object deleted it
-- keeps its row here with status 'deleted' and the time it was deleted (ms
-- since the epoch); null for every other row.
ALTER TABLE runs ADD COLUMN deleted_at INTEGER;
