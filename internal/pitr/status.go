package pitr

import "time"

// FollowerStatus is what a continuous-backup follower reports at GET /status, and what the operator copies into
// the schedule's status. It holds positions and times only, never keys or values.
type FollowerStatus struct {
	// ClusterID (hex) of the etcd cluster followed; Location the directory its segments go to.
	ClusterID string `json:"clusterID,omitempty"`
	Location  string `json:"location,omitempty"`
	// Watching: the follower has a watch open and receives changes.
	Watching bool `json:"watching"`
	// ChainStart is the first revision of the unbroken run of segments the follower extends: a snapshot at
	// revision ChainStart-1 or later can be carried forward by it. It moves forward after a gap (a compaction).
	ChainStart     int64     `json:"chainStart,omitempty"`
	ChainStartTime time.Time `json:"chainStartTime,omitempty"`
	// LastRevision and LastTime: the end of the newest stored segment (what a restore can reach now).
	LastRevision int64     `json:"lastRevision,omitempty"`
	LastTime     time.Time `json:"lastTime,omitempty"`
	// CurrentRevision is the newest revision the watch has delivered; Pending the changes not stored yet.
	CurrentRevision int64 `json:"currentRevision,omitempty"`
	Pending         int   `json:"pending"`
	// Segments and Bytes stored since the follower started.
	Segments int   `json:"segments"`
	Bytes    int64 `json:"bytes"`
	// CompactedAt is when etcd last refused the revision the follower needed next because it had compacted it
	// (CompactedRevision): a gap, after which the follower starts a new chain from the current revision.
	CompactedAt       *time.Time `json:"compactedAt,omitempty"`
	CompactedRevision int64      `json:"compactedRevision,omitempty"`
	// Error is the last failure (connecting, watching, storing), cleared when the next segment is stored.
	Error     string     `json:"error,omitempty"`
	ErrorTime *time.Time `json:"errorTime,omitempty"`
}

// StandbyStatus is what a standby's applier reports at GET /status, and what the operator copies into the
// cluster's status.standby. Positions, times and reasons only, never keys or values.
type StandbyStatus struct {
	// SourceClusterID (hex) of the primary followed; Location the segment directory read.
	SourceClusterID string `json:"sourceClusterID,omitempty"`
	Location        string `json:"location,omitempty"`
	// AppliedRevision is the standby's revision, read from its etcd.
	AppliedRevision int64 `json:"appliedRevision"`
	// SourceRevision and SourceTime: the end of the newest stored segment.
	SourceRevision int64     `json:"sourceRevision"`
	SourceTime     time.Time `json:"sourceTime,omitempty"`
	// LagRevisions and LagSeconds: see Lag; LagKnown false when the seconds could not be measured.
	LagRevisions int64   `json:"lagRevisions"`
	LagSeconds   float64 `json:"lagSeconds"`
	LagKnown     bool    `json:"lagKnown"`
	// LastSegment is the name of the last segment applied in full.
	LastSegment string `json:"lastSegment,omitempty"`
	// SourceChanged is when the applier last saw the source's list of segments change, on its own clock (from
	// its start, until it has listed twice): what promotion's fencing window counts from.
	SourceChanged time.Time `json:"sourceChanged"`
	// Stopped is the reason the applier applies nothing more (a gap, a corrupt segment, a diverged standby, a
	// changed source: the Standby condition's reasons); empty while it follows. Message says why in words.
	Stopped string `json:"stopped,omitempty"`
	Message string `json:"message,omitempty"`
	// Error is the last failure that does not stop the standby (reading the source, reaching the standby's
	// etcd), cleared by the next poll that succeeds.
	Error string `json:"error,omitempty"`
	// Time is when the applier last polled.
	Time time.Time `json:"time"`
}
