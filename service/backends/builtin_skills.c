/* builtin_skills — the built-in skills directory (extension
 * io.modelcontextprotocol/skills, SEP-2640), for 2026-07-28 clients.
 *
 * A skill is a directory of files under skill://mcpd/<name>/ whose
 * SKILL.md opens with YAML frontmatter (name, description). The files are
 * compiled in; their SHA-256 digests are computed once. skills/list and
 * skills/get describe each skill (its frontmatter as JSON, and every file
 * with digest and size); the files are read with resources/read, listed
 * by resources/list, and walked with resources/directory/read (the
 * extension's directoryRead). */
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "builtin_int.h"

#define SKILLS_PREFIX "skill://mcpd/"

struct skill_file {
    const char *path; /* below the skill's directory */
    const char *mime_type;
    const char *text;
};

struct skill {
    const char *name, *description;
    struct skill_file files[4]; /* files[0] is SKILL.md */
};

static const struct skill skills[] = {
    {"hello-world",
     "Greets someone by name with mcpd's echo tool",
     {{"SKILL.md", "text/markdown",
       "---\n"
       "name: hello-world\n"
       "description: Greets someone by name with mcpd's echo tool\n"
       "---\n"
       "\n"
       "# Hello world\n"
       "\n"
       "1. Ask the user for their name.\n"
       "2. Call the `echo` tool with `{\"message\": \"Hello, <name>!\"}`.\n"
       "3. Show the text it returns.\n"
       "\n"
       "See references/greetings.md for greetings in other languages.\n"},
      {"references/greetings.md", "text/markdown",
       "# Greetings\n\n- English: Hello\n- French: Bonjour\n- German: Hallo\n- Spanish: Hola\n"},
      {NULL, NULL, NULL}}},
};
#define NSKILLS (sizeof skills / sizeof skills[0])
#define MAX_FILES (sizeof skills[0].files / sizeof skills[0].files[0])

static char digests[NSKILLS][MAX_FILES][72]; /* "sha256:<64 hex>" */
static pthread_once_t digests_once = PTHREAD_ONCE_INIT;

static void compute_digests(void)
{
    for (size_t s = 0; s < NSKILLS; s++)
        for (size_t f = 0; f < MAX_FILES && skills[s].files[f].path; f++) {
            unsigned char d[32];
            const char *t = skills[s].files[f].text;
            if (gnutls_hash_fast(GNUTLS_DIG_SHA256, t, strlen(t), d) != 0)
                continue;
            char *o = digests[s][f];
            o += sprintf(o, "sha256:");
            for (size_t i = 0; i < sizeof d; i++)
                o += sprintf(o, "%02x", d[i]);
        }
}

static json_t *file_uri(const struct skill *s, const char *path)
{
    return json_sprintf(SKILLS_PREFIX "%s/%s", s->name, path);
}

static json_t *entry(size_t i)
{
    pthread_once(&digests_once, compute_digests);
    const struct skill *s = &skills[i];
    json_t *files = json_array();
    for (size_t f = 0; f < MAX_FILES && s->files[f].path; f++)
        json_array_append_new(
            files, json_pack("{s:o, s:s, s:I}", "uri", file_uri(s, s->files[f].path), "digest",
                             digests[i][f], "size", (json_int_t)strlen(s->files[f].text)));
    return json_pack("{s:o, s:{s:s, s:s}, s:o}", "uri", file_uri(s, "SKILL.md"), "frontmatter",
                     "name", s->name, "description", s->description, "resources", files);
}

void builtin_skills_list(struct builtin *b, struct call *c)
{
    (void)b;
    if (builtin_check_cursor(c) != 0)
        return;
    json_t *list = json_array();
    for (size_t i = 0; i < NSKILLS; i++)
        json_array_append_new(list, entry(i));
    builtin_reply(c, json_pack("{s:o}", "skills", list));
}

/* The skill and file a skill:// URI names; -1 when none. */
static int find(const char *uri, size_t *skill, size_t *file)
{
    for (size_t s = 0; uri && s < NSKILLS; s++)
        for (size_t f = 0; f < MAX_FILES && skills[s].files[f].path; f++) {
            json_t *u = file_uri(&skills[s], skills[s].files[f].path);
            int same = strcmp(json_string_value(u), uri) == 0;
            json_decref(u);
            if (same) {
                *skill = s;
                *file = f;
                return 0;
            }
        }
    return -1;
}

