/* tokens add / list / revoke. */
#include "admin.h"
#include "clock.h"
#include "safe_text.h"
#include "table.h"
#include "token.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Token names become principals in logs and tables: keep them plain. */
static int name_ok(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n > 63)
        return 0;
    for (const char *p = name; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '-' || *p == '_' || *p == '.' || *p == '@'))
            return 0;
    return 1;
}

struct add_args {
    int64_t expires;
    const char *note;
};

static const struct cmdline_option add_options[] = {
    {"expires", CMDLINE_FUNC, offsetof(struct add_args, expires), NULL, NULL, admin_take_duration},
    {"note", CMDLINE_ARG, offsetof(struct add_args, note), NULL, NULL, NULL},
};

/* argv[0] is "add". */
static int tokens_add(const struct admin *a, int argc, char **argv)
{
    struct add_args args = {0, NULL};
    if (admin_parse("tokens add", add_options, sizeof add_options / sizeof add_options[0], &args,
                    &argc, argv, 1) != ADMIN_OK)
        return ADMIN_USAGE;
    if (argc != 2 || !name_ok(argv[1]))
        return admin_usage("tokens add NAME (letters, digits, - _ . @; up to 63) [--expires 30d] "
                           "[--note TEXT]");
    const char *name = argv[1], *note = args.note;
    int64_t expires = args.expires ? clock_wall_ms() + args.expires : 0;
    char token[TOKEN_LEN + 1], hash[TOKEN_HASH_LEN + 1];
    if (token_generate(token) != 0 || token_hash(token, hash) != 0)
        return admin_fail(ADMIN_FAILED, strdup("no randomness for a token"));
    struct store_admin *s = admin_open(a, STORE_ADMIN_WRITE);
    if (!s)
        return ADMIN_FAILED;
    char *err = NULL;
    int rc = store_admin_token_add(s, name, hash, note, expires, &err);
    store_admin_close(s);
    if (rc < 0)
        return admin_fail(ADMIN_FAILED, err);
    if (rc == 1) {
        char *msg = NULL;
        return admin_fail(ADMIN_FAILED,
                          asprintf(&msg, "a token named %s exists", name) < 0 ? NULL : msg);
    }
    /* The only time the token is shown: only its hash is stored. */
    if (a->json)
        admin_print_json(json_pack("{s:s, s:s, s:I}", "name", name, "token", token, "expires_ms",
                                   (json_int_t)expires),
                         1);
    else
        printf("%s\n", token);
    return ADMIN_OK;
}

static int tokens_list(const struct admin *a)
{
    struct store_admin *s = admin_open(a, STORE_ADMIN_READ);
    if (!s)
        return ADMIN_FAILED;
    char *err = NULL;
    json_t *list = store_admin_tokens(s, &err);
    store_admin_close(s);
    if (!list)
        return admin_fail(ADMIN_FAILED, err);
    if (a->json) {
        admin_print_json(list, 0);
        return ADMIN_OK;
    }
    safe_text_json(list);
    static const char *const h[] = {"NAME",     "CREATED", "EXPIRES", "LAST USED",
                                    "SESSIONS", "STATE",   "NOTE"};
    struct table_out *t = table_out_new(7, h);
    size_t i;
    json_t *tok;
    int64_t now = clock_wall_ms();
    json_array_foreach(list, i, tok)
    {
        char sessions[24];
        snprintf(sessions, sizeof sessions, "%lld", (long long)admin_int(tok, "sessions"));
        int64_t exp = admin_int(tok, "expires_ms");
        const char *state = admin_int(tok, "revoked_ms") ? "revoked"
                            : exp && exp <= now          ? "expired"
                                                         : "active";
        const char *row[] = {admin_str(tok, "name"),
                             admin_ago(tok, "created_ms", 0),
                             exp ? admin_ago(tok, "expires_ms", 1) : "never",
                             admin_ago(tok, "last_used_ms", 2),
                             sessions,
                             state,
                             admin_str(tok, "note")};
        table_out_row(t, row);
    }
    table_out_print(t, stdout, 0);
    json_decref(list);
    return ADMIN_OK;
}

static int tokens_revoke(const struct admin *a, const char *name)
{
    struct store_admin *s = admin_open(a, STORE_ADMIN_WRITE);
    if (!s)
        return ADMIN_FAILED;
    char *err = NULL;
    int rc = store_admin_token_revoke(s, name, &err);
    store_admin_close(s);
    if (rc < 0)
        return admin_fail(ADMIN_FAILED, err);
    if (rc == 1)
        return admin_not_found("no active token %s", name);
    if (a->json)
        admin_print_json(json_pack("{s:s}", "revoked", name), 0);
    else
        printf("revoked %s; a running mcpd refuses it and ends its sessions within a second\n",
               name);
    return ADMIN_OK;
}

int cmd_tokens(const struct admin *a, int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "add") == 0)
        return tokens_add(a, argc - 1, argv + 1);
    if (argc == 2 && strcmp(argv[1], "list") == 0)
        return tokens_list(a);
    if (argc == 3 && strcmp(argv[1], "revoke") == 0)
        return tokens_revoke(a, argv[2]);
    return admin_usage("tokens add NAME [--expires 30d] [--note TEXT] | tokens list | tokens "
                       "revoke NAME");
}
