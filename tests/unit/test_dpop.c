/* test_dpop — DPoP proofs (RFC 9449) as mcpd checks them (dpop.c): the
 * key thumbprint against RFC 7638's example, htu matching, and real proofs
 * signed here with cjose: a good one is accepted once (then it is a
 * replay), and each claim or header it must carry is refused when wrong. */
#include "check.h"
#include "dpop.h"

#include <cjose/jwk.h>
#include <cjose/jws.h>
#include <gnutls/crypto.h>
#include <stdlib.h>

#include "b64url.h"

#define URL "https://mcp.example.com/mcp"
#define TOKEN "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ1In0.c2ln"
#define NOW 1800000000

/* RFC 7638 3.1: the RSA key and its thumbprint. */
static void test_thumbprint(void)
{
    json_t *k = json_pack(
        "{s:s, s:s, s:s, s:s}", "kty", "RSA", "n",
        "0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_"
        "BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_"
        "FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-"
        "bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw",
        "e", "AQAB", "alg", "RS256");
    char jkt[DPOP_JKT_LEN + 1];
    CHECK_INT(dpop_thumbprint(k, jkt), 0);
    CHECK_STR(jkt, "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs");
    json_decref(k);
    k = json_pack("{s:s, s:s}", "kty", "oct", "k", "c2VjcmV0");
    CHECK_INT(dpop_thumbprint(k, jkt), -1);
    json_decref(k);
}

static void test_htu(void)
{
    CHECK(dpop_htu_matches("https://mcp.example.com/mcp", URL));
    CHECK(dpop_htu_matches("HTTPS://MCP.Example.com:443/mcp?x=1#f", URL));
    CHECK(dpop_htu_matches("http://127.0.0.1:80/", "http://127.0.0.1"));
    CHECK(dpop_htu_matches("http://[::1]:8080/mcp", "http://[::1]:8080/mcp"));
    CHECK(!dpop_htu_matches("https://mcp.example.com/MCP", URL));
    CHECK(!dpop_htu_matches("http://mcp.example.com/mcp", URL));
    CHECK(!dpop_htu_matches("https://mcp.example.com:8443/mcp", URL));
    CHECK(!dpop_htu_matches("https://evil.example.com/mcp", URL));
    CHECK(!dpop_htu_matches("ftp://mcp.example.com/mcp", "ftp://mcp.example.com/mcp"));
}

static void ath_of(const char *token, char *out)
{
    unsigned char d[32];
    gnutls_hash_fast(GNUTLS_DIG_SHA256, token, strlen(token), d);
    b64url_encode_to(d, sizeof d, out);
}

/* A proof signed with key; header members and claims as given (the
 * defaults filled in unless the caller set them, NULL to drop one). */
static char *proof(cjose_jwk_t *key, const char *alg, json_t *hdr_over, json_t *claims_over)
{
    cjose_err err;
    char *pub = cjose_jwk_to_json(key, false, &err);
    json_t *hdr = json_pack("{s:s, s:s, s:o}", "typ", "dpop+jwt", "alg", alg, "jwk",
                            json_loads(pub, 0, NULL));
    free(pub);
    json_object_update(hdr, hdr_over);
    char ath[DPOP_JKT_LEN + 1];
    ath_of(TOKEN, ath);
    static int seq;
    char jti[32];
    snprintf(jti, sizeof jti, "jti-%d", ++seq);
    json_t *c = json_pack("{s:s, s:s, s:s, s:i, s:s}", "jti", jti, "htm", "POST", "htu", URL, "iat",
                          NOW, "ath", ath);
    json_object_update(c, claims_over);
    const char *k;
    json_t *v;
    void *tmp;
    json_object_foreach_safe(c, tmp, k, v) if (json_is_null(v)) json_object_del(c, k);
    json_object_foreach_safe(hdr, tmp, k, v) if (json_is_null(v)) json_object_del(hdr, k);
    char *payload = json_dumps(c, JSON_COMPACT);
    cjose_jws_t *jws =
        cjose_jws_sign(key, (cjose_header_t *)hdr, (uint8_t *)payload, strlen(payload), &err);
    const char *ser = NULL;
    char *out = jws && cjose_jws_export(jws, &ser, &err) ? strdup(ser) : NULL;
    cjose_jws_release(jws);
    free(payload);
    json_decref(c);
    json_decref(hdr);
    json_decref(hdr_over);
    json_decref(claims_over);
    return out;
}

