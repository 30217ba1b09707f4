-- How many of a legacy (/sse) request's messages the relay has copied onto
-- its session's standalone stream (core/relay.h), so that after a restart
-- a client resuming its /sse stream gets the rest: what the request wrote
-- before the restart but the relay had not copied, and the error the
-- restart ended it with. The requests of legacy sessions already stored
-- count as copied, so that the upgrade repeats nothing.
ALTER TABLE streams ADD COLUMN relayed INTEGER;
UPDATE streams SET relayed = (SELECT COUNT(*) FROM chunks WHERE chunks.stream_id = streams.id)
    WHERE kind = 'request' AND session_id IN (SELECT id FROM sessions WHERE transport = 'sse');
