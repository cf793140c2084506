package backup

import (
	"fmt"
	"path"
	"strings"
	"time"
)

// TimeFormat is the UTC timestamp in scheduled backups' names and keys: sortable, and free of ':' (which some
// file systems and S3 tools mishandle).
const TimeFormat = "20060102T150405Z"

// ArtifactName is the file or object name of a backup of cluster scheduled at t: <cluster>-<time>.db.
func ArtifactName(cluster string, t time.Time) string {
	return fmt.Sprintf("%s-%s.db", cluster, t.UTC().Format(TimeFormat))
}

// JoinPrefix puts name under prefix, which is a directory (PVC) or a key prefix (S3, GCS, Azure): "a/b" and "a/b/"
// both give "a/b/<name>"; an empty prefix gives name.
func JoinPrefix(prefix, name string) string {
	prefix = strings.TrimRight(prefix, "/")
	if prefix == "" {
		return name
	}
	return prefix + "/" + name
}

// ScheduledBackupName is the name of the EtcdBackup a schedule creates for scheduled time t. Derived from t, so
// that a second pass for the same time finds the backup instead of creating another. Kubernetes names are at
// most 253 characters; labels (the Job's name goes into one) at most 63, so the schedule's part is cut to fit.
func ScheduledBackupName(schedule string, t time.Time) string {
	suffix := "-" + strings.ToLower(t.UTC().Format(TimeFormat))
	const max = 63
	if len(schedule)+len(suffix) > max {
		schedule = strings.TrimRight(schedule[:max-len(suffix)], "-.")
	}
	return schedule + suffix
}

// TempName is where a snapshot is written before it is verified and committed under name: a hidden sibling in
// the same directory, so that the final rename is atomic and a crash leaves nothing under name.
func TempName(name, nonce string) string {
	dir, file := path.Split(name)
	return dir + "." + file + ".partial-" + nonce
}

// ParseArtifactName reads the scheduled time from name when it is a scheduled backup's object of cluster
// (ArtifactName); ok is false for anything else (a partial upload, another cluster's, a point-in-time snapshot).
func ParseArtifactName(cluster, name string) (t time.Time, ok bool) {
	rest, found := strings.CutPrefix(path.Base(name), cluster+"-")
	if !found {
		return time.Time{}, false
	}
	stamp, found := strings.CutSuffix(rest, ".db")
	if !found {
		return time.Time{}, false
	}
	t, err := time.Parse(TimeFormat, stamp)
	return t, err == nil
}
