// Package pitr is the pure core of continuous backup and point-in-time restore: the format of a segment (the
// changes etcd made over a range of revisions, as a follower watched them, with a checksum), the names segments
// are stored under, and the choice of a full snapshot and the unbroken chain of segments that lead from it to a
// target revision or time. It reads and writes bytes only; the follower and the replay that use it live in
// steward-agent, the etcd calls in internal/etcd.
package pitr
