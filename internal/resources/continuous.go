package resources

import (
	"encoding/json"
	"fmt"
	"path"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/pitr"
)

// Continuous backup: the follower Deployment of a schedule, and the Job that makes a point-in-time backup.
const (
	// LabelComponent tells Steward's follower objects from its other ones; LabelManagedBy limits Steward's cache
	// of Deployments and ConfigMaps to its own.
	LabelComponent = "app.kubernetes.io/component"
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// ComponentFollower is the follower's component label value.
	ComponentFollower = "continuous-backup"
	// FollowerContainer is the follower's container; FollowerStatusPort the port of its status endpoint.
	FollowerContainer  = "follower"
	FollowerStatusPort = 8080
	// FollowerPruneKey is the key of the follower's ConfigMap that holds the revision segments must reach to be
	// kept: the oldest snapshot still retained.
	FollowerPruneKey = "prune-before"

	followerConfigVolume = "follower-config"
	followerConfigMount  = "/etc/steward-follower"
	workVolume           = "work"
	workMount            = "/work"

	// DefaultSegmentInterval and DefaultSegmentMaxEvents are continuous backup's defaults.
	DefaultSegmentInterval  = 5 * time.Second
	DefaultSegmentMaxEvents = 10000
	// followerHeartbeat: a quiet cluster gets an empty segment this often, so a time target in a quiet stretch is
	// known to be covered.
	followerHeartbeat = time.Minute
)

// FollowerName is the follower Deployment (and ConfigMap) of schedule s.
func FollowerName(s *etcdv1alpha1.EtcdBackupSchedule) string { return jobName(s.Name, "-follower") }

// FollowerLabels select a schedule's follower Pods.
func FollowerLabels(s *etcdv1alpha1.EtcdBackupSchedule) map[string]string {
	return map[string]string{LabelSchedule: s.Name, LabelComponent: ComponentFollower, LabelManagedBy: "steward"}
}

// DestinationPath is the path (PVC) or key (S3, GCS, Azure) of d: a schedule's directory or prefix, a backup's file or
// object.
func DestinationPath(d etcdv1alpha1.BackupDestination) string {
	switch {
	case d.PVC != nil:
		return d.PVC.Path
	case d.GCS != nil:
		return d.GCS.Key
	case d.Azure != nil:
		return d.Azure.Key
	}
	return d.S3.Key
}

// SegmentsBase is where a schedule's follower stores segments (one directory per etcd cluster ID inside).
func SegmentsBase(s *etcdv1alpha1.EtcdBackupSchedule) string {
	return pitr.SegmentsBase(DestinationPath(s.Spec.Destination), s.Spec.ClusterName)
}

// WithPath is destination d addressing p instead of its own path or key.
func WithPath(d etcdv1alpha1.BackupDestination, p string) etcdv1alpha1.BackupDestination {
	d = *d.DeepCopy()
	switch {
	case d.PVC != nil:
		d.PVC.Path = p
	case d.GCS != nil:
		d.GCS.Key = p
	case d.Azure != nil:
		d.Azure.Key = p
	default:
		d.S3.Key = p
	}
	return d
}

// SegmentInterval and SegmentMaxEvents are a schedule's settings with their defaults.
func SegmentInterval(s *etcdv1alpha1.EtcdBackupSchedule) time.Duration {
	if c := s.Spec.Continuous; c != nil && c.SegmentInterval != nil {
		return c.SegmentInterval.Duration
	}
	return DefaultSegmentInterval
}

// SegmentMaxEvents is the schedule's segmentMaxEvents or its default.
func SegmentMaxEvents(s *etcdv1alpha1.EtcdBackupSchedule) int {
	if c := s.Spec.Continuous; c != nil && c.SegmentMaxEvents != nil {
		return int(*c.SegmentMaxEvents)
	}
	return DefaultSegmentMaxEvents
}

// FollowerConfigMap holds the revision before which the follower deletes segments.
func FollowerConfigMap(s *etcdv1alpha1.EtcdBackupSchedule, pruneBefore int64) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: FollowerName(s), Namespace: s.Namespace, Labels: FollowerLabels(s),
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(s, etcdv1alpha1.GroupVersion.WithKind("EtcdBackupSchedule"))}},
		Data: map[string]string{FollowerPruneKey: strconv.FormatInt(pruneBefore, 10)},
	}
}

