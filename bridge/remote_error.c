/* remote_error — see remote_error.h. */
#include "remote_error.h"

#include <stdio.h>
#include <string.h>

char *remote_error_curl(char *out, size_t cap, const char *host, CURLcode cc,
                        const char *curl_detail, long connect_timeout_ms)
{
    const char *d = curl_detail && *curl_detail ? curl_detail : curl_easy_strerror(cc);
    switch (cc) {
    case CURLE_COULDNT_RESOLVE_HOST:
        snprintf(out, cap,
                 "mcp-bridge: cannot resolve the host name %s (check the URL's spelling and "
                 "your DNS or network connection)",
                 host);
        break;
    case CURLE_COULDNT_RESOLVE_PROXY:
        snprintf(out, cap, "mcp-bridge: cannot resolve the proxy host (check HTTPS_PROXY): %s", d);
        break;
    case CURLE_COULDNT_CONNECT:
        snprintf(out, cap,
                 "mcp-bridge: cannot connect to %s (%s): is the server running and the URL's "
                 "port right? Check firewalls too",
                 host, d);
        break;
    case CURLE_OPERATION_TIMEDOUT:
        snprintf(out, cap,
                 "mcp-bridge: timed out talking to %s (%s): the host may be down or a firewall "
                 "drops the traffic (--connect-timeout-ms is %ld)",
                 host, d, connect_timeout_ms);
        break;
    case CURLE_PEER_FAILED_VERIFICATION:
        snprintf(out, cap,
                 "mcp-bridge: TLS certificate of %s is not trusted (%s); pass --cacert with "
                 "the CA that signed it, or fix the server's certificate chain",
                 host, d);
        break;
    case CURLE_SSL_CACERT_BADFILE:
        snprintf(out, cap, "mcp-bridge: cannot use the --cacert file (%s)", d);
        break;
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER:
        snprintf(out, cap,
                 "mcp-bridge: TLS handshake with %s failed (%s): is the URL's port a TLS port, "
                 "and does the server speak TLS 1.2 or later?",
                 host, d);
        break;
    case CURLE_GOT_NOTHING:
        snprintf(out, cap,
                 "mcp-bridge: %s closed the connection without answering (is this an HTTP "
                 "server? Check the URL's port and scheme)",
                 host);
        break;
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_PARTIAL_FILE:
        snprintf(out, cap,
                 "mcp-bridge: the connection to %s broke (%s): the server may have restarted "
                 "or a proxy cut it; try again",
                 host, d);
        break;
    case CURLE_WEIRD_SERVER_REPLY:
    case CURLE_UNSUPPORTED_PROTOCOL:
    case CURLE_HTTP2:
        snprintf(out, cap,
                 "mcp-bridge: %s did not answer in HTTP (%s): check the URL's scheme and port",
                 host, d);
        break;
    default:
        snprintf(out, cap, "mcp-bridge: request to %s failed: %s", host, d);
        break;
    }
    return out;
}

/* Copies at most n printable bytes of s into dst. */
static void hint(char *dst, size_t cap, const char *s)
{
    size_t j = 0;
    for (size_t i = 0; s && s[i] && j + 4 < cap && i < 160; i++)
        dst[j++] = (unsigned char)s[i] < ' ' || s[i] == 127 ? ' ' : s[i];
    dst[j] = '\0';
}

char *remote_error_status(char *out, size_t cap, const char *host, long status,
                          const char *body_hint)
{
    char h[200];
    hint(h, sizeof h, body_hint);
    const char *what;
    if (status == 401)
        what = "refused the credentials: check the token (--token-env / --token-file)";
    else if (status == 403)
        what = "refused access: the token lacks the needed permission or scope";
    else if (status == 404)
        what = "has no MCP endpoint at this path: check the URL";
    else if (status == 405)
        what = "does not accept MCP requests at this URL (method not allowed): check the URL";
    else if (status == 406 || status == 415)
        what = "rejected the request's format: is this an MCP Streamable HTTP endpoint?";
    else if (status == 408 || status == 429)
        what = "is busy or rate-limiting: try again later";
    else if (status == 413)
        what = "refused a message as too large";
    else if (status >= 300 && status < 400)
        what = "redirects this URL elsewhere: use the final URL";
    else if (status >= 500)
        what = "had an internal error or its proxy could not reach it: check the server's "
               "logs";
    else
        what = "rejected the request";
    snprintf(out, cap, "mcp-bridge: %s answered HTTP %ld: it %s%s%s%s", host, status, what,
             *h ? " (body: " : "", h, *h ? ")" : "");
    return out;
}

char *remote_error_silent(char *out, size_t cap, const char *host, long timeout_ms, int had_headers)
{
    snprintf(out, cap,
             had_headers
                 ? "mcp-bridge: %s stopped sending on the response stream for %ld ms: the "
                   "server or a proxy in between is stuck (raise --response-timeout-ms for "
                   "slow tools)"
                 : "mcp-bridge: %s accepted the request but sent no response within %ld ms: the "
                   "server is overloaded or stuck (raise --response-timeout-ms for slow tools)",
             host, timeout_ms);
    return out;
}