/* dpop_check, and the jti's first use as auth.c spends it */
static int check(const char *p, const char *method, char *jkt, const char **why)
{
    struct dpop_proof proof;
    if (dpop_check(p, method, URL, TOKEN, NOW, &proof, why) != 0)
        return -1;
    memcpy(jkt, proof.jkt, sizeof proof.jkt);
    if (dpop_first_use(&proof, NOW) != 1) {
        *why = "jti";
        return -1;
    }
    return 0;
}

static void refused(cjose_jwk_t *key, json_t *hdr, json_t *claims, const char *what)
{
    char *p = proof(key, "ES256", hdr, claims);
    char jkt[DPOP_JKT_LEN + 1];
    const char *why = NULL;
    int rc = check(p, "POST", jkt, &why);
    if (rc != -1)
        printf("  accepted: %s\n", what);
    CHECK_INT(rc, -1);
    free(p);
}

static void test_proofs(void)
{
    cjose_err err;
    cjose_jwk_t *key = cjose_jwk_create_EC_random(CJOSE_JWK_EC_P_256, &err);
    char *pub = cjose_jwk_to_json(key, false, &err);
    json_t *pubj = json_loads(pub, 0, NULL);
    char want[DPOP_JKT_LEN + 1], jkt[DPOP_JKT_LEN + 1];
    CHECK_INT(dpop_thumbprint(pubj, want), 0);
    json_decref(pubj);
    free(pub);

    const char *why = NULL;
    char *good = proof(key, "ES256", NULL, NULL);
    CHECK_INT(check(good, "POST", jkt, &why), 0);
    CHECK_STR(jkt, want);
    CHECK_INT(check(good, "POST", jkt, &why), -1); /* the same proof again */
    CHECK(why && strstr(why, "jti"));
    /* the proof itself still checks: only its use is spent */
    struct dpop_proof again, theirs;
    CHECK_INT(dpop_check(good, "POST", URL, TOKEN, NOW, &again, &why), 0);
    /* its iat (NOW) is accepted until the window's last second has passed:
     * what the store keeps the spent proof for (plus the clocks' skew) */
    CHECK_INT(again.valid_until_s, NOW + DPOP_IAT_WINDOW_S + 1);
    CHECK_INT(dpop_first_use(&again, NOW + 2 * DPOP_IAT_WINDOW_S), 0);
    /* past both sides of the iat window it is forgotten (and refused by iat) */
    CHECK_INT(dpop_first_use(&again, NOW + 2 * DPOP_IAT_WINDOW_S + 1), 1);
    /* the same jti from another key is another proof */
    cjose_jwk_t *key2 = cjose_jwk_create_EC_random(CJOSE_JWK_EC_P_256, &err);
    char *p2 = proof(key2, "ES256", NULL, json_pack("{s:s}", "jti", "fixed"));
    char *p1 = proof(key, "ES256", NULL, json_pack("{s:s}", "jti", "fixed"));
    CHECK_INT(dpop_check(p1, "POST", URL, TOKEN, NOW, &again, &why), 0);
    CHECK_INT(dpop_check(p2, "POST", URL, TOKEN, NOW, &theirs, &why), 0);
    CHECK(strcmp(again.use, theirs.use) != 0);
    CHECK_INT(dpop_first_use(&again, NOW), 1);
    CHECK_INT(dpop_first_use(&theirs, NOW), 1);
    free(p1);
    free(p2);
    cjose_jwk_release(key2);
    free(good);

    char *p = proof(key, "ES256", NULL, NULL);
    CHECK_INT(check(p, "GET", jkt, &why), -1);
    CHECK(why && strstr(why, "htm"));
    free(p);

    refused(key, NULL, json_pack("{s:s}", "htu", "https://other.example.com/mcp"), "another htu");
    refused(key, NULL, json_pack("{s:i}", "iat", NOW - DPOP_IAT_WINDOW_S - 1), "an old iat");
    refused(key, NULL, json_pack("{s:i}", "iat", NOW + DPOP_IAT_WINDOW_S + 1), "a future iat");
    refused(key, NULL, json_pack("{s:s}", "ath", "AAAA"), "another token's ath");
    refused(key, NULL, json_pack("{s:n}", "ath"), "no ath");
    refused(key, NULL, json_pack("{s:n}", "jti"), "no jti");
    refused(key, json_pack("{s:s}", "typ", "JWT"), NULL, "typ JWT");
    refused(key, json_pack("{s:n}", "jwk"), NULL, "no jwk");
    refused(key, json_pack("{s:[s]}", "crit", "x"), NULL, "crit");
    /* the private key itself in the header */
    char *priv = cjose_jwk_to_json(key, true, &err);
    refused(key, json_pack("{s:o}", "jwk", json_loads(priv, 0, NULL)), NULL, "a private jwk");
    free(priv);
    /* signed by another key than the one in the header */
    cjose_jwk_t *other = cjose_jwk_create_EC_random(CJOSE_JWK_EC_P_256, &err);
    char *opub = cjose_jwk_to_json(other, false, &err);
    refused(key, json_pack("{s:o}", "jwk", json_loads(opub, 0, NULL)), NULL, "another key's jwk");
    free(opub);
    cjose_jwk_release(other);

    /* HMAC never, whatever the header says */
    cjose_jwk_t *oct = cjose_jwk_create_oct_random(256, &err);
    p = proof(oct, "HS256", NULL, NULL);
    CHECK_INT(check(p, "POST", jkt, &why), -1);
    free(p);
    cjose_jwk_release(oct);

    CHECK_INT(check("not.a.jws", "POST", jkt, &why), -1);
    CHECK_INT(check(NULL, "POST", jkt, &why), -1);
    cjose_jwk_release(key);

    /* RSA keys work too */
    static const uint8_t e[] = {1, 0, 1};
    cjose_jwk_t *rsa = cjose_jwk_create_RSA_random(2048, e, sizeof e, &err);
    p = proof(rsa, "PS256", NULL, NULL);
    CHECK_INT(check(p, "POST", jkt, &why), 0);
    free(p);
    p = proof(rsa, "ES256", NULL, NULL); /* an EC algorithm with an RSA key */
    CHECK_INT(check(p, "POST", jkt, &why), -1);
    free(p);
    /* keys that would make a verification expensive: refused before it */
    char big[800];
    memset(big, 'A', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    big[0] = 'w'; /* not all zero bits */
    p = proof(rsa, "PS256",
              json_pack("{s:{s:s, s:s, s:s}}", "jwk", "kty", "RSA", "n", big, "e", "AQAB"), NULL);
    CHECK_INT(check(p, "POST", jkt, &why), -1);
    CHECK(why && strstr(why, "4096"));
    free(p);
    p = proof(rsa, "PS256",
              json_pack("{s:{s:s, s:s, s:s}}", "jwk", "kty", "RSA", "n", "AQAB", "e", big), NULL);
    CHECK_INT(check(p, "POST", jkt, &why), -1);
    CHECK(why && strstr(why, "4096"));
    free(p);
    cjose_jwk_release(rsa);
}

int main(void)
{
    test_thumbprint();
    test_htu();
    test_proofs();
    dpop_reset();
    return check_summary();
}
