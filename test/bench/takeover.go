package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"steward.dev/steward/internal/testbed"
	"steward.dev/steward/internal/version"
	"steward.dev/steward/test/chaos"
)

// takeoverRuns is fixed: each run is a scale-up by two members (3 -> 5 -> 7 -> 9, with a crash, then again
// from 3 without), and 9 is the most an EtcdCluster has.
const takeoverRuns = 3

// benchTakeover installs Steward from config/default (2 replicas, leader election, default lease settings) and
// times how long a scale-up step waits when the leading operator crashes right after the step before it: the
// learner's Pod exists, its promotion is next. Rows: crash -> the standby holds the Lease, crash -> the learner
// promoted, and, for comparison, the same span (learner Pod created -> promoted) without a crash.
func benchTakeover(ctx context.Context, c *testbed.Cluster, _ int) (section, error) {
	kubectl := kubectlOn(ctx, c)
	if _, err := kubectl("", "apply", "--server-side", "--force-conflicts", "-k", "config/default"); err != nil {
		return section{}, err
	}
	defer func() {
		// The in-cluster operator must be gone before the sections that run the operator as a process.
		_, _ = kubectl("", "delete", "clusterrolebinding/steward-manager", "clusterrole/steward-manager", "--ignore-not-found")
		_, _ = kubectl("", "delete", "namespace", "steward-system", "--wait", "--timeout=3m", "--ignore-not-found")
		_, _ = kubectl("", "delete", "namespace", "bench-takeover", "--wait", "--timeout=3m", "--ignore-not-found")
	}()
	if _, err := kubectl("", "-n", "steward-system", "rollout", "status", "deployment/steward", "--timeout=3m"); err != nil {
		return section{}, err
	}
	if _, err := kubectl("", "create", "namespace", "bench-takeover"); err != nil {
		return section{}, err
	}
	const name = "fleet"
	if _, err := kubectl(fmt.Sprintf(`{"apiVersion":"etcd.steward.dev/v1alpha1","kind":"EtcdCluster","metadata":{"name":%q,"namespace":"bench-takeover"},
"spec":{"replicas":3,"version":%q,"storage":{"size":"1Gi"}}}`, name, testbed.EtcdVersions[0]), "apply", "-f", "-"); err != nil {
		return section{}, err
	}
	view := clusterView{kubectl: kubectl, name: name}
	if err := testbed.Eventually(ctx, 5*time.Minute, 200*time.Millisecond, func() error { return view.settled(3) }); err != nil {
		return section{}, err
	}
	var toLease, toStep, baseline []time.Duration
	for _, crash := range []bool{true, false} {
		replicas := 3
		if _, err := kubectl("", "-n", "bench-takeover", "patch", "etcdcluster", name, "--type=merge", "-p", `{"spec":{"replicas":3}}`); err != nil {
			return section{}, err
		}
		if err := testbed.Eventually(ctx, 5*time.Minute, 200*time.Millisecond, func() error { return view.settled(3) }); err != nil {
			return section{}, err
		}
		for i := 0; i < takeoverRuns; i++ {
			replicas += 2
			pods, err := view.pods()
			if err != nil {
				return section{}, err
			}
			if _, err := kubectl("", "-n", "bench-takeover", "patch", "etcdcluster", name, "--type=merge", "-p", fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas)); err != nil {
				return section{}, err
			}
			// The learner's Pod appears in the pass that adds the learner; its promotion is the next step.
			var learner string
			if err := testbed.Eventually(ctx, 2*time.Minute, 20*time.Millisecond, func() error {
				now, err := view.pods()
				if err != nil {
					return err
				}
				for p := range now {
					if !pods[p] {
						learner = p
						return nil
					}
				}
				return fmt.Errorf("no learner Pod yet")
			}); err != nil {
				return section{}, err
			}
			begin := time.Now()
			if crash {
				holder, pod, err := operatorLeader(kubectl, "")
				if err != nil {
					return section{}, err
				}
				if err := crashOperatorPod(kubectl, pod); err != nil {
					return section{}, err
				}
				// The standby, or the crashed container restarted by the kubelet, whichever gets the Lease first.
				if err := testbed.Eventually(ctx, time.Minute, 50*time.Millisecond, func() error {
					_, _, err := operatorLeader(kubectl, holder)
					return err
				}); err != nil {
					return section{}, err
				}
				toLease = append(toLease, time.Since(begin))
			}
			if err := testbed.Eventually(ctx, 3*time.Minute, 50*time.Millisecond, func() error { return view.promoted(learner) }); err != nil {
				return section{}, err
			}
			if crash {
				toStep = append(toStep, time.Since(begin))
			} else {
				baseline = append(baseline, time.Since(begin))
			}
			if err := testbed.Eventually(ctx, 5*time.Minute, 200*time.Millisecond, func() error { return view.settled(replicas) }); err != nil {
				return section{}, err
			}
		}
	}
	return render("takeover", map[string]any{"Image": version.Image, "Runs": takeoverRuns, "Table": table([]row{
		{"crash -> a new holder of the Lease (the standby or the restarted container)", toLease},
		{"crash -> learner promoted (next step)", toStep},
		{"learner Pod created -> promoted, no crash", baseline},
	})})
}

