// PRAGMA integrity_check on an mcpd database, through Node's own SQLite
// (node:sqlite), read-only, while mcpd may still be running (WAL mode lets
// a reader in). Returns "ok" or SQLite's list of problems.

import { DatabaseSync } from 'node:sqlite';

export function integrityCheck(dbPath) {
  const db = new DatabaseSync(dbPath, { readOnly: true });
  try {
    return db
      .prepare('PRAGMA integrity_check')
      .all()
      .map((r) => Object.values(r)[0])
      .join('\n');
  } finally {
    db.close();
  }
}

/** Runs one read-only query; rows as objects. */
export function queryDb(dbPath, sql, ...params) {
  const db = new DatabaseSync(dbPath, { readOnly: true });
  try {
    return db.prepare(sql).all(...params);
  } finally {
    db.close();
  }
}
