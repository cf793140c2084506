package report

import (
	"fmt"
	"strings"

	"github.com/dustin/go-humanize"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
)

// Phase is where a one-shot object (EtcdBackup, EtcdRestore) is, in one word: Complete or Failed once it has
// ended, else the reason its Complete condition gives (Pending, Running, Verifying, Restoring,
// ConfirmationRequired, ...), and Pending before Steward has written any condition.
func Phase(conditions []metav1.Condition) string {
	switch {
	case meta.IsStatusConditionTrue(conditions, etcdv1alpha1.ConditionFailed):
		return etcdv1alpha1.ConditionFailed
	case meta.IsStatusConditionTrue(conditions, etcdv1alpha1.ConditionComplete):
		return etcdv1alpha1.ConditionComplete
	}
	if c := meta.FindStatusCondition(conditions, etcdv1alpha1.ConditionComplete); c != nil && c.Reason != "" {
		return c.Reason
	}
	return "Pending"
}

// Progress turns successive observations of a one-shot object's conditions into the lines a user waiting for
// it reads: one when its phase changes, and one for each condition whose status, reason or message changed
// (Steward rewrites a condition's message as the work moves on, for example which member a backup streams
// from). Observing the same conditions again prints nothing, so the caller may observe as often as it likes.
type Progress struct {
	phase string
	seen  map[string]metav1.Condition
}

// Observe returns the lines for what changed since the last observation.
func (p *Progress) Observe(conditions []metav1.Condition) []string {
	var lines []string
	if ph := Phase(conditions); ph != p.phase {
		lines = append(lines, "phase "+ph)
		p.phase = ph
	}
	if p.seen == nil {
		p.seen = map[string]metav1.Condition{}
	}
	for _, c := range orderedConditions(conditions) {
		old, ok := p.seen[c.Type]
		if ok && old.Status == c.Status && old.Reason == c.Reason && old.Message == c.Message {
			continue
		}
		p.seen[c.Type] = c
		line := fmt.Sprintf("%s=%s", c.Type, c.Status)
		if c.Reason != "" {
			line += " (" + c.Reason + ")"
		}
		if m := oneLine(c.Message); m != "" {
			line += ": " + m
		}
		lines = append(lines, line)
	}
	return lines
}

// Failure is the reason and message of an ended one-shot object's Failed condition, for the error a command
// returns; empty when it did not fail.
func Failure(conditions []metav1.Condition) string {
	c := meta.FindStatusCondition(conditions, etcdv1alpha1.ConditionFailed)
	if c == nil || c.Status != metav1.ConditionTrue {
		return ""
	}
	return strings.TrimSuffix(c.Reason+": "+oneLine(c.Message), ": ")
}

// BackupSummary is the line printed when a backup completed: where the snapshot is and what it holds.
func BackupSummary(b *etcdv1alpha1.EtcdBackup) string {
	s := b.Status
	parts := []string{fmt.Sprintf("etcdbackup/%s complete", b.Name)}
	if s.Location != "" {
		parts = append(parts, "at "+s.Location)
	}
	if s.SizeBytes > 0 {
		parts = append(parts, humanize.IBytes(uint64(s.SizeBytes)))
	}
	if s.Revision > 0 {
		parts = append(parts, fmt.Sprintf("revision %d", s.Revision))
	}
	if s.EtcdVersion != "" {
		parts = append(parts, "etcd "+s.EtcdVersion)
	}
	if s.Member != "" {
		parts = append(parts, "from member "+s.Member)
	}
	if s.StartTime != nil && s.CompletionTime != nil {
		parts = append(parts, "took "+s.CompletionTime.Sub(s.StartTime.Time).Round(1e9).String())
	}
	if s.SHA256 != "" {
		parts = append(parts, "sha256 "+s.SHA256)
	}
	return strings.Join(parts, ", ")
}

// RestoreSummary is the line printed when a restore completed.
func RestoreSummary(r *etcdv1alpha1.EtcdRestore) string {
	s := r.Status
	parts := []string{fmt.Sprintf("etcdrestore/%s complete: cluster %s restored from backup %s", r.Name, r.Spec.ClusterName, etcdv1alpha1.RestoreBackupName(r))}
	if s.Mode != "" {
		parts = append(parts, "mode "+string(s.Mode))
	}
	if s.Revision > 0 {
		parts = append(parts, fmt.Sprintf("revision %d", s.Revision))
	}
	if len(s.Members) > 0 {
		parts = append(parts, "members "+strings.Join(s.Members, " "))
	}
	if s.ClusterID != "" {
		parts = append(parts, "cluster ID "+s.ClusterID)
	}
	if len(s.RetiredVolumes) > 0 {
		parts = append(parts, "old volumes kept: "+strings.Join(s.RetiredVolumes, " "))
	}
	return strings.Join(parts, ", ")
}