// clusterView reads the bench cluster through kubectl.
type clusterView struct {
	kubectl func(string, ...string) (string, error)
	name    string
}

func (v clusterView) pods() (map[string]bool, error) {
	out, err := v.kubectl("", "-n", "bench-takeover", "get", "pods", "-l", "etcd.steward.dev/cluster="+v.name, "-o", "jsonpath={.items[*].metadata.name}")
	if err != nil {
		return nil, err
	}
	pods := map[string]bool{}
	for _, p := range strings.Fields(out) {
		pods[p] = true
	}
	return pods, nil
}

func (v clusterView) promoted(member string) error {
	out, err := v.kubectl("", "-n", "bench-takeover", "get", "etcdcluster", v.name, "-o",
		fmt.Sprintf(`jsonpath={.status.members[?(@.name==%q)].role}`, member))
	if err != nil {
		return err
	}
	if out == "" || out == "Learner" {
		return fmt.Errorf("member %s: role %q", member, out)
	}
	return nil
}

func (v clusterView) settled(replicas int) error {
	out, err := v.kubectl("", "-n", "bench-takeover", "get", "etcdcluster", v.name, "-o",
		`jsonpath={.status.readyReplicas}/{.status.conditions[?(@.type=="Progressing")].status}/{.metadata.generation}/{.status.observedGeneration}`)
	if err != nil {
		return err
	}
	parts := strings.Split(out, "/")
	if len(parts) != 4 || parts[0] != fmt.Sprint(replicas) || parts[1] != "False" || parts[2] != parts[3] {
		return fmt.Errorf("not settled at %d: %s", replicas, out)
	}
	return nil
}

// operatorLeader returns the holder of the leader election Lease ("<pod>_<uuid>"; a restarted container in the
// same Pod is a new holder) and its Pod, if the holder is not "not".
func operatorLeader(kubectl func(string, ...string) (string, error), not string) (holder, pod string, err error) {
	holder, err = kubectl("", "-n", "steward-system", "get", "lease", "steward.etcd.steward.dev", "-o", "jsonpath={.spec.holderIdentity}")
	if err != nil {
		return "", "", err
	}
	if holder == "" || holder == not {
		return "", "", fmt.Errorf("lease held by %q", holder)
	}
	pod, _, _ = strings.Cut(holder, "_")
	return holder, pod, nil
}

// crashOperatorPod kills the operator container of pod (its process; the kubelet restarts it).
func crashOperatorPod(kubectl func(string, ...string) (string, error), pod string) error {
	out, err := kubectl("", "-n", "steward-system", "get", "pod", pod, "-o", "json")
	if err != nil {
		return err
	}
	var p corev1.Pod
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		return fmt.Errorf("operator Pod %s: %w", pod, err)
	}
	return chaos.KillContainer(&p, "manager")
}
