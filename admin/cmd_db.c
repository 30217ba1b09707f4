/* The database commands: gc, vacuum, backup, check, and health. */
#include "admin.h"
#include "clock.h"
#include "safe_text.h"
#include "store.h"

#include <curl/curl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct gc_args {
    int64_t idle, retention, log_keep, log_rows;
};

/* mcpd's defaults, the same settings by the same names. */
static const struct cmdline_option gc_options[] = {
    {"session-idle", CMDLINE_FUNC, offsetof(struct gc_args, idle), "30m", NULL,
     admin_take_duration},
    {"stream-retention", CMDLINE_FUNC, offsetof(struct gc_args, retention), "5m", NULL,
     admin_take_duration},
    {"log-retention", CMDLINE_FUNC, offsetof(struct gc_args, log_keep), "1d", NULL,
     admin_take_duration},
    {"log-max-rows", CMDLINE_INT, offsetof(struct gc_args, log_rows), "100000", NULL, NULL},
};

/* Runs the reaper's purge through the store module mcpd itself uses, with
 * mcpd's defaults unless told otherwise. */
int cmd_gc(const struct admin *a, int argc, char **argv)
{
    struct gc_args g = {0, 0, 0, 0};
    const size_t n = sizeof gc_options / sizeof gc_options[0];
    if (admin_parse("gc", gc_options, n, &g, &argc, argv, 0) != ADMIN_OK)
        return ADMIN_USAGE;
    /* The purge is the runtime store's (store_purge), which opens SQLite
     * files only so far: it would take a connection string for a file
     * name and purge a new, empty one. On PostgreSQL the replicas' reaper
     * purges (on one replica at a time). */
    if (store_admin_is_postgres(a->db))
        return admin_fail(ADMIN_FAILED, strdup("gc works on SQLite only; on PostgreSQL mcpd's "
                                               "reaper purges"));
    /* Checks the file and its schema first: store_open would create one. */
    struct store_admin *check = admin_open(a, STORE_ADMIN_WRITE);
    if (!check)
        return ADMIN_FAILED;
    store_admin_close(check);
    struct store *st = NULL;
    char *open_err = NULL;
    if (store_open(a->db, &st, &open_err) != 0)
        return admin_fail(ADMIN_FAILED, open_err);
    int64_t now = clock_wall_ms();
    struct store_purge_cutoffs cut = {now - g.idle, now - STORE_ENDED_KEEP_MS, now - g.retention,
                                      now - g.log_keep, g.log_rows};
    int rc = store_purge(st, &cut, NULL, NULL);
    store_close(st);
    if (rc != 0)
        return admin_fail(ADMIN_FAILED, strdup("the purge failed"));
    if (a->json)
        admin_print_json(json_pack("{s:b}", "purged", 1), 0);
    else
        printf("purged: sessions idle over %lld s, streams ended over %lld s ago, logs over "
               "%lld s or past %lld rows\n",
               (long long)(g.idle / 1000), (long long)(g.retention / 1000),
               (long long)(g.log_keep / 1000), (long long)g.log_rows);
    return ADMIN_OK;
}

int cmd_vacuum(const struct admin *a, int argc, char **argv)
{
    (void)argv;
    if (argc != 1)
        return admin_usage("vacuum takes no arguments");
    struct store_admin *s = admin_open(a, STORE_ADMIN_WRITE);
    if (!s)
        return ADMIN_FAILED;
    char *err = NULL;
    int rc = store_admin_vacuum(s, &err);
    if (rc == 0 && !a->json)
        printf("vacuumed %s\n", store_admin_name(s));
    else if (rc == 0)
        admin_print_json(json_pack("{s:b}", "vacuumed", 1), 0);
    store_admin_close(s);
    return rc == 0 ? ADMIN_OK : admin_fail(ADMIN_FAILED, err);
}

