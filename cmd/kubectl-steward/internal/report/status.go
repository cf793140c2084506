// Package report turns API objects into what kubectl-steward shows: the status of a cluster (from its
// EtcdCluster and its member Pods, never from etcd), the progress lines of a backup or restore being waited for,
// and their rendering as a table. It is pure: no client, no clock of its own (the time is passed in), no
// output of its own (it writes to the io.Writer it is given), so every view is table-tested.
package report

import (
	"fmt"
	"net/url"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/resources"
)

// Status is the cluster status `kubectl steward status` prints, and its -o json|yaml document. Its fields are
// read from the EtcdCluster's status and spec and from the member Pods; nothing is asked of etcd.
type Status struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	// Paused is spec.paused: Steward observes but changes nothing.
	Paused bool `json:"paused"`
	// DesiredMembers is spec.replicas, ReadyMembers status.readyReplicas (healthy voters).
	DesiredMembers int32 `json:"desiredMembers"`
	ReadyMembers   int32 `json:"readyMembers"`
	// Version is spec.version; CurrentVersion the oldest a member runs; ClusterVersion etcd's cluster version.
	Version         string `json:"version"`
	CurrentVersion  string `json:"currentVersion,omitempty"`
	ClusterVersion  string `json:"clusterVersion,omitempty"`
	DowngradeTarget string `json:"downgradeTarget,omitempty"`
	Leader          string `json:"leader,omitempty"`
	ClusterID       string `json:"clusterID,omitempty"`
	ClientEndpoint  string `json:"clientEndpoint,omitempty"`
	// External is how clients outside the Kubernetes cluster reach it (spec.service NodePort or LoadBalancer).
	External string `json:"external,omitempty"`
	// ObservedGeneration lags Generation while Steward has not yet acted on the newest spec.
	Generation         int64 `json:"generation"`
	ObservedGeneration int64 `json:"observedGeneration"`
	// QuorumLostSince is set while the formed cluster has no quorum.
	QuorumLostSince *metav1.Time `json:"quorumLostSince,omitempty"`
	// Hibernation is status.hibernation: set from the moment spec.hibernation.enabled is seen until the cluster
	// is Available again after resuming.
	Hibernation *Hibernation `json:"hibernation,omitempty"`
	Members     []Member     `json:"members"`
	// Alarms are the alarms etcd has raised and not disarmed, per member (status.alarms).
	Alarms []Alarm `json:"alarms,omitempty"`
	// Certificates is empty for a plaintext cluster.
	TLS        TLS         `json:"tls"`
	LastBackup *LastBackup `json:"lastBackup,omitempty"`
	Conditions []Condition `json:"conditions"`
	Step       *Step       `json:"step,omitempty"`
}

// Member is one row of the members table: a member in status.members, a member Pod, or both.
type Member struct {
	Name string `json:"name"`
	// ID is etcd's member ID in hex (empty until the member joined).
	ID          string `json:"id,omitempty"`
	Role        string `json:"role,omitempty"`
	Version     string `json:"version,omitempty"`
	Healthy     bool   `json:"healthy"`
	DBSizeBytes int64  `json:"dbSizeBytes,omitempty"`
	// DBSizeInUseBytes is the part of the database in use (the rest is what a defragmentation returns).
	DBSizeInUseBytes int64 `json:"dbSizeInUseBytes,omitempty"`
	// TLS is how the member runs: TLS, Plaintext or Bridge.
	TLS string `json:"tls,omitempty"`
	// Pod is the member Pod's state: Ready, Running, Pending, Terminating, a waiting reason such as
	// CrashLoopBackOff, or Missing when there is none.
	Pod            string       `json:"pod"`
	Node           string       `json:"node,omitempty"`
	UnhealthySince *metav1.Time `json:"unhealthySince,omitempty"`
	// InStatus is false for a Pod Steward has not (yet) reported as a member, for example while it joins.
	InStatus bool `json:"inStatus"`
}

// Alarm is one etcd alarm on one member: NOSPACE (writes refused at the quota) or CORRUPT.
type Alarm struct {
	Member string `json:"member"`
	Alarm  string `json:"alarm"`
}

