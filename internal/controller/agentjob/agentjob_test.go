package agentjob

import (
	"context"
	"reflect"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/backup"
	"steward.dev/steward/internal/resources"
)

// TestEndedPodIsTheResult: the agent's result is taken from its Pod once the Pod has ended in agreement with it,
// before the Job controller marks the Job finished; a Pod still running, one whose phase and result disagree, and a
// Pod of an earlier Job of the same name are not taken.
func TestEndedPodIsTheResult(t *testing.T) {
	successful := backup.Result{Succeeded: true, Member: "db-b", Location: "pvc://backups/x/b1.db", SizeBytes: 4128,
		SHA256: strings.Repeat("a", 64), Revision: 7, EtcdVersion: "3.6.16", ClusterID: "c1"}
	failed := backup.Result{Reason: etcdv1alpha1.ReasonSnapshotFailed, Message: "no member delivered a snapshot"}
	success, failure := string(backup.Encode(successful)), string(backup.Encode(failed))
	cases := []struct {
		name   string
		phase  corev1.PodPhase
		msg    string
		ownJob bool
		want   *backup.Result // nil: still running
	}{
		{name: "succeeded with a success", phase: corev1.PodSucceeded, msg: success, ownJob: true, want: &successful},
		{name: "failed with a failure", phase: corev1.PodFailed, msg: failure, ownJob: true, want: &failed},
		{name: "still running", phase: corev1.PodRunning, msg: "", ownJob: true},
		{name: "failed claiming success", phase: corev1.PodFailed, msg: success, ownJob: true},
		{name: "succeeded without a result", phase: corev1.PodSucceeded, msg: "", ownJob: true},
		{name: "a Pod of an earlier Job", phase: corev1.PodSucceeded, msg: success, ownJob: false},
	}
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			// The Job has no finished condition: only its ended Pod can give the result. The fake client gives
			// objects no UID; one is what tells this Job's Pods from an earlier Job's.
			job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "b1", UID: "job-uid"}}
			owner := *metav1.NewControllerRef(job, batchv1.SchemeGroupVersion.WithKind("Job"))
			if !tc.ownJob {
				owner.UID = "an-earlier-job"
			}
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "b1-pod", OwnerReferences: []metav1.OwnerReference{owner},
				Labels: map[string]string{batchv1.JobNameLabel: "b1", resources.LabelBackup: "b1"}}}
			pod.Status.Phase = tc.phase
			pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: resources.AgentContainer}}
			if tc.phase != corev1.PodRunning {
				pod.Status.ContainerStatuses[0].State.Terminated = &corev1.ContainerStateTerminated{Message: tc.msg}
			}
			c := fake.NewClientBuilder().WithScheme(s).WithObjects(job, pod).Build()
			got, err := Result(ctx, c, c, job)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("result %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestFinishedJobWithoutAResult: a Job that finished without a usable result from its agent (killed by the
// deadline, or never ran) is a JobFailed result in the Job's own words.
func TestFinishedJobWithoutAResult(t *testing.T) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "b1", UID: "job-uid"},
		Status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue,
			Reason: "DeadlineExceeded", Message: "Job was active longer than specified deadline"}}}}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(job).Build()
	got, err := Result(context.Background(), c, c, job)
	if err != nil {
		t.Fatal(err)
	}
	if got == nil || got.Succeeded || got.Reason != etcdv1alpha1.ReasonJobFailed || !strings.Contains(got.Message, "DeadlineExceeded") {
		t.Fatalf("result %+v, want JobFailed naming DeadlineExceeded", got)
	}
	if Finished(job) == nil {
		t.Fatal("a Job with Failed=True is not finished")
	}
}

// TestPodsOf: a Job's Pod leads back to the object its label names; other Pods lead nowhere.
func TestPodsOf(t *testing.T) {
	toBackup := podsOf(resources.LabelBackup)
	pod := func(labels map[string]string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", Labels: labels}}
	}
	cases := []struct {
		name   string
		labels map[string]string
		want   []ctrl.Request
	}{
		{"a backup Job's Pod", map[string]string{batchv1.JobNameLabel: "b1", resources.LabelBackup: "b1"},
			[]ctrl.Request{{NamespacedName: client.ObjectKey{Namespace: "ns", Name: "b1"}}}},
		{"a member Pod", map[string]string{"app.kubernetes.io/instance": "db"}, nil},
		{"the label without a Job", map[string]string{resources.LabelBackup: "b1"}, nil},
		{"another kind's Job", map[string]string{batchv1.JobNameLabel: "v", resources.LabelRestore: "r"}, nil},
	}
	for _, tc := range cases {
		if got := toBackup(context.Background(), pod(tc.labels)); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
