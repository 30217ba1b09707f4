-- Folded into 0001_init.sql (the SQLite history's version 7).
SELECT 1;