// FollowerDeployment runs `steward-agent follow` for schedule s of cluster: one Pod (Recreate: two followers
// would write the same chain), dialing the client Service with the cluster's access (AgentAccessFor), writing to the schedule's destination, reporting at GET :8080/status.
func FollowerDeployment(s *etcdv1alpha1.EtcdBackupSchedule, cluster *etcdv1alpha1.EtcdCluster, access AgentAccess, o Options) *appsv1.Deployment {
	d := WithPath(s.Spec.Destination, SegmentsBase(s))
	env, volumes, mounts := destinationAccess(d, false)
	args := append([]string{"follow",
		"--endpoints=" + ClientEndpoint(cluster, o),
		"--interval=" + SegmentInterval(s).String(),
		"--max-events=" + strconv.Itoa(SegmentMaxEvents(s)),
		"--heartbeat=" + followerHeartbeat.String(),
		fmt.Sprintf("--listen=:%d", FollowerStatusPort),
		"--prune-file=" + path.Join(followerConfigMount, FollowerPruneKey),
	}, sourceArgs(d)...)
	codecArgs, codecVolumes, codecMounts := codecAccess(s.Spec.Compression, s.Spec.Encryption, nil)
	args = append(args, codecArgs...)
	volumes, mounts = append(volumes, codecVolumes...), append(mounts, codecMounts...)
	volumes = append(volumes, corev1.Volume{Name: followerConfigVolume, VolumeSource: corev1.VolumeSource{
		ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: FollowerName(s)}}}})
	mounts = append(mounts, corev1.VolumeMount{Name: followerConfigVolume, MountPath: followerConfigMount, ReadOnly: true})
	// The access's volumes and mounts, through a Pod spec of one container.
	withAccess := corev1.PodSpec{Volumes: volumes, Containers: []corev1.Container{{VolumeMounts: mounts}}}
	args = access.addTo(args, &withAccess)
	volumes, mounts = withAccess.Volumes, withAccess.Containers[0].VolumeMounts
	owner := metav1.NewControllerRef(s, etcdv1alpha1.GroupVersion.WithKind("EtcdBackupSchedule"))
	return agentDeployment(metav1.ObjectMeta{Name: FollowerName(s), Namespace: s.Namespace, Labels: FollowerLabels(s),
		OwnerReferences: []metav1.OwnerReference{*owner}}, FollowerContainer, d, args, env, volumes, mounts, o)
}

// agentDeployment is a Deployment of one Pod running steward-agent with args (a follower, a standby's applier):
// Recreate, since two would write the same chain or the same standby; reaching destination d with env, volumes
// and mounts; reporting at GET :8080/status, which is also its readiness.
func agentDeployment(meta metav1.ObjectMeta, container string, d etcdv1alpha1.BackupDestination, args []string, env []corev1.EnvVar,
	volumes []corev1.Volume, mounts []corev1.VolumeMount, o Options) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: meta,
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: meta.Labels},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: destinationPodLabels(d, meta.Labels)},
				Spec: corev1.PodSpec{
					ServiceAccountName:           DestinationServiceAccount(d),
					EnableServiceLinks:           ptr.To(false),
					AutomountServiceAccountToken: ptr.To(false),
					SecurityContext:              restrictedPod(),
					// A follower stores what it holds when stopped, an applier finishes its transaction; either
					// takes well under this.
					TerminationGracePeriodSeconds: ptr.To[int64](30),
					Containers: []corev1.Container{{
						Name:            container,
						Image:           o.AgentImage,
						ImagePullPolicy: corev1.PullIfNotPresent,
						Command:         []string{"/usr/local/bin/steward-agent"},
						Args:            args,
						Env:             env,
						VolumeMounts:    mounts,
						Ports:           []corev1.ContainerPort{{Name: "status", ContainerPort: FollowerStatusPort}},
						ReadinessProbe: &corev1.Probe{
							ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(FollowerStatusPort)}},
							PeriodSeconds: 5,
						},
						SecurityContext: restrictedContainer(),
						Resources:       agentResources(),
					}},
					Volumes: volumes,
				},
			},
		},
	}
}

// PointInTimeJob makes backup b from the snapshots (candidates) and segments of schedule s: the agent, installed
// into the cluster's etcd image (for its etcd and etcdutl), plans, verifies, replays into a throwaway member on
// loopback and stores the result at b's destination. clusterID names the segment directory and is recorded in the
// result.
func PointInTimeJob(b *etcdv1alpha1.EtcdBackup, s *etcdv1alpha1.EtcdBackupSchedule, candidates []pitr.Candidate, clusterID, etcdImage, agentImage string) (*batchv1.Job, error) {
	cands, err := json.Marshal(candidates)
	if err != nil {
		return nil, fmt.Errorf("encode candidates: %w", err)
	}
	pit := b.Spec.PointInTime
	args := append([]string{"point-in-time",
		"--candidates=" + string(cands),
		"--segments=" + pitr.SegmentsDir(SegmentsBase(s), clusterID),
		"--cluster-id=" + clusterID,
		"--etcd=/usr/local/bin/etcd", "--etcdutl=/usr/local/bin/etcdutl",
		"--work-dir=" + workMount,
	}, destinationArgs(b)...)
	switch {
	case pit.Revision > 0:
		args = append(args, "--target-revision="+strconv.FormatInt(pit.Revision, 10))
	case pit.Time != "":
		at, err := pit.TargetTime()
		if err != nil {
			return nil, err
		}
		args = append(args, "--target-time="+at.UTC().Format(time.RFC3339Nano))
	}
	// The agent's own deadline (--timeout, 30 minutes unless given) and the Job's are the same.
	deadline := PointInTimeJobDeadline(ReplayBound(candidates, pit.Revision, s))
	args = append(args, "--timeout="+(time.Duration(deadline)*time.Second).String())
	job := agentJob(b, BackupJobName(b), etcdImage, args)
	job.Spec.ActiveDeadlineSeconds = ptr.To(deadline)
	withCodec(job, b.Spec.Compression, b.Spec.Encryption, s.Spec.Encryption)
	withAgentInEtcdImage(job, agentImage)
	return job, nil
}

