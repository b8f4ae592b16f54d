-- What each leased run was asked with beside its message (its send
-- configuration and metadata as a protobuf SendMessageRequest with no
-- message, the extensions the client activated, its protocol version), so a
-- replica that resumes the run of a dead one gives the agent the same.
-- Kept with the lease: it lives exactly as long as the run.
ALTER TABLE task_leases
    ADD COLUMN run_request BYTEA,
    ADD COLUMN run_extensions TEXT[],
    ADD COLUMN run_version TEXT;
