-- Folded into 0001_init.sql (the SQLite history's version 6).
SELECT 1;
