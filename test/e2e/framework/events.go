package framework

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
)

// EventsWithin waits up to 30 seconds for want Events of reason since begin (the recorder writes them
// asynchronously, the last ones possibly after the cluster has settled) and returns those there are.
func EventsWithin(t *testing.T, c *etcdv1alpha1.EtcdCluster, reason string, begin time.Time, want int) []string {
	t.Helper()
	var got []string
	deadline := time.Now().Add(30 * time.Second)
	for {
		if got = EventsOf(t, c, reason, begin); len(got) >= want || time.Now().After(deadline) {
			return got
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// EventsOf returns the messages of the cluster's Events of reason since begin.
func EventsOf(t *testing.T, c *etcdv1alpha1.EtcdCluster, reason string, begin time.Time) []string {
	t.Helper()
	var events corev1.EventList
	if err := K8s.List(context.Background(), &events, client.InNamespace(c.Namespace)); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range events.Items {
		if e.InvolvedObject.Name == c.Name && e.Reason == reason && !e.LastTimestamp.Time.Before(begin.Truncate(time.Second)) {
			out = append(out, e.Message)
		}
	}
	sort.Strings(out)
	return out
}

// RemovalEvent returns the message of the MemberRemoved Event Steward recorded for the cluster's member name.
func RemovalEvent(t *testing.T, c *etcdv1alpha1.EtcdCluster, name string) string {
	t.Helper()
	var msg string
	Poll(t, "MemberRemoved event for "+name, 30*time.Second, func() error {
		var events corev1.EventList
		if err := K8s.List(context.Background(), &events, client.InNamespace(c.Namespace)); err != nil {
			return err
		}
		for _, e := range events.Items {
			if e.InvolvedObject.Name == c.Name && e.Reason == "MemberRemoved" && strings.Contains(e.Message, "member "+name+" ") {
				msg = e.Message
				return nil
			}
		}
		return fmt.Errorf("no MemberRemoved event for %s among %d events", name, len(events.Items))
	})
	return msg
}

// LogEvents logs the Events recorded for cluster c since begin, in order, with their time after begin.
func LogEvents(t *testing.T, c *etcdv1alpha1.EtcdCluster, begin time.Time) {
	t.Helper()
	var events corev1.EventList
	if err := K8s.List(context.Background(), &events, client.InNamespace(c.Namespace)); err != nil {
		t.Fatal(err)
	}
	since := begin.Truncate(time.Second)
	var lines []corev1.Event
	for _, e := range events.Items {
		if e.InvolvedObject.Name == c.Name && !e.LastTimestamp.Time.Before(since) {
			lines = append(lines, e)
		}
	}
	sort.SliceStable(lines, func(i, j int) bool { return lines[i].FirstTimestamp.Before(&lines[j].FirstTimestamp) })
	for _, e := range lines {
		t.Logf("event +%s %s %s: %s (x%d)", e.FirstTimestamp.Sub(since), e.Type, e.Reason, e.Message, e.Count)
	}
}
