/* test_oauth — the pure parts of JWT access-token checking (oauth.c) and
 * of the issuer's key set (jwks.c): the algorithm allow-list (no "none",
 * no HMAC), the claims (iss, aud as string or array, exp/nbf with the
 * leeway, scope and scp), the principal (hashed when too long), the
 * discovery and metadata URLs, and which keys of a JWKS are kept. */
#include "auth.h"
#include "check.h"
#include "dpop.h"
#include "introspect.h"
#include "jwks.h"
#include "oauth.h"

#include <stdlib.h>

#define ISS "https://id.example.com/realms/r"
#define RES "https://mcp.example.com/mcp"

static enum oauth_verdict claims(const char *text, const char *scopes, int64_t now, char *principal,
                                 int64_t *exp)
{
    json_t *c = json_loads(text, 0, NULL);
    const char *why = NULL;
    char bound[DPOP_JKT_LEN + 1];
    enum oauth_verdict v = oauth_claims_check(c, ISS, RES, scopes, now, principal,
                                              AUTH_PRINCIPAL_MAX, exp, bound, &why);
    json_decref(c);
    return v;
}

static void test_algs(void)
{
    int rsa = -1;
    CHECK(oauth_alg_allowed("RS256", &rsa) && rsa == 1);
    CHECK(oauth_alg_allowed("PS512", &rsa) && rsa == 1);
    CHECK(oauth_alg_allowed("ES256", &rsa) && rsa == 0);
    CHECK(!oauth_alg_allowed("none", &rsa));
    CHECK(!oauth_alg_allowed("HS256", &rsa));
    CHECK(!oauth_alg_allowed("hs256", &rsa));
    CHECK(!oauth_alg_allowed("", &rsa));
    CHECK(!oauth_alg_allowed(NULL, &rsa));
}

static void test_claims(void)
{
    char p[AUTH_PRINCIPAL_MAX];
    int64_t exp = 0;
    const char *good = "{\"iss\":\"" ISS "\",\"aud\":\"" RES "\",\"sub\":\"alice\","
                       "\"exp\":2000,\"nbf\":1000,\"scope\":\"mcp:tools openid\"}";
    CHECK_INT(claims(good, "", 1500, p, &exp), OAUTH_OK);
    CHECK_STR(p, "oauth:" ISS "#alice");
    CHECK_INT(exp, (2000 + OAUTH_LEEWAY_S) * 1000);
    CHECK_INT(claims(good, "mcp:tools", 1500, p, &exp), OAUTH_OK);
    CHECK_INT(claims(good, "openid mcp:tools", 1500, p, &exp), OAUTH_OK);
    CHECK_INT(claims(good, "mcp:admin", 1500, p, &exp), OAUTH_INSUFFICIENT_SCOPE);
    CHECK_INT(claims(good, "mcp", 1500, p, &exp), OAUTH_INSUFFICIENT_SCOPE); /* whole words */
    /* The leeway, both ways. */
    CHECK_INT(claims(good, "", 2000 + OAUTH_LEEWAY_S - 1, p, &exp), OAUTH_OK);
    CHECK_INT(claims(good, "", 2000 + OAUTH_LEEWAY_S, p, &exp), OAUTH_INVALID);
    CHECK_INT(claims(good, "", 1000 - OAUTH_LEEWAY_S, p, &exp), OAUTH_OK);
    CHECK_INT(claims(good, "", 1000 - OAUTH_LEEWAY_S - 1, p, &exp), OAUTH_INVALID);
    /* aud as an array; another resource; another issuer. */
    CHECK_INT(claims("{\"iss\":\"" ISS "\",\"aud\":[\"x\",\"" RES "\"],\"sub\":\"a\",\"exp\":2000}",
                     "", 1500, p, &exp),
              OAUTH_OK);
    CHECK_INT(claims("{\"iss\":\"" ISS "\",\"aud\":\"" RES "/\",\"sub\":\"a\",\"exp\":2000}", "",
                     1500, p, &exp),
              OAUTH_INVALID);
    CHECK_INT(
        claims("{\"iss\":\"" ISS "\",\"aud\":[],\"sub\":\"a\",\"exp\":2000}", "", 1500, p, &exp),
        OAUTH_INVALID);
    CHECK_INT(claims("{\"iss\":\"https://evil\",\"aud\":\"" RES "\",\"sub\":\"a\",\"exp\":2000}",
                     "", 1500, p, &exp),
              OAUTH_INVALID);
    /* exp is required; sub too; dates are numbers. */
    CHECK_INT(claims("{\"iss\":\"" ISS "\",\"aud\":\"" RES "\",\"sub\":\"a\"}", "", 1500, p, &exp),
              OAUTH_INVALID);
    CHECK_INT(claims("{\"iss\":\"" ISS "\",\"aud\":\"" RES "\",\"exp\":2000}", "", 1500, p, &exp),
              OAUTH_INVALID);
    CHECK_INT(claims("{\"iss\":\"" ISS "\",\"aud\":\"" RES "\",\"sub\":\"a\",\"exp\":\"2000\"}", "",
                     1500, p, &exp),
              OAUTH_INVALID);
    /* scp, as an array (Entra ID) or a string. */
    CHECK_INT(claims("{\"iss\":\"" ISS "\",\"aud\":\"" RES
                     "\",\"sub\":\"a\",\"exp\":2000,\"scp\":[\"read\",\"write\"]}",
                     "write read", 1500, p, &exp),
              OAUTH_OK);
    CHECK_INT(claims("{\"iss\":\"" ISS "\",\"aud\":\"" RES
                     "\",\"sub\":\"a\",\"exp\":2000,\"scp\":\"read write\"}",
                     "write", 1500, p, &exp),
              OAUTH_OK);
}

