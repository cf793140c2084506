package pitr

import (
	"fmt"
	"path"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// SegmentsBase is the directory (PVC) or key prefix (S3, GCS, Azure), next to a schedule's snapshots, that holds a
// cluster's segments; SegmentsDir the part of it for one etcd cluster ID: a restored cluster has a new ID and starts a
// new chain.
func SegmentsBase(destination, cluster string) string {
	return path.Join(destination, cluster+"-segments")
}

// SegmentsDir is the directory of one etcd cluster ID's segments under base.
func SegmentsDir(base, clusterID string) string { return path.Join(base, clusterID) }

// nameTime is the time format in segment names: fixed width, so that names sort as their times do.
const nameTime = "20060102T150405.000000000Z"

var nameRE = regexp.MustCompile(`^seg-([0-9]{20})-([0-9]{20})-([0-9]{8}T[0-9]{6}\.[0-9]{9}Z)\.seg$`)

// Ref is a stored segment as its name describes it: enough to plan a restore without reading the segment.
type Ref struct {
	// Name is the segment's file or object name (without its directory).
	Name        string
	First, Last int64
	LastTime    time.Time
}

// Name is the name a segment with this header is stored under. Names sort by first revision, then last, then
// time, which is the order a chain reads them in.
func Name(h Header) string {
	return fmt.Sprintf("seg-%020d-%020d-%s.seg", h.First, h.Last, h.LastTime.UTC().Format(nameTime))
}

// ParseName reads a Ref from a segment's name; ok is false for any other file (a partial upload, a snapshot).
func ParseName(name string) (Ref, bool) {
	name = path.Base(name)
	m := nameRE.FindStringSubmatch(name)
	if m == nil {
		return Ref{}, false
	}
	first, err1 := strconv.ParseInt(m[1], 10, 64)
	last, err2 := strconv.ParseInt(m[2], 10, 64)
	t, err3 := time.Parse(nameTime, m[3])
	if err1 != nil || err2 != nil || err3 != nil || first < 1 || last < first-1 {
		return Ref{}, false
	}
	return Ref{Name: name, First: first, Last: last, LastTime: t}, true
}

// Matches reports whether a segment read back is the one its name promised.
func (r Ref) Matches(h Header) bool {
	return h.First == r.First && h.Last == r.Last && h.LastTime.UTC().Format(nameTime) == r.LastTime.Format(nameTime)
}

// String is how refusals name a segment.
func (r Ref) String() string { return strings.TrimSuffix(r.Name, ".seg") }
