package resources

import (
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/plan"
)

// compactHashCheckSince is the first release with the compaction hash check (etcd 3.5.5).
var compactHashCheckSince = plan.Version{Major: 3, Minor: 5, Patch: 5}

// EtcdChecksEnabled reports whether members run etcd's own corruption checks: spec.maintenance.corruptionCheck
// .etcdChecks, true when unset, and never for ephemeral storage (a member that starts empty has nothing to check
// at start, and its flags could not change on a roll: see RollNeedsNewPod).
func EtcdChecksEnabled(cluster *etcdv1alpha1.EtcdCluster) bool {
	if cluster.Spec.Storage.Ephemeral {
		return false
	}
	m := cluster.Spec.Maintenance
	if m == nil || m.CorruptionCheck == nil || m.CorruptionCheck.EtcdChecks == nil {
		return true
	}
	return *m.CorruptionCheck.EtcdChecks
}

// corruptionCheckArgs are the flags that turn on etcd's initial and compaction hash checks in the given release,
// by the names that release knows: 3.5 only has the --experimental-* flags, 3.7 only the feature gates, and 3.6
// knows both but refuses them together, so it gets the feature gates. etcd's periodic check
// (--corrupt-check-time) stays off: it raises a CORRUPT alarm without naming the member (3.5), which stops the
// whole cluster; Steward's own comparison of HashKV names the member by majority instead.
func corruptionCheckArgs(version string) []string {
	v, err := plan.ParseVersion(version)
	if err != nil {
		return nil // refused at admission; a member never starts on a version Steward cannot read
	}
	if v.Major == 3 && v.Minor < 6 {
		args := []string{"--experimental-initial-corrupt-check=true"}
		if !v.Less(compactHashCheckSince) {
			args = append(args, "--experimental-compact-hash-check-enabled=true")
		}
		return args
	}
	return []string{"--feature-gates=InitialCorruptCheck=true,CompactHashCheck=true"}
}

// RollNeedsNewPod reports whether member Pod pod, rolled to release version, must be re-created on its volume
// rather than get the new image: a Pod's command cannot change, and its corruption check flags differ from the
// ones the new release is to run with (3.7 refuses 3.5's --experimental-* flags; spec.maintenance.corruptionCheck
// .etcdChecks changed). Never for ephemeral storage, where a new Pod is a member without data.
func RollNeedsNewPod(cluster *etcdv1alpha1.EtcdCluster, pod *corev1.Pod, version string) bool {
	if cluster.Spec.Storage.Ephemeral {
		return false
	}
	var want []string
	if EtcdChecksEnabled(cluster) {
		want = corruptionCheckArgs(version)
	}
	var have []string
	for _, a := range etcdCommand(pod) {
		if isCorruptionCheckArg(a) {
			have = append(have, a)
		}
	}
	return !slices.Equal(have, want)
}

// etcdCommand is the command line of the Pod's etcd container (command and args).
func etcdCommand(pod *corev1.Pod) []string {
	for _, c := range pod.Spec.Containers {
		if c.Name == EtcdContainer {
			return append(append([]string(nil), c.Command...), c.Args...)
		}
	}
	return nil
}

// PodQuota is the --quota-backend-bytes a member Pod was started with; 0 when it sets none or an unreadable one.
func PodQuota(pod *corev1.Pod) int64 {
	for _, a := range etcdCommand(pod) {
		if v, ok := strings.CutPrefix(a, "--quota-backend-bytes="); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				return 0
			}
			return n
		}
	}
	return 0
}

// isCorruptionCheckArg: one of the flags corruptionCheckArgs sets (--feature-gates carries only those).
func isCorruptionCheckArg(a string) bool {
	return strings.HasPrefix(a, "--experimental-initial-corrupt-check") || strings.HasPrefix(a, "--experimental-compact-hash-check") ||
		strings.HasPrefix(a, "--feature-gates")
}