static void test_principal(void)
{
    char p[AUTH_PRINCIPAL_MAX], q[AUTH_PRINCIPAL_MAX];
    CHECK_INT(oauth_principal("https://a", "b", p, sizeof p), 0);
    CHECK_STR(p, "oauth:https://a#b");
    char longsub[200];
    memset(longsub, 'x', sizeof longsub - 1);
    longsub[sizeof longsub - 1] = '\0';
    CHECK_INT(oauth_principal("https://a", longsub, p, sizeof p), 0);
    CHECK(strncmp(p, "oauth:", 6) == 0 && strlen(p) == sizeof p - 1);
    longsub[5] = 'y';
    CHECK_INT(oauth_principal("https://a", "b\"c", q, sizeof q), 0); /* a quote: hashed */
    CHECK(strncmp(q, "oauth:", 6) == 0 && strlen(q) == sizeof q - 1);
    CHECK_INT(oauth_principal("https://a", "b\nc", q, sizeof q), 0); /* a newline: hashed */
    CHECK(strchr(q, '\n') == NULL && strlen(q) == sizeof q - 1);
    CHECK_INT(oauth_principal("https://a", longsub, q, sizeof q), 0);
    CHECK(strcmp(p, q) != 0);
}

static void test_urls(void)
{
    char *u = jwks_discovery_url("https://kc.example/realms/r/", 0);
    CHECK_STR(u, "https://kc.example/realms/r/.well-known/openid-configuration");
    free(u);
    u = jwks_discovery_url("https://kc.example/realms/r", 1);
    CHECK_STR(u, "https://kc.example/.well-known/oauth-authorization-server/realms/r");
    free(u);
    u = jwks_discovery_url("https://as.example", 1);
    CHECK_STR(u, "https://as.example/.well-known/oauth-authorization-server");
    free(u);
    CHECK(jwks_discovery_url("nonsense", 0) == NULL);
    u = oauth_metadata_url("https://mcp.example.com/mcp");
    CHECK_STR(u, "https://mcp.example.com/.well-known/oauth-protected-resource/mcp");
    free(u);
    u = oauth_metadata_url("http://127.0.0.1:8080");
    CHECK_STR(u, "http://127.0.0.1:8080/.well-known/oauth-protected-resource");
    free(u);

    const char *why = NULL;
    json_t *doc = json_loads("{\"issuer\":\"https://a\",\"jwks_uri\":\"https://a/k\"}", 0, NULL);
    CHECK_STR(jwks_uri_of(doc, "https://a", &why), "https://a/k");
    CHECK(jwks_uri_of(doc, "https://b", &why) == NULL); /* mix-up: another issuer's metadata */
    json_decref(doc);
}