// withAgentInEtcdImage makes job's container (of an etcd image) run the agent, which an init container installs
// from agentImage, with a scratch emptyDir at workMount: for the Jobs that need etcd and etcdutl of a release.
func withAgentInEtcdImage(job *batchv1.Job, agentImage string) {
	spec := &job.Spec.Template.Spec
	install, tools, toolsVol := agentInstall(agentImage)
	spec.Volumes = append(spec.Volumes, toolsVol,
		corev1.Volume{Name: workVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	spec.InitContainers = []corev1.Container{install}
	c := &spec.Containers[0]
	c.Command = []string{toolsMount + "/steward-agent"}
	c.VolumeMounts = append(c.VolumeMounts, tools, corev1.VolumeMount{Name: workVolume, MountPath: workMount})
}

// StandbySeedJob finds standby seed b (spec.standbySeed) in the primary's schedule directory (b's destination):
// the agent, installed into the etcd image of the standby's release (for its etcd and etcdutl), lists the
// directory, picks the newest snapshot the primary's segments continue, checks it in a throwaway member on
// loopback, and reports its record. It only reads the source.
func StandbySeedJob(b *etcdv1alpha1.EtcdBackup, etcdImage, agentImage string) *batchv1.Job {
	args := append([]string{"standby-seed",
		"--source-cluster=" + b.Spec.StandbySeed.ClusterName,
		"--etcd=/usr/local/bin/etcd", "--etcdutl=/usr/local/bin/etcdutl",
		"--work-dir=" + workMount,
	}, destinationArgs(b)...)
	// Read only: the source is another cluster's schedule's.
	job := oneShotJob(b.Namespace, BackupJobName(b), map[string]string{LabelBackup: b.Name},
		*metav1.NewControllerRef(b, etcdv1alpha1.GroupVersion.WithKind("EtcdBackup")), b.Spec.Destination, true, etcdImage, args)
	withCodec(job, b.Spec.Compression, nil, b.Spec.Encryption)
	withAgentInEtcdImage(job, agentImage)
	return job
}

// ReplayPerChange is the time a point-in-time Job is given for each change it may replay: about three times what
// one took on the project's 2-core machines (6 minutes per million, docs/user/restore.md), for slower disks.
const ReplayPerChange = time.Millisecond

// maxPointInTimeDeadline caps a point-in-time Job's deadline: a replay that needs longer is better served by a
// newer snapshot, and a bound read from a wrong revision must not keep a Job for weeks.
const maxPointInTimeDeadline = 48 * 60 * 60

// ReplayBound is at most how many changes a point-in-time Job replays: from the oldest candidate snapshot (the
// agent falls back to older ones when a newer one fails its checks) to the target revision, or for a time target
// to the end of the newest stored segment the schedule reports; 0 when neither end is known.
func ReplayBound(candidates []pitr.Candidate, targetRevision int64, s *etcdv1alpha1.EtcdBackupSchedule) int64 {
	end := targetRevision
	if end <= 0 && s.Status.Continuous != nil && s.Status.Continuous.RecoverableTo != nil {
		end = s.Status.Continuous.RecoverableTo.Revision
	}
	var from int64
	for _, c := range candidates {
		if from == 0 || c.Revision < from {
			from = c.Revision
		}
	}
	if end <= 0 || from <= 0 || end <= from {
		return 0
	}
	return end - from
}

// PointInTimeJobDeadline is a point-in-time Job's activeDeadlineSeconds for a replay of up to changes changes: the
// backup Jobs' deadline (the Job's start, the snapshot read and verified, the result's snapshot) plus
// ReplayPerChange for each, at most two days.
func PointInTimeJobDeadline(changes int64) int64 {
	replay := changes / int64(time.Second/ReplayPerChange) // in seconds; no product that could overflow
	return min(BackupJobDeadline+max(replay, 0), maxPointInTimeDeadline)
}
