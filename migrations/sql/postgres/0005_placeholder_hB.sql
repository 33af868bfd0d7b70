-- Placeholder for helper B's migration 0005 (issue 31 took 0006): the
-- lead replaces this file with B's at merge. It changes nothing.
SELECT 1;
