/* longpoll — see longpoll.h. */
#include "longpoll.h"
#include "clock.h"
#include "jsonrpc.h"
#include "session.h"
#include "stream.h"

#include <string.h>

int poll_opted_in(const json_t *params)
{
    return json_is_true(json_object_get(params, "stream"));
}

json_t *poll_ack(json_t *id, const struct stream *st, const char *transport)
{
    return jsonrpc_result(id, json_pack("{s:s, s:s, s:s}", "stream_id", stream_id(st), "status",
                                        "streaming_started", "transport", transport));
}

json_t *poll_chunk_notification(const struct stream *st, long long seq, const char *msg, size_t len,
                                int end)
{
    json_t *message = json_loadb(msg, len, JSON_ALLOW_NUL, NULL);
    if (!message)
        return NULL;
    return jsonrpc_notification("mcpd/chunk",
                                json_pack("{s:s, s:I, s:o, s:b}", "stream_id", stream_id(st), "seq",
                                          (json_int_t)seq, "message", message, "end", end));
}

/* seed 003's states: a stream with nothing in it yet is "initializing". */
static const char *state_of(struct stream *st)
{
    enum stream_state state = stream_state(st);
    if (state == STREAM_ACTIVE && stream_next_seq(st) == 0)
        return "initializing";
    return stream_state_name(state);
}

static json_int_t int_param(json_t *params, const char *key, json_int_t def, json_int_t max)
{
    json_t *v = json_object_get(params, key);
    json_int_t n = json_is_integer(v) ? json_integer_value(v) : def;
    if (n < 0)
        n = 0;
    return n > max ? max : n;
}

json_t *poll_serve(struct session *s, json_t *id, json_t *params, const char *transport)
{
    json_t *sid = json_object_get(params, "stream_id");
    json_t *from = json_object_get(params, "from_seq");
    if (!json_is_string(sid) || (from && !json_is_integer(from)))
        return jsonrpc_error(id, JSONRPC_INVALID_PARAMS,
                             "Invalid params: mcpd/poll needs stream_id (string) and from_seq "
                             "(integer >= 0)",
                             NULL);
    struct stream *st = stream_find(json_string_value(sid));
    if (!st || strcmp(stream_session(st), session_id(s)) != 0) {
        stream_unref(st);
        return jsonrpc_error(id, JSONRPC_SESSION_NOT_FOUND, "Stream session not found or expired",
                             json_pack("{s:O, s:s}", "stream_id", sid, "transport", transport));
    }
    json_int_t seq = from ? json_integer_value(from) : 0;
    if (stream_cursor_check(st, seq) != STREAM_CURSOR_OK) {
        stream_unref(st);
        return jsonrpc_error(id, JSONRPC_INVALID_PARAMS,
                             "Invalid params: from_seq must be >= 0 and not past the end of a "
                             "stream still being written (poll on from the last next_seq)",
                             NULL);
    }
    json_int_t wait_ms = int_param(params, "wait_ms", 0, POLL_MAX_WAIT_MS);
    json_int_t max_chunks = int_param(params, "max_chunks", 100, POLL_MAX_CHUNKS);
    if (max_chunks == 0)
        max_chunks = 1;

    struct stream_reader tok;
    stream_observe(st, &tok);
    json_t *chunks = json_array();
    int64_t deadline = clock_mono_ms() + wait_ms;
    for (json_int_t n = 0; n < max_chunks; n++) {
        struct stream_chunk ch;
        /* Only the first chunk is waited for; the rest are what is there. */
        enum stream_wait w = stream_read(st, &tok, seq, n == 0 ? deadline : 0, &ch);
        if (w != STREAM_CHUNK)
            break;
        json_t *message = json_loadb(ch.msg, ch.len, JSON_ALLOW_NUL, NULL);
        json_array_append_new(chunks,
                              json_pack("{s:I, s:o, s:b}", "seq", (json_int_t)ch.seq, "message",
                                        message ? message : json_null(), "end", ch.is_end));
        seq = ch.seq + 1;
    }
    int64_t next_available = stream_next_seq(st);
    const char *state = state_of(st);
    int active = stream_state(st) == STREAM_ACTIVE;
    json_t *result = json_pack("{s:s, s:o, s:b, s:I, s:s}", "stream_id", stream_id(st), "chunks",
                               chunks, "has_more", active || seq < next_available, "next_seq",
                               (json_int_t)seq, "state", state);
    stream_unref(st);
    return jsonrpc_result(id, result);
}
