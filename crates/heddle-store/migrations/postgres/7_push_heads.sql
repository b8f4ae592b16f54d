-- The first pending delivery of each task and config, found from an index:
-- the delivery worker reads only these heads, so one task's backlog does
-- not hold back another's deliveries.
CREATE INDEX push_outbox_heads ON push_outbox (agent, task_id, config_id, seq)
    WHERE state = 0;