// TLS is the cluster's certificates: which provider, which Secrets, when they expire.
type TLS struct {
	Provider     string       `json:"provider"`
	CASecret     string       `json:"caSecret,omitempty"`
	MemberSecret string       `json:"memberSecret,omitempty"`
	ClientSecret string       `json:"clientSecret,omitempty"`
	CANotAfter   *metav1.Time `json:"caNotAfter,omitempty"`
	// NotAfter is the first expiry among the member and client certificates.
	NotAfter *metav1.Time `json:"notAfter,omitempty"`
}

// LastBackup is the cluster's newest Complete EtcdBackup (status.lastBackup).
type LastBackup struct {
	Name string       `json:"name"`
	Time *metav1.Time `json:"time,omitempty"`
}

// Hibernation is where the cluster is in hibernating or resuming (status.hibernation).
type Hibernation struct {
	// Phase is Hibernating, Hibernated or Resuming.
	Phase string      `json:"phase"`
	Since metav1.Time `json:"since"`
	// Members are the members whose volumes are kept, to come back.
	Members []string `json:"members,omitempty"`
	// DataSizeBytes is the largest member's database size before the members stopped; Revision the cluster's
	// revision then.
	DataSizeBytes int64 `json:"dataSizeBytes,omitempty"`
	Revision      int64 `json:"revision,omitempty"`
}

// Condition is a condition of the EtcdCluster.
type Condition struct {
	Type               string      `json:"type"`
	Status             string      `json:"status"`
	Reason             string      `json:"reason"`
	Message            string      `json:"message,omitempty"`
	LastTransitionTime metav1.Time `json:"lastTransitionTime"`
}

// Step is the step in progress: the Progressing condition while it is True.
type Step struct {
	Reason  string      `json:"reason"`
	Message string      `json:"message"`
	Since   metav1.Time `json:"since"`
}

// PodState names a member Pod's state in one word, the way an SRE reads it first.
func PodState(p *corev1.Pod) string {
	switch {
	case p == nil:
		return "Missing"
	case p.DeletionTimestamp != nil:
		return "Terminating"
	}
	for _, cs := range append(append([]corev1.ContainerStatus(nil), p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		if w := cs.State.Waiting; w != nil && w.Reason != "" && w.Reason != "PodInitializing" && w.Reason != "ContainerCreating" {
			return w.Reason
		}
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return "Ready"
		}
	}
	if p.Status.Phase == "" {
		return string(corev1.PodPending)
	}
	return string(p.Status.Phase)
}

