package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/resources"
	"steward.dev/steward/internal/version"
	"steward.dev/steward/test/e2e/framework"
)

// installPrevious installs the previous Steward as its users did: its CRDs, and this tree's config/default
// (the previous tree named an image nothing built) with the previous image for the operator and its Jobs.
func installPrevious(t *testing.T, image, tree string) {
	t.Helper()
	framework.Kubectl(t, "", "apply", "--server-side", "--force-conflicts", "-f", filepath.Join(tree, "config", "crd", "bases"))
	manifests := framework.Kubectl(t, "", "kustomize", "config/default")
	manifests = strings.ReplaceAll(manifests, "image: "+version.Image, "image: "+image)
	manifests = strings.Replace(manifests, "- --health-probe-bind-address=:8081", "- --health-probe-bind-address=:8081\n        - --agent-image="+image, 1)
	if !strings.Contains(manifests, "--agent-image="+image) {
		t.Fatal("could not point the previous operator's Jobs at its image: config/default's args changed form")
	}
	framework.Kubectl(t, manifests, "apply", "--server-side", "--force-conflicts", "-f", "-")
	t.Cleanup(func() { framework.UninstallOperator(t) })
	framework.WaitOperatorRolledOut(t, image, 4*time.Minute)
}

// TestOperatorUpgrade installs the previous Steward, lets it run a TLS cluster with a backup schedule under
// client load, then upgrades the operator to this tree's release the documented way (its CRDs and
// config/default, applied over the old install). The new release changes nothing in member Pods, so no member
// restarts; the schedule keeps firing; status keeps what it knew (members, their IDs, the cluster ID, an
// Available condition that never flipped); no acknowledged write is lost.
func TestOperatorUpgrade(t *testing.T) {
	serial(t, "installs cluster-wide operators and replaces the CRDs with an older release's for a while")
	ctx := context.Background()
	image, tree := framework.BuildPreviousSteward(t, framework.PreviousSteward)
	installPrevious(t, image, tree)
	ns := framework.NewNamespace(t, "opupgrade")
	framework.CreateS3Secret(t, ns)
	c := framework.NewCluster(ns, "steady", 3)
	if err := framework.K8s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(c)
	got := framework.WaitSettled(t, key, 4*time.Minute)
	if got.Status.TLS == nil {
		t.Fatalf("the cluster runs without TLS: %+v", got.Status)
	}
	schedule := &etcdv1alpha1.EtcdBackupSchedule{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "every-30s"},
		Spec: etcdv1alpha1.EtcdBackupScheduleSpec{ClusterName: c.Name, Schedule: "@every 30s", Destination: framework.S3Destination(ns + "/scheduled"),
			Retention: etcdv1alpha1.Retention{MaxCount: ptr.To[int32](3)}}}
	if err := framework.K8s.Create(ctx, schedule); err != nil {
		t.Fatal(err)
	}
	waitScheduledBackup(t, client.ObjectKeyFromObject(schedule), time.Time{}, image)
	load := framework.StartLoad(t, got)

	before := framework.MemberPodsFingerprint(t, got)
	members := fmt.Sprint(framework.MemberIDs(got))
	available := meta.FindStatusCondition(got.Status.Conditions, etcdv1alpha1.ConditionAvailable).LastTransitionTime
	upgraded := time.Now()
	framework.Kubectl(t, "", "apply", "--server-side", "--force-conflicts", "-k", "config/default")
	framework.WaitOperatorRolledOut(t, version.Image, 4*time.Minute)
	t.Logf("operator upgraded from %s to %s in %s", image, version.Image, time.Since(upgraded).Round(100*time.Millisecond))
	waitScheduledBackup(t, client.ObjectKeyFromObject(schedule), upgraded, version.Image)

	got = framework.WaitSettled(t, key, 2*time.Minute)
	if after := framework.MemberPodsFingerprint(t, got); after != before {
		t.Errorf("member Pods changed across the operator upgrade:\nbefore %s\nafter  %s", before, after)
		framework.LogEvents(t, got, upgraded)
	}
	if now := fmt.Sprint(framework.MemberIDs(got)); now != members {
		t.Errorf("members %s after the upgrade, %s before", now, members)
	}
	if at := meta.FindStatusCondition(got.Status.Conditions, etcdv1alpha1.ConditionAvailable).LastTransitionTime; !at.Equal(&available) {
		t.Errorf("Available changed at %s during the upgrade (was true since %s)", at, available)
	}
	framework.CheckStatusMatchesEtcd(t, got)
	framework.RequireNoLostWrites(t, load, "an operator upgrade "+image+" -> "+version.Image)
	framework.DeleteAndCheckNothingLeft(t, got)
}

// waitScheduledBackup waits for a backup of the schedule started after since to complete, and checks that its
// Job ran image (the agent of the operator that took it).
func waitScheduledBackup(t *testing.T, key client.ObjectKey, since time.Time, image string) {
	t.Helper()
	var done etcdv1alpha1.EtcdBackup
	framework.Poll(t, "a scheduled backup completed after "+since.Format(time.RFC3339), 3*time.Minute, func() error {
		var list etcdv1alpha1.EtcdBackupList
		if err := framework.K8s.List(context.Background(), &list, client.InNamespace(key.Namespace), client.MatchingLabels{resources.LabelSchedule: key.Name}); err != nil {
			return err
		}
		var states []string
		for _, b := range list.Items {
			if b.CreationTimestamp.After(since) && meta.IsStatusConditionTrue(b.Status.Conditions, etcdv1alpha1.ConditionComplete) {
				done = b
				return nil
			}
			states = append(states, b.Name+" "+conditionsString(b.Status.Conditions))
		}
		return fmt.Errorf("backups: %v", states)
	})
	var jobs batchv1.JobList
	if err := framework.K8s.List(context.Background(), &jobs, client.InNamespace(key.Namespace)); err != nil {
		t.Fatal(err)
	}
	ran := false
	for _, j := range jobs.Items {
		for _, o := range j.OwnerReferences {
			if o.UID != done.UID {
				continue
			}
			ran = true
			if got := j.Spec.Template.Spec.Containers[0].Image; got != image {
				t.Errorf("backup %s ran %s, want %s", done.Name, got, image)
			}
		}
	}
	if !ran {
		t.Errorf("no Job of backup %s found", done.Name)
	}
	t.Logf("scheduled backup %s completed (%d bytes)", done.Name, done.Status.SizeBytes)
}

var conditionWords = regexp.MustCompile(`\s+`)

func conditionsString(cs []metav1.Condition) string {
	var out []string
	for _, c := range cs {
		out = append(out, fmt.Sprintf("%s=%s(%s)", c.Type, c.Status, conditionWords.ReplaceAllString(c.Message, " ")))
	}
	return strings.Join(out, ",")
}