static void unknown(struct call *c, const char *what, const char *uri)
{
    char clip[200];
    builtin_failf(c, -32602, json_pack("{s:s}", "uri", uri ? uri : ""), "%s: %s", what,
                  builtin_clip(uri ? uri : "(none)", clip, sizeof clip));
}

void builtin_skills_get(struct builtin *b, struct call *c)
{
    (void)b;
    const char *uri = json_string_value(json_object_get(call_params(c), "uri"));
    size_t s, f;
    if (find(uri, &s, &f) != 0 || f != 0) {
        unknown(c, "Unknown skill", uri);
        return;
    }
    builtin_reply(c, json_pack("{s:o}", "skill", entry(s)));
}

json_t *builtin_skills_resources(void)
{
    json_t *list = json_array();
    for (size_t s = 0; s < NSKILLS; s++)
        for (size_t f = 0; f < MAX_FILES && skills[s].files[f].path; f++)
            json_array_append_new(
                list, json_pack("{s:o, s:s, s:s, s:s}", "uri",
                                file_uri(&skills[s], skills[s].files[f].path), "name",
                                f == 0 ? skills[s].name : skills[s].files[f].path, "description",
                                f == 0 ? skills[s].description : "A file of the skill", "mimeType",
                                skills[s].files[f].mime_type));
    return list;
}

int builtin_skills_read(struct call *c, const char *uri)
{
    size_t s, f;
    if (find(uri, &s, &f) != 0)
        return -1;
    builtin_reply(c, json_pack("{s:[{s:s, s:s, s:s}]}", "contents", "uri", uri, "mimeType",
                               skills[s].files[f].mime_type, "text", skills[s].files[f].text));
    return 0;
}

/* resources/directory/read: the direct children of a skill's directory
 * (or of a directory within it). */
void builtin_skills_directory_read(struct builtin *b, struct call *c)
{
    (void)b;
    const char *uri = json_string_value(json_object_get(call_params(c), "uri"));
    json_t *children = NULL;
    for (size_t s = 0; uri && s < NSKILLS && !children; s++) {
        char root[200];
        snprintf(root, sizeof root, SKILLS_PREFIX "%s", skills[s].name);
        size_t rl = strlen(root);
        if (strncmp(uri, root, rl) != 0 || (uri[rl] != '\0' && uri[rl] != '/'))
            continue;
        /* The directory below the skill's root ("" for the root). */
        const char *dir = uri[rl] ? uri + rl + 1 : "";
        size_t dl = strlen(dir);
        if (dl && dir[dl - 1] == '/')
            dl--;
        json_t *list = json_array();
        int found = dl == 0;
        for (size_t f = 0; f < MAX_FILES && skills[s].files[f].path; f++) {
            const char *p = skills[s].files[f].path;
            if (dl && (strncmp(p, dir, dl) != 0 || p[dl] != '/'))
                continue;
            found = 1;
            const char *rest = dl ? p + dl + 1 : p;
            const char *slash = strchr(rest, '/');
            size_t seglen = slash ? (size_t)(slash - rest) : strlen(rest);
            char child[300];
            snprintf(child, sizeof child, "%s/%.*s", root, (int)((size_t)(rest - p) + seglen), p);
            int is_dir = slash != NULL;
            int dup = 0;
            size_t i;
            json_t *e;
            json_array_foreach(list, i, e) dup |=
                strcmp(json_string_value(json_object_get(e, "uri")), child) == 0;
            if (dup)
                continue;
            json_array_append_new(
                list, json_pack("{s:s, s:s%, s:s}", "uri", child, "name", rest, seglen, "mimeType",
                                is_dir ? "inode/directory" : skills[s].files[f].mime_type));
        }
        if (found)
            children = list;
        else
            json_decref(list);
    }
    if (!children) {
        unknown(c, "Not a directory", uri);
        return;
    }
    builtin_reply(c, json_pack("{s:o}", "resources", children));
}
