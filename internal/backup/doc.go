// Package backup owns what a backup is, apart from Kubernetes: how snapshots and their files or objects are
// named, which backups retention retires, the cron schedule, the result a backup Job reports, an EtcdRestore's
// steps (DecideRestore, the rollback of a cluster that has quorum included), and the streaming of a snapshot to
// its destination (a file on a mounted volume, or an S3-compatible bucket) with its etcd checksum verified on
// the way. The deciding parts (names, retention, schedule, result, restores) are pure: no clock of their own, no
// Kubernetes, no network. Nothing here imports k8s.io or sigs.k8s.io; the controllers in internal/controller
// translate between these values and API objects.
package backup