int cmd_backup(const struct admin *a, int argc, char **argv)
{
    if (argc != 2)
        return admin_usage("backup FILE");
    struct store_admin *s = admin_open(a, STORE_ADMIN_READ);
    if (!s)
        return ADMIN_FAILED;
    char *err = NULL;
    int rc = store_admin_backup(s, argv[1], &err);
    struct stat sb;
    long long size = rc == 0 && stat(argv[1], &sb) == 0 ? (long long)sb.st_size : 0;
    if (rc == 0 && a->json)
        admin_print_json(json_pack("{s:s, s:I}", "backup", argv[1], "bytes", (json_int_t)size), 0);
    else if (rc == 0)
        printf("backed up %s to %s (%lld bytes)\n", store_admin_name(s), argv[1], size);
    store_admin_close(s);
    return rc == 0 ? ADMIN_OK : admin_fail(ADMIN_FAILED, err);
}

int cmd_check(const struct admin *a, int argc, char **argv)
{
    (void)argv;
    if (argc != 1)
        return admin_usage("check takes no arguments");
    struct store_admin *s = admin_open(a, STORE_ADMIN_READ);
    if (!s)
        return ADMIN_FAILED;
    char *err = NULL;
    json_t *v = store_admin_check(s, &err);
    store_admin_close(s);
    if (!v)
        return admin_fail(ADMIN_FAILED, err);
    int ok = strcmp(admin_str(v, "integrity") ? admin_str(v, "integrity") : "", "ok") == 0 &&
             admin_int(v, "schema_version") == admin_int(v, "latest_version");
    if (a->json) {
        admin_print_json(v, 0);
    } else {
        safe_text_json(v);
        printf("integrity   %s\nschema      version %lld (this build knows %lld)\n",
               admin_str(v, "integrity"), (long long)admin_int(v, "schema_version"),
               (long long)admin_int(v, "latest_version"));
        size_t i;
        json_t *m;
        json_array_foreach(json_object_get(v, "problems"), i, m)
            printf("  problem: %s\n", json_string_value(m));
        json_array_foreach(json_object_get(v, "migrations"), i, m)
            printf("  %s %s\n", json_is_true(json_object_get(m, "applied")) ? "applied" : "pending",
                   admin_str(m, "name"));
        json_decref(v);
    }
    return ok ? ADMIN_OK : ADMIN_FAILED;
}

static size_t discard(char *p, size_t size, size_t n, void *ud)
{
    (void)p;
    (void)ud;
    return size * n;
}

/* 0 when GET url answers 200 within 5 s. */
static int ready(const char *url, char *why, size_t cap)
{
    CURL *c = curl_easy_init();
    if (!c) {
        snprintf(why, cap, "libcurl failed to start");
        return -1;
    }
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 5000L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
    CURLcode rc = curl_easy_perform(c);
    long status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_cleanup(c);
    if (rc != CURLE_OK) {
        snprintf(why, cap, "%s: %s", url, curl_easy_strerror(rc));
        return -1;
    }
    if (status != 200) {
        snprintf(why, cap, "%s answered %ld", url, status);
        return -1;
    }
    return 0;
}

int cmd_health(const struct admin *a, int argc, char **argv)
{
    static const struct cmdline_option options[] = {
        {"url", CMDLINE_ARG, 0, NULL, NULL, NULL},
    };
    const char *url = NULL;
    if (admin_parse("health", options, 1, &url, &argc, argv, 0) != ADMIN_OK)
        return ADMIN_USAGE;
    /* The store is writable: a write transaction can start (and is rolled
     * back at once, holding the lock for microseconds). */
    struct store_admin *s = admin_open(a, STORE_ADMIN_WRITE);
    if (!s)
        return ADMIN_FAILED;
    store_admin_close(s);
    if (url) {
        char full[1024], why[1200];
        size_t n = strlen(url);
        int has_path = n >= 7 && strcmp(url + n - 7, "/readyz") == 0;
        snprintf(full, sizeof full, "%s%s", url,
                 has_path ? "" : (n && url[n - 1] == '/' ? "readyz" : "/readyz"));
        curl_global_init(CURL_GLOBAL_DEFAULT);
        int rc = ready(full, why, sizeof why);
        curl_global_cleanup();
        if (rc != 0)
            return admin_fail(ADMIN_FAILED, strdup(why));
    }
    if (a->json)
        admin_print_json(json_pack("{s:b}", "healthy", 1), 0);
    else
        printf("healthy\n");
    return ADMIN_OK;
}