// NewStatus gathers the status of cluster from its EtcdCluster and the Pods labelled as its members. Pods of
// other clusters are ignored, so the caller may pass whatever its label selector returned.
func NewStatus(cluster *etcdv1alpha1.EtcdCluster, pods []corev1.Pod) Status {
	st := cluster.Status
	s := Status{
		Name: cluster.Name, Namespace: cluster.Namespace, Paused: cluster.Spec.Paused,
		DesiredMembers: cluster.Spec.Replicas, ReadyMembers: st.ReadyReplicas,
		Version: cluster.Spec.Version, CurrentVersion: st.CurrentVersion, ClusterVersion: st.ClusterVersion,
		DowngradeTarget: st.DowngradeTarget, Leader: st.Leader, ClusterID: st.ClusterID,
		ClientEndpoint: st.ClientEndpoint, External: externalAccess(st.ExternalAccess),
		Generation: cluster.Generation, ObservedGeneration: st.ObservedGeneration,
		QuorumLostSince: st.QuorumLostSince,
		TLS:             TLS{Provider: resources.TLSMode(cluster)},
		Members:         []Member{},
		Conditions:      []Condition{},
	}
	for _, a := range st.Alarms {
		s.Alarms = append(s.Alarms, Alarm{Member: a.Member, Alarm: a.Alarm})
	}
	byName := map[string]*corev1.Pod{}
	for i := range pods {
		p := &pods[i]
		if p.Labels[resources.LabelCluster] != cluster.Name || p.Namespace != cluster.Namespace {
			continue
		}
		if name := p.Labels[resources.LabelMember]; name != "" {
			byName[name] = p
		}
	}
	for _, m := range st.Members {
		p := byName[m.Name]
		delete(byName, m.Name)
		row := Member{Name: m.Name, ID: m.ID, Role: string(m.Role), Version: m.Version, Healthy: m.Healthy,
			DBSizeBytes: m.DBSizeBytes, DBSizeInUseBytes: m.DBSizeInUseBytes, TLS: m.TLS, Pod: PodState(p), UnhealthySince: m.UnhealthySince, InStatus: true}
		if p != nil {
			row.Node = p.Spec.NodeName
		}
		s.Members = append(s.Members, row)
	}
	// Pods Steward has not reported as members yet (a member joining, or one it lost track of).
	for name, p := range byName {
		s.Members = append(s.Members, Member{Name: name, Pod: PodState(p), Node: p.Spec.NodeName})
	}
	sort.Slice(s.Members, func(i, j int) bool { return s.Members[i].Name < s.Members[j].Name })

	if t := st.TLS; t != nil {
		s.TLS.CASecret, s.TLS.MemberSecret, s.TLS.ClientSecret = t.CASecret, t.MemberSecret, t.ClientSecret
		s.TLS.CANotAfter, s.TLS.NotAfter = t.CANotAfter, t.NotAfter
	}
	if h := st.Hibernation; h != nil {
		s.Hibernation = &Hibernation{Phase: string(h.Phase), Since: h.Since, Members: slices.Clone(h.Members),
			DataSizeBytes: h.DataSizeBytes, Revision: h.Revision}
	}
	if b := st.LastBackup; b != nil {
		s.LastBackup = &LastBackup{Name: b.Name, Time: b.Time}
	}
	for _, c := range orderedConditions(st.Conditions) {
		s.Conditions = append(s.Conditions, Condition{Type: c.Type, Status: string(c.Status), Reason: c.Reason,
			Message: c.Message, LastTransitionTime: c.LastTransitionTime})
	}
	if c := meta.FindStatusCondition(st.Conditions, etcdv1alpha1.ConditionProgressing); c != nil && c.Status == metav1.ConditionTrue {
		s.Step = &Step{Reason: c.Reason, Message: c.Message, Since: c.LastTransitionTime}
	}
	return s
}

// conditionOrder is the order conditions are listed in: the documented ones first, as the API lists them.
var conditionOrder = []string{etcdv1alpha1.ConditionAvailable, etcdv1alpha1.ConditionProgressing, etcdv1alpha1.ConditionDegraded}

func orderedConditions(cs []metav1.Condition) []metav1.Condition {
	out := slices.Clone(cs)
	rank := func(t string) int {
		if i := slices.Index(conditionOrder, t); i >= 0 {
			return i
		}
		return len(conditionOrder)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if ri, rj := rank(out[i].Type), rank(out[j].Type); ri != rj {
			return ri < rj
		}
		return out[i].Type < out[j].Type
	})
	return out
}

// ServerName is the name every member's certificate carries, whatever its provider: the client Service's
// host, as the cluster's status.clientEndpoint has it (Steward dials members by IP and checks this name). A
// cluster whose status has no endpoint yet gets the Service's name without the cluster domain, which
// certificates of providers Steward and CertManager carry too.
func ServerName(cluster *etcdv1alpha1.EtcdCluster) string {
	if u, err := url.Parse(cluster.Status.ClientEndpoint); err == nil && u.Hostname() != "" {
		return u.Hostname()
	}
	return resources.ClientServiceName(cluster) + "." + cluster.Namespace + ".svc"
}

// Since is how long ago t was, for humans, the way kubectl's AGE column rounds ("3m", "2d4h"); a time in the
// future reads "in 89d", as certificate expiries do.
func Since(now, t time.Time) string {
	d := now.Sub(t)
	if d < 0 {
		return "in " + duration.HumanDuration(-d)
	}
	return duration.HumanDuration(d) + " ago"
}

// externalAccess says in one line how clients outside the cluster reach it, "" when they do not.
func externalAccess(a *etcdv1alpha1.ExternalAccess) string {
	switch {
	case a == nil:
		return ""
	case len(a.LoadBalancer) > 0:
		return fmt.Sprintf("%s %s (node port %d)", a.Type, strings.Join(a.LoadBalancer, ", "), a.NodePort)
	case a.Type == corev1.ServiceTypeLoadBalancer:
		return fmt.Sprintf("%s, no address yet (node port %d)", a.Type, a.NodePort)
	}
	return fmt.Sprintf("%s, port %d on every node", a.Type, a.NodePort)
}
