package manager

// DefaultMaxConcurrentReconciles is how many objects of one kind (EtcdClusters, backups, ...) the operator
// reconciles at the same time. controller-runtime's default is one: a pass that waits on an etcd that does not
// answer yet (a new cluster's members starting, a member down: 2-second timeouts per call) then holds up every
// other cluster of the operator. One object is never reconciled by two workers at once (the work queue hands a
// key to one worker at a time), so the one-step-per-pass rule per cluster holds at any concurrency. docs/development/benchmarks.md
// ("Many clusters, one operator") measures one worker against this default.
const DefaultMaxConcurrentReconciles = 10
