// Package agentjob reads the Jobs that run steward-agent for the controllers that start them (backups and
// point-in-time backups, snapshot deletion, a restore's verify Job): whether a Job has finished, the agent's
// result from its Pod, and the watch that maps a Job's Pod back to the object that started it. Building the Jobs
// stays in internal/resources (pure), and what a result means stays with each controller.
package agentjob

import (
	"context"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/backup"
	"steward.dev/steward/internal/resources"
	"steward.dev/steward/internal/version"
)

// DefaultImage is Steward's own image, which holds steward-agent: Jobs run the operator's release.
const DefaultImage = version.Image

// Result is the result of an agent Job (backup, delete, verify), nil while it runs. The agent's own result is
// taken from the Job's Pod (read through cached, which must watch Pods) as soon as that Pod has ended with it: the
// Job controller marks a Job finished only a batching period (1 s) after it sees its Pod end, and with
// backoffLimit 0 and restartPolicy Never a Pod that ended is the Job's last word. Otherwise, once the Job has
// finished: the agent's result from the termination message (read past the cache by reader), a success only
// when the Job completed; without a usable result (the Pod was killed by the deadline or an eviction, or never
// ran for a missing image) a JobFailed result with the Job's own words.
func Result(ctx context.Context, cached, reader client.Reader, job *batchv1.Job) (*backup.Result, error) {
	if res, err := endedPodResult(ctx, cached, job); res != nil || err != nil {
		return res, err
	}
	cond := Finished(job)
	if cond == nil {
		return nil, nil
	}
	msg, err := TerminationMessage(ctx, reader, job)
	if err != nil {
		return nil, err
	}
	res, perr := backup.ParseResult(msg)
	switch {
	case perr == nil && res.Succeeded && cond.Type == batchv1.JobComplete:
		return &res, nil
	case perr == nil && !res.Succeeded:
		return &res, nil
	}
	failed := &backup.Result{Reason: etcdv1alpha1.ReasonJobFailed, Message: fmt.Sprintf("Job %s %s: %s", job.Name, cond.Reason, cond.Message)}
	if perr != nil {
		failed.Message += fmt.Sprintf(" (%v)", perr)
	}
	return failed, nil
}

// endedPodResult is the agent's result read off the Job's Pod once the Pod has ended in agreement with it
// (Succeeded with a success, Failed with a failure), nil while it runs or when the Pod ended without a result
// that says so (then the Job's condition tells). Pods of an earlier Job of the same name do not count.
func endedPodResult(ctx context.Context, cached client.Reader, job *batchv1.Job) (*backup.Result, error) {
	pods := &corev1.PodList{}
	if err := cached.List(ctx, pods, client.InNamespace(job.Namespace), client.MatchingLabels{batchv1.JobNameLabel: job.Name}); err != nil {
		return nil, fmt.Errorf("list Pods of Job %s: %w", job.Name, err)
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if !metav1.IsControlledBy(p, job) {
			continue
		}
		res, err := backup.ParseResult(agentMessage(p))
		switch {
		case err != nil:
		case p.Status.Phase == corev1.PodSucceeded && res.Succeeded, p.Status.Phase == corev1.PodFailed && !res.Succeeded:
			return &res, nil
		}
	}
	return nil, nil
}

// PodsOf maps the Pods of agent Jobs to the object named by their label (the Jobs' Pod templates carry it),
// so that a Pod's end is seen without waiting for the Job controller to mark the Job finished.
func PodsOf(label string) handler.EventHandler {
	return handler.EnqueueRequestsFromMapFunc(podsOf(label))
}

// podsOf is PodsOf's mapping.
func podsOf(label string) handler.MapFunc {
	return func(_ context.Context, o client.Object) []ctrl.Request {
		name, ok := o.GetLabels()[label]
		if !ok || o.GetLabels()[batchv1.JobNameLabel] == "" {
			return nil
		}
		return []ctrl.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}}}
	}
}

// Finished is the Job's Complete or Failed condition once it is True.
func Finished(job *batchv1.Job) *batchv1.JobCondition {
	for i, c := range job.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return &job.Status.Conditions[i]
		}
	}
	return nil
}

// TerminationMessage is the agent container's termination message of the Job's Pod ("" if none). Read past the
// cache (reader): the Job's informer can report the Job finished before the Pod's informer has the terminated
// container, and a missed message would turn a success into JobFailed. Once per finished Job, so cheap.
func TerminationMessage(ctx context.Context, reader client.Reader, job *batchv1.Job) (string, error) {
	pods := &corev1.PodList{}
	if err := reader.List(ctx, pods, client.InNamespace(job.Namespace), client.MatchingLabels{batchv1.JobNameLabel: job.Name}); err != nil {
		return "", fmt.Errorf("list Pods of Job %s: %w", job.Name, err)
	}
	for i := range pods.Items {
		if msg := agentMessage(&pods.Items[i]); msg != "" {
			return msg, nil
		}
	}
	return "", nil
}

// agentMessage is the termination message of the Pod's agent container once it has terminated, "" before.
func agentMessage(p *corev1.Pod) string {
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == resources.AgentContainer && cs.State.Terminated != nil {
			return cs.State.Terminated.Message
		}
	}
	return ""
}
