-- Folded into 0001_init.sql (the SQLite history's version 3).
SELECT 1;
