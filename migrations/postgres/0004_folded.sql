-- Folded into 0001_init.sql (the SQLite history's version 4).
SELECT 1;
