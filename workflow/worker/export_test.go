package worker

// The statements Candidates reads, for TestCandidatesUseIndexes.
var RunningRunsSQL, QueuedRunsSQL = runningRuns, queuedRuns
