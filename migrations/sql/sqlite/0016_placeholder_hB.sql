-- Placeholder for helper B's migration 0016 (issue 31 took 0017): the
-- lead replaces this file with B's at merge. It changes nothing.
SELECT 1;
