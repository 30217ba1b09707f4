/* Unit tests of mcp-bridge's OAuth client, its pure parts: PKCE S256
 * against RFC 7636's Appendix B vector, the WWW-Authenticate parameters,
 * the well-known metadata URLs in the specification's order, and the
 * token file (0600 in a 0700 directory, one entry per server, forgotten by
 * a logout). */
#include "check.h"

#include "oauth_store.h"
#include "oauth_util.h"
#include "b64url.h"
#include "pkce.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static void test_pkce(void)
{
    char out[PKCE_MAX];
    /* RFC 7636, Appendix B */
    pkce_challenge("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk", out);
    CHECK_STR(out, "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM");
    static const unsigned char bytes[] = {116, 24,  223, 180, 151, 153, 224, 37,  79,  250, 96,
                                          125, 216, 173, 187, 186, 22,  212, 37,  77,  105, 214,
                                          191, 240, 91,  88,  5,   88,  83,  132, 141, 121};
    b64url_encode_to(bytes, sizeof bytes, out);
    CHECK_STR(out, "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk");
    char v1[PKCE_MAX], v2[PKCE_MAX];
    CHECK_INT(pkce_verifier(v1), 0);
    CHECK_INT(pkce_verifier(v2), 0);
    CHECK_INT(strlen(v1), 43);
    CHECK(strcmp(v1, v2) != 0);
    CHECK(strspn(v1, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") == 43);
}

static void test_challenge(void)
{
    const char *h = "Bearer resource_metadata=\"https://mcp.example.com/.well-known/"
                    "oauth-protected-resource/mcp\", scope=\"files:read files:write\", "
                    "error=\"insufficient_scope\"";
    char *v = oauth_challenge_param(h, "resource_metadata");
    CHECK_STR(v, "https://mcp.example.com/.well-known/oauth-protected-resource/mcp");
    free(v);
    v = oauth_challenge_param(h, "scope");
    CHECK_STR(v, "files:read files:write");
    free(v);
    v = oauth_challenge_param(h, "error");
    CHECK_STR(v, "insufficient_scope");
    free(v);
    CHECK(oauth_challenge_param(h, "realm") == NULL);
    /* another scheme first, a token value, an escaped quote, case */
    h = "Basic realm=\"x\", bearer error=invalid_token, scope=\"a\\\"b\"";
    v = oauth_challenge_param(h, "error");
    CHECK_STR(v, "invalid_token");
    free(v);
    v = oauth_challenge_param(h, "scope");
    CHECK_STR(v, "a\"b");
    free(v);
    CHECK(oauth_challenge_param("Basic realm=\"x\"", "realm") == NULL);
    CHECK(oauth_challenge_param(NULL, "scope") == NULL);
    CHECK(oauth_challenge_param("Bearer", "scope") == NULL);
}

static void test_urls(void)
{
    char *u[OAUTH_MAX_URLS + 1];
    int n = oauth_prm_urls("https://mcp.example.com/public/mcp", u);
    CHECK_INT(n, 2);
    CHECK_STR(u[0], "https://mcp.example.com/.well-known/oauth-protected-resource/public/mcp");
    CHECK_STR(u[1], "https://mcp.example.com/.well-known/oauth-protected-resource");
    oauth_urls_free(u, n);
    n = oauth_prm_urls("http://127.0.0.1:8080/", u);
    CHECK_INT(n, 1);
    CHECK_STR(u[0], "http://127.0.0.1:8080/.well-known/oauth-protected-resource");
    oauth_urls_free(u, n);

    n = oauth_as_urls("https://auth.example.com/tenant1", u);
    CHECK_INT(n, 3);
    CHECK_STR(u[0], "https://auth.example.com/.well-known/oauth-authorization-server/tenant1");
    CHECK_STR(u[1], "https://auth.example.com/.well-known/openid-configuration/tenant1");
    CHECK_STR(u[2], "https://auth.example.com/tenant1/.well-known/openid-configuration");
    oauth_urls_free(u, n);
    n = oauth_as_urls("https://auth.example.com", u);
    CHECK_INT(n, 2);
    CHECK_STR(u[0], "https://auth.example.com/.well-known/oauth-authorization-server");
    CHECK_STR(u[1], "https://auth.example.com/.well-known/openid-configuration");
    oauth_urls_free(u, n);

    char *o = oauth_origin("http://localhost:3000/mcp?x=1");
    CHECK_STR(o, "http://localhost:3000");
    free(o);
    /* A WebSocket or TCP URL's http(s) form: curl connects it, and its
     * sign-in is kept under it (mcp-bridge --logout finds it there). */
    const char *forms[][2] = {
        {"wss://h.example/mcp/ws", "https://h.example/mcp/ws"},
        {"WS://127.0.0.1:8080/mcp/ws?x=1", "http://127.0.0.1:8080/mcp/ws?x=1"},
        {"wss://h.example/mcp/ws#frag", "https://h.example/mcp/ws"},
        {"tcp://127.0.0.1:9000", "http://127.0.0.1:9000"},
        {"https://h.example/mcp", "https://h.example/mcp"}};
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
        char *h = oauth_http_url(forms[i][0]);
        CHECK_STR(h, forms[i][1]);
        free(h);
    }
    CHECK(oauth_has_word("mcp:basic offline_access", "offline_access"));
    CHECK(!oauth_has_word("mcp:basic offline_accessx", "offline_access"));
    CHECK(!oauth_has_word(NULL, "a"));
}

static void test_store(void)
{
    char dir[] = "/tmp/test_bridge_oauth.XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    setenv("XDG_CONFIG_HOME", dir, 1);
    CHECK(oauth_store_get("https://a.example/mcp") == NULL);
    json_t *e = json_pack("{s:s, s:s}", "client_id", "c1", "access_token", "secret-1");
    CHECK_INT(oauth_store_put("https://a.example/mcp", e), 0);
    json_decref(e);
    e = json_pack("{s:s}", "client_id", "c2");
    CHECK_INT(oauth_store_put("https://b.example/mcp", e), 0);
    json_decref(e);

    char *path = oauth_store_path();
    struct stat st;
    CHECK_INT(stat(path, &st), 0);
    CHECK_INT(st.st_mode & 0777, 0600);
    char sub[256];
    snprintf(sub, sizeof sub, "%s/mcp-bridge", dir);
    CHECK_INT(stat(sub, &st), 0);
    CHECK_INT(st.st_mode & 0777, 0700);

    e = oauth_store_get("https://a.example/mcp");
    CHECK_STR(json_string_value(json_object_get(e, "access_token")), "secret-1");
    json_decref(e);
    /* a logout forgets one server, not the other */
    CHECK_INT(oauth_store_put("https://a.example/mcp", NULL), 0);
    CHECK(oauth_store_get("https://a.example/mcp") == NULL);
    e = oauth_store_get("https://b.example/mcp");
    CHECK_STR(json_string_value(json_object_get(e, "client_id")), "c2");
    json_decref(e);
    CHECK_INT(stat(path, &st), 0);
    CHECK_INT(st.st_mode & 0777, 0600);
    unlink(path);
    rmdir(sub);
    rmdir(dir);
    free(path);
}

int main(void)
{
    test_pkce();
    test_challenge();
    test_urls();
    test_store();
    return check_summary();
}
