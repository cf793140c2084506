package report

import (
	"fmt"
	"strings"

	"github.com/dustin/go-humanize"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
)

// HibernationProgress is one line saying where a cluster is in hibernating or resuming, for a user waiting for
// it: the phase and, while Steward is at work, its Progressing message ("phase Hibernating: stopping
// db-bbbbb"); before Steward reports a phase, that it has not; once status.hibernation is gone, the Available
// condition. The caller prints it when it changed.
func HibernationProgress(c *etcdv1alpha1.EtcdCluster) string {
	if h := c.Status.Hibernation; h != nil {
		line := "phase " + string(h.Phase)
		if p := meta.FindStatusCondition(c.Status.Conditions, etcdv1alpha1.ConditionProgressing); p != nil &&
			p.Status == metav1.ConditionTrue && oneLine(p.Message) != "" {
			line += ": " + oneLine(p.Message)
		}
		return line
	}
	if etcdv1alpha1.HibernationRequested(c) {
		return "no phase yet: Steward has not begun to hibernate the cluster"
	}
	a := meta.FindStatusCondition(c.Status.Conditions, etcdv1alpha1.ConditionAvailable)
	if a == nil {
		return "Available unknown"
	}
	line := fmt.Sprintf("%s=%s", a.Type, a.Status)
	if a.Reason != "" {
		line += " (" + a.Reason + ")"
	}
	if m := oneLine(a.Message); m != "" {
		line += ": " + m
	}
	return line
}

// HibernatedSummary is the line printed when a cluster is Hibernated: what its kept volumes hold.
func HibernatedSummary(c *etcdv1alpha1.EtcdCluster) string {
	parts := []string{fmt.Sprintf("etcdcluster/%s hibernated", c.Name)}
	if h := c.Status.Hibernation; h != nil {
		parts = append(parts, kept(h.Members, h.DataSizeBytes, h.Revision)...)
	}
	return strings.Join(parts, ", ")
}

// kept is what a hibernated cluster's volumes hold, as status.hibernation reports it; empty parts are left out.
func kept(members []string, dataSizeBytes, revision int64) []string {
	var parts []string
	if len(members) > 0 {
		parts = append(parts, "volumes kept: "+strings.Join(members, " "))
	}
	if dataSizeBytes > 0 {
		parts = append(parts, "data "+humanize.IBytes(uint64(dataSizeBytes)))
	}
	if revision > 0 {
		parts = append(parts, fmt.Sprintf("revision %d", revision))
	}
	return parts
}

// ResumedSummary is the line printed when a cluster is back from hibernation and Available.
func ResumedSummary(c *etcdv1alpha1.EtcdCluster) string {
	line := fmt.Sprintf("etcdcluster/%s resumed and Available", c.Name)
	if a := meta.FindStatusCondition(c.Status.Conditions, etcdv1alpha1.ConditionAvailable); a != nil && oneLine(a.Message) != "" {
		line += ": " + oneLine(a.Message)
	}
	return line
}

// AdoptionProgress is one line on where an adoption of a running etcd is while `adopt --wait` follows it: the
// phase once Steward reports one, with Progressing's reason and message (the preflight's refusal among them).
func AdoptionProgress(c *etcdv1alpha1.EtcdCluster) string {
	line := "checking the source"
	if a := c.Status.Adoption; a != nil && a.Phase != "" {
		line = "phase " + string(a.Phase)
	}
	if p := meta.FindStatusCondition(c.Status.Conditions, etcdv1alpha1.ConditionProgressing); p != nil && p.Reason != "" {
		line += fmt.Sprintf(" (%s)", p.Reason)
		if m := oneLine(p.Message); m != "" {
			line += ": " + m
		}
	}
	return line
}
