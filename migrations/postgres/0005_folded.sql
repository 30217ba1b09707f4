-- Folded into 0001_init.sql (the SQLite history's version 5).
SELECT 1;
