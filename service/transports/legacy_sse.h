/* legacy_sse — the HTTP+SSE transport of MCP 2024-11-05, for the clients
 * and bridges that speak only it (the TypeScript SDK's SSEClientTransport,
 * older Python clients, mcp-remote and the like).
 *
 * What the client sees. GET /sse opens an event stream whose first event is
 * `event: endpoint` with `data: /messages?sessionId=<id>`, a URL relative to
 * /sse. The client POSTs each JSON-RPC message there (a batch only on a
 * 2025-03-26 session); a POST is answered 202 "Accepted" at once, and every
 * server→client message of the session (responses, progress, logs,
 * server→client requests) comes on the /sse stream as `event: message` with
 * an `id:`. A dropped /sse is resumed with GET /sse and Last-Event-ID: the
 * same session goes on, nothing is lost, nothing is sent twice. Refusals
 * are as on /mcp: 404 for an unknown session, 400 -32700 for bad JSON, 415
 * for a wrong Content-Type, 401/403 from the same auth and Host/Origin
 * checks (http_shared.h), the same body limit and connection limits. The
 * /sse stream lasts as long as its token: revoked or expired, it ends with
 * ": token revoked" or ": token expired", initialized or not.
 *
 * How it works.
 *
 * The client learns its session id from the endpoint event, before it
 * initializes. So GET /sse reserves an id (random, like every session id,
 * kept in memory with the principal that asked) and the initialize POSTed
 * to it creates the session with exactly that id (session_origin.id). From
 * then on it is an ordinary stored session: it survives restarts, expires
 * when idle, belongs to its principal. A reservation nobody initialized is
 * forgotten a minute after its last /sse connection closed. The endpoint
 * event carries the id as its event id, so an EventSource that reconnects
 * before any message finds its reservation, or its session, again.
 *
 * The /sse stream follows the session's standalone stream exactly as GET
 * /mcp does (one connection holds the session's GET slot), and each event
 * id is a cursor on that stream (stream_event_id). Each request's own
 * stream (what core_submit returns) is copied onto the standalone stream by
 * one relay thread, as http.c's JSON mode relays what precedes a response.
 *
 * Why relay instead of following every request stream on the connection,
 * as push.c does: a legacy client resumes with ONE Last-Event-ID. With one
 * stream per session, in one order, that id says exactly what the client
 * has seen, and GET /sse + Last-Event-ID replays everything after it from
 * the store, once: replies that came while no /sse was open, and those
 * from before a restart. Following N request streams on one connection,
 * the id of the last event would name a position on one of them and say
 * nothing about the other N-1, so a resume would lose or repeat messages.
 * The relay runs whether or not a /sse is open, and what it appends is
 * committed before any /sse can send it.
 *
 * Limit: the relay's progress is not stored. If mcpd is killed while a
 * request is in flight, what that request wrote but the relay had not yet
 * copied, and the "interrupted by server restart" error the restart gives
 * it, stay on the request's stream and do not reach the /sse stream. */
#ifndef MCPD_LEGACY_SSE_H
#define MCPD_LEGACY_SSE_H

struct _u_instance;

/* Registers GET /sse and POST /messages on the server http.c runs, and
 * starts the relay thread. Call from http_start, after the http
 * configuration is set. */
void legacy_sse_add_endpoints(struct _u_instance *inst);
/* The Allow header for a request to one of those paths with another
 * method (answered 405 by http.c); NULL for other paths. Static string. */
const char *legacy_sse_allow(const char *url_path);
/* Stops the relay and forgets the reservations (after the server stopped:
 * no connection is left). */
void legacy_sse_stop(void);

#endif