static void test_parse(void)
{
    /* An RSA key (the RFC 7517 A.1 example), an oct key, an enc key, an
     * OKP key and a malformed RSA key: only the first is kept. */
    const char *text =
        "{\"keys\":["
        "{\"kty\":\"RSA\",\"kid\":\"k1\",\"e\":\"AQAB\",\"n\":"
        "\"0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2a"
        "iAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-"
        "5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0"
        "zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-"
        "G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw\"},"
        "{\"kty\":\"oct\",\"kid\":\"h\",\"k\":\"c2VjcmV0\"},"
        "{\"kty\":\"RSA\",\"kid\":\"e\",\"use\":\"enc\",\"e\":\"AQAB\",\"n\":\"0vx7\"},"
        "{\"kty\":\"OKP\",\"kid\":\"o\",\"crv\":\"Ed25519\",\"x\":\"11qYAYKxCrfVS_"
        "7TyWQHOg7hcvPapiMl"
        "rwIaaPcHURo\"},"
        "{\"kty\":\"RSA\",\"kid\":\"bad\"}]}";
    json_t *doc = json_loads(text, 0, NULL);
    struct jwks_key keys[8];
    int n = jwks_parse(doc, keys, 8);
    CHECK_INT(n, 1);
    if (n >= 1) {
        CHECK_STR(keys[0].kid, "k1");
        CHECK_INT(keys[0].kty, CJOSE_JWK_KTY_RSA);
    }
    for (int i = 0; i < n; i++)
        cjose_jwk_release(keys[i].jwk);
    json_decref(doc);
    json_t *none = json_loads("{\"nokeys\":1}", 0, NULL);
    CHECK_INT(jwks_parse(none, keys, 8), -1);
    json_decref(none);
}

/* RFC 7662 answers: only active ones count; iss and sub are filled in. */
static void test_introspection_answer(void)
{
    json_t *a = json_loads("{\"active\":true,\"client_id\":\"c\",\"aud\":\"" RES
                           "\",\"exp\":2000,\"scope\":\"mcp:tools\"}",
                           0, NULL);
    json_t *c = introspect_claims(a, ISS);
    CHECK_STR(json_string_value(json_object_get(c, "iss")), ISS);
    CHECK_STR(json_string_value(json_object_get(c, "sub")), "c");
    char p[AUTH_PRINCIPAL_MAX];
    int64_t exp;
    const char *why = NULL;
    char bound[DPOP_JKT_LEN + 1];
    CHECK_INT(oauth_claims_check(c, ISS, RES, "mcp:tools", 1500, p, sizeof p, &exp, bound, &why),
              OAUTH_OK);
    CHECK_STR(bound, "");
    CHECK_STR(p, "oauth:" ISS "#c");
    json_decref(c);
    json_decref(a);
    /* Another issuer named in the answer is not overwritten. */
    a = json_loads("{\"active\":true,\"iss\":\"https://evil\",\"sub\":\"s\"}", 0, NULL);
    c = introspect_claims(a, ISS);
    CHECK_STR(json_string_value(json_object_get(c, "iss")), "https://evil");
    json_decref(c);
    json_decref(a);
    const char *inactive[] = {"{\"active\":false,\"sub\":\"s\"}", "{\"active\":\"true\"}",
                              "{\"sub\":\"s\"}", "[]"};
    for (size_t i = 0; i < sizeof inactive / sizeof inactive[0]; i++) {
        a = json_loads(inactive[i], JSON_DECODE_ANY, NULL);
        CHECK(introspect_claims(a, ISS) == NULL);
        json_decref(a);
    }
}

/* cnf.jkt (RFC 9449 6): the token's key, for the caller to ask a proof of;
 * a binding of another kind (mutual TLS) is refused, never ignored. */
static void test_binding(void)
{
    const char *jkt = "0ZcOCORZNYy-DWpqq30jZyJGHTN0d2HglBV3uiguA4I";
    char p[AUTH_PRINCIPAL_MAX], bound[DPOP_JKT_LEN + 1];
    int64_t exp;
    const char *why = NULL;
    json_t *c = json_pack("{s:s, s:s, s:s, s:i, s:{s:s}}", "iss", ISS, "aud", RES, "sub", "u",
                          "exp", 2000, "cnf", "jkt", jkt);
    CHECK_INT(oauth_claims_check(c, ISS, RES, "", 1500, p, sizeof p, &exp, bound, &why), OAUTH_OK);
    CHECK_STR(bound, jkt);
    json_decref(c);
    c = json_pack("{s:s, s:s, s:s, s:i, s:{s:s}}", "iss", ISS, "aud", RES, "sub", "u", "exp", 2000,
                  "cnf", "x5t#S256", "abc");
    CHECK_INT(oauth_claims_check(c, ISS, RES, "", 1500, p, sizeof p, &exp, bound, &why),
              OAUTH_INVALID);
    json_decref(c);
}

int main(void)
{
    test_binding();
    test_introspection_answer();
    test_algs();
    test_claims();
    test_principal();
    test_urls();
    test_parse();
    return check_summary();
}
