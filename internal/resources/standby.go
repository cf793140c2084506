package resources

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/pitr"
)

// A standby's applier: the Deployment that replays its source's segments into it.
const (
	// ComponentStandby is the applier's component label value; LabelStandby names the standby cluster. The
	// applier's Pods do not carry LabelCluster: they are not members, and the cluster's member observation reads
	// every Pod with that label.
	ComponentStandby = "standby-applier"
	LabelStandby     = "etcd.steward.dev/standby"
	// StandbyContainer is the applier's container.
	StandbyContainer = "applier"
	// standbyPoll is how often the applier lists the source for new segments: well under the follower's default
	// segment interval (5 s), so that the lag it adds is small, and one list request per poll.
	standbyPoll = "2s"
)

// StandbyApplierLabels select a standby's applier Pods.
func StandbyApplierLabels(cluster *etcdv1alpha1.EtcdCluster) map[string]string {
	return map[string]string{LabelStandby: cluster.Name, LabelComponent: ComponentStandby, LabelManagedBy: "steward"}
}

// StandbySegments is the segment directory of the source's etcd cluster ID sourceClusterID.
func StandbySegments(cluster *etcdv1alpha1.EtcdCluster, sourceClusterID string) string {
	src := cluster.Spec.Standby.Source
	return pitr.SegmentsDir(pitr.SegmentsBase(DestinationPath(src.Destination), src.ClusterName), sourceClusterID)
}

// StandbyApplierDeployment runs `steward-agent standby` for a standby cluster: one Pod that reads the segments of
// the primary's etcd cluster ID sourceClusterID from the source (read only, with the source's credentials and
// key) and applies them through the standby's client Service as Steward (access: its client certificate, whose
// common name is root, the only identity a standby lets write; or its password user).
func StandbyApplierDeployment(cluster *etcdv1alpha1.EtcdCluster, sourceClusterID string, access AgentAccess, o Options) *appsv1.Deployment {
	src := cluster.Spec.Standby.Source
	d := WithPath(src.Destination, StandbySegments(cluster, sourceClusterID))
	env, volumes, mounts := destinationAccess(d, true)
	args := append([]string{"standby",
		"--endpoints=" + ClientEndpoint(cluster, o),
		"--segments=" + DestinationPath(d),
		"--cluster-id=" + sourceClusterID,
		"--poll=" + standbyPoll,
		fmt.Sprintf("--listen=:%d", FollowerStatusPort),
	}, sourceArgs(d)...)
	codecArgs, codecVolumes, codecMounts := codecAccess("", nil, src.Encryption)
	args = append(args, codecArgs...)
	volumes, mounts = append(volumes, codecVolumes...), append(mounts, codecMounts...)
	withAccess := corev1.PodSpec{Volumes: volumes, Containers: []corev1.Container{{VolumeMounts: mounts}}}
	args = access.addTo(args, &withAccess)
	owner := metav1.NewControllerRef(cluster, etcdv1alpha1.GroupVersion.WithKind("EtcdCluster"))
	return agentDeployment(metav1.ObjectMeta{Name: etcdv1alpha1.StandbyApplierName(cluster.Name), Namespace: cluster.Namespace,
		Labels: StandbyApplierLabels(cluster), OwnerReferences: []metav1.OwnerReference{*owner}},
		StandbyContainer, d, args, env, withAccess.Volumes, withAccess.Containers[0].VolumeMounts, o)
}
