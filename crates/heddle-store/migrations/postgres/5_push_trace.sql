-- Each push delivery keeps the W3C trace context of the event it reports,
-- so it joins the caller's trace however late it goes out ('' = none).
ALTER TABLE push_outbox ADD COLUMN traceparent TEXT NOT NULL DEFAULT '';
ALTER TABLE push_outbox ADD COLUMN tracestate TEXT NOT NULL DEFAULT '';
