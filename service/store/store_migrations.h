/* store_migrations — the schema migrations embedded at build time.
 * The table is generated from migrations/NNNN_name.sql by
 * embed_migrations.cmake, ordered by NNNN; store.c applies the ones whose
 * version is above the database's recorded user_version. */
#ifndef MCPD_STORE_MIGRATIONS_H
#define MCPD_STORE_MIGRATIONS_H

struct store_migration {
    int version;
    const char *name;
    const char *sql;
};

extern const struct store_migration store_migrations[];
extern const int store_migrations_count;
/* The same for PostgreSQL, from migrations/postgres/NNNN_name.sql (the
 * same version numbers). */
extern const struct store_migration store_migrations_pg[];
extern const int store_migrations_pg_count;

#endif
