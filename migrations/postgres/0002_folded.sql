-- Folded into 0001_init.sql (the SQLite history's version 2).
SELECT 1;
