package resources

import (
	"fmt"
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

// RollNeedsNewPod says why member Pod pod, rolled to release version on image, must be re-created on its volume
// rather than get the new image; empty when the image will do. A Pod's command and environment cannot change, so
// the new image keeps the Pod's only if the new release knows them by the names the Pod carries and they mean what
// the spec asks for now: the corruption checks turned on (spec.maintenance.corruptionCheck.etcdChecks, and the
// compaction hash check once the release has it) and the peer SAN variable (tlsEnv). etcd 3.6 still knows 3.5's
// --experimental-* flags and variable, so a 3.5 -> 3.6 upgrade restarts each member's container in place, as a
// patch release does: no Pod deletion, sandbox, volume mounts or init container, about 2 s less per member
// (docs/development/benchmarks.md). So does the way back to 3.5 for a Pod that started on 3.5. 3.7 knows only the feature
// gates and the new name, 3.5 only the old ones. A Pod already switched to image in place once is re-created too
// (AnnotationRolledTo: the kubelet's crash back-off). Never for ephemeral storage, where a new Pod is a member
// without data.
func RollNeedsNewPod(cluster *etcdv1alpha1.EtcdCluster, pod *corev1.Pod, version, image string) string {
	if cluster.Spec.Storage.Ephemeral {
		return ""
	}
	v, err := plan.ParseVersion(version)
	if err != nil {
		return fmt.Sprintf("Steward cannot tell which flags etcd %q knows", version)
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
	if !slices.Equal(have, want) {
		for _, a := range have {
			if !releaseKnowsFlag(v, a) {
				return fmt.Sprintf("etcd %s does not know the Pod's flag %s", version, a)
			}
		}
		if got, wanted := checksTurnedOn(have), checksTurnedOn(want); !slices.Equal(got, wanted) {
			return fmt.Sprintf("the Pod's flags turn on the corruption checks %v, and the spec asks for %v", got, wanted)
		}
	}
	for _, e := range etcdEnv(pod) {
		if !releaseKnowsVariable(v, e.Name) {
			return fmt.Sprintf("etcd %s does not read the Pod's variable %s", version, e.Name)
		}
	}
	if slices.Contains(rolledTo(pod), image) {
		return fmt.Sprintf("the Pod ran %s before, and the kubelet would start it again only after its crash back-off", image)
	}
	return ""
}

// RolledTo is the value of AnnotationRolledTo for a Pod switched to image in place.
func RolledTo(pod *corev1.Pod, image string) string {
	images := rolledTo(pod)
	if !slices.Contains(images, image) {
		images = append(images, image)
	}
	return strings.Join(images, ",")
}

// rolledTo lists the images Pod pod was switched to in place (AnnotationRolledTo).
func rolledTo(pod *corev1.Pod) []string {
	if pod.Annotations[AnnotationRolledTo] == "" {
		return nil
	}
	return strings.Split(pod.Annotations[AnnotationRolledTo], ",")
}

// releaseKnowsFlag reports whether etcd release v accepts corruption check flag a (isCorruptionCheckArg): the
// --experimental-* flags from the release that brought each check (3.5.5 for the compaction hash check) until 3.6,
// which deprecated them; --feature-gates from 3.6.
func releaseKnowsFlag(v plan.Version, a string) bool {
	name, _, _ := strings.Cut(a, "=")
	switch name {
	case "--feature-gates":
		return v.Major > 3 || v.Minor >= 6
	case "--experimental-compact-hash-check-enabled":
		return v.Major == 3 && v.Minor <= 6 && !v.Less(compactHashCheckSince)
	default:
		return v.Major == 3 && v.Minor <= 6
	}
}

// releaseKnowsVariable reports whether etcd release v reads environment variable name of a member Pod's etcd
// container (tlsEnv's): the experimental name until 3.6, the new one from 3.6. Any other variable is not
// release-specific.
func releaseKnowsVariable(v plan.Version, name string) bool {
	switch name {
	case "ETCD_EXPERIMENTAL_PEER_SKIP_CLIENT_SAN_VERIFICATION":
		return v.Major == 3 && v.Minor <= 6
	case "ETCD_PEER_SKIP_CLIENT_SAN_VERIFICATION":
		return v.Major > 3 || v.Minor >= 6
	}
	return true
}

// checksTurnedOn names the corruption checks that flags turn on, sorted, whatever the flags' names.
func checksTurnedOn(flags []string) []string {
	on := map[string]bool{}
	for _, a := range flags {
		name, value, _ := strings.Cut(a, "=")
		switch name {
		case "--experimental-initial-corrupt-check":
			on["InitialCorruptCheck"] = value != "false"
		case "--experimental-compact-hash-check-enabled":
			on["CompactHashCheck"] = value != "false"
		case "--feature-gates":
			for _, gate := range strings.Split(value, ",") {
				g, enabled, _ := strings.Cut(gate, "=")
				on[strings.TrimSpace(g)] = strings.TrimSpace(enabled) == "true"
			}
		}
	}
	var names []string
	for name, enabled := range on {
		if enabled {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// etcdEnv is the environment of the Pod's etcd container.
func etcdEnv(pod *corev1.Pod) []corev1.EnvVar {
	for _, c := range pod.Spec.Containers {
		if c.Name == EtcdContainer {
			return c.Env
		}
	}
	return nil
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
