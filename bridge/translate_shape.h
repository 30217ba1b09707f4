/* translate_shape — the JSON of the 2025 ↔ 2026-07-28 translation
 * (translate.h): how a 2026-07-28-only server's refusal of initialize
 * looks, the initialize result the bridge builds from server/discover, the
 * per-request _meta a 2025 client's request gains, and the capability an
 * input request needs of the client.
 *
 * Pure: no I/O. Returned JSON values are new references the caller
 * releases (json_decref); returned strings are static. */
#ifndef MCP_BRIDGE_TRANSLATE_SHAPE_H
#define MCP_BRIDGE_TRANSLATE_SHAPE_H

#include <jansson.h>

#define TRANSLATE_LATEST_LEGACY "2025-11-25" /* answered to a client asking for another */

/* 1 when error (a JSON-RPC error object answering initialize) may come from
 * a server that speaks only the stateless revision: "method not found"
 * (initialize is gone in 2026-07-28), the missing-header error of that
 * revision (-32020), or an unsupported-version error whose data.supported
 * lists no revision older than 2026-07-28. */
int translate_shape_refusal(const json_t *error);

/* 1 when result (of server/discover) lists 2026-07-28 in supportedVersions;
 * with only_stateless, also no revision older than it (such a server
 * answers no initialize, so the bridge need not try). */
int translate_shape_discover_ok(const json_t *result, int only_stateless);

/* The result of initialize for a 2025 client whose initialize params are
 * init_params, built from the server/discover result: the client's
 * protocolVersion when the bridge serves it (else the latest 2025
 * revision), the server's capabilities less what the bridge does not
 * relay (list-changed and subscriptions come on a 2026-07-28 listen
 * stream; extensions) plus logging (logging/setLevel is answered by the
 * bridge), serverInfo from _meta (or a placeholder) and instructions. */
json_t *translate_shape_initialize_result(const json_t *discover, const json_t *init_params);

/* A copy of request m with params._meta carrying the revision, the
 * client's capabilities and info (borrowed, may be NULL) and log_level
 * (may be NULL); whatever _meta m had (a progress token) stays. */
json_t *translate_shape_request(const json_t *m, const json_t *caps, const json_t *info,
                                const char *log_level);

/* The capability (as "elicitation", "elicitation.url", "sampling",
 * "sampling.tools" or "roots") that an input request of method with params
 * needs and caps (the client's) lacks; NULL when declared, or when the
 * method is not one the bridge knows (the client answers it). */
const char *translate_shape_missing_capability(const char *method, const json_t *params,
                                               const json_t *caps);

#endif
