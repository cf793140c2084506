package resources

import (
	"strconv"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
)

// Restore objects' names, labels and annotations.
const (
	// LabelRestore is on a restore's verify Job: the EtcdRestore it belongs to.
	LabelRestore = "etcd.steward.dev/restore"
	// AnnotationRestore is on the Pods and PVCs of members started from a snapshot: the EtcdRestore that seeded
	// them. During a re-seed it tells the new members from the ones they replace.
	AnnotationRestore = "etcd.steward.dev/restore"
	// LabelRetiredFrom replaces the cluster's labels on the volume of a member a re-seed replaced: the data is
	// kept for a human, and no controller counts it as a member any more.
	LabelRetiredFrom = "etcd.steward.dev/retired-from"
	// AnnotationRetiredBy is on a retired volume: the EtcdRestore that replaced its member. It is written before
	// the member's Pod is stopped, so that a Pod the re-seed stopped is not brought back on the volume.
	AnnotationRetiredBy = "etcd.steward.dev/retired-by"

	// RestoreContainer restores the snapshot into a member's data dir before etcd starts; InstallContainer puts
	// the agent where RestoreContainer (the member's etcd image, which has no shell) can run it.
	RestoreContainer = "restore"
	InstallContainer = "install-agent"

	toolsVolume = "steward-tools"
	toolsMount  = "/steward"

	// agentImagePath is where the agent is in its image; agentImageVolumeName mounts the image at
	// agentImageMount (Options.AgentImageVolume).
	agentImageVolumeName = "steward-image"
	agentImageMount      = "/steward-image"
	agentImagePath       = "/usr/local/bin/steward-agent"

	// ReseedBumpRevision is how far a re-seeded cluster's revision is raised above the snapshot's: clients
	// (watchers, caches) have seen revisions written after the backup, and must never see a revision they saw go
	// back to different data. etcd's restore guide suggests a margin larger than the revisions a cluster could
	// have made since the backup; a billion is years of writes at thousands per second. The restored revision is
	// marked compacted, so watchers from older revisions get a clean "compacted" error and re-list.
	ReseedBumpRevision = 1_000_000_000
)

// RestoreSource is the snapshot members of a restored cluster start from.
type RestoreSource struct {
	// Restore is the EtcdRestore's name.
	Restore string
	// Backup is the EtcdBackup it restores (destination and record).
	Backup *etcdv1alpha1.EtcdBackup
	// BumpRevision raises the restored revision (a re-seed), 0 keeps it (a new cluster).
	BumpRevision uint64
}

// StoredDestination is where backup b's snapshot is: spec.destination, at the path the backup found it at when it
// did (status.path: a standby seed, found in its primary's schedule directory).
func StoredDestination(b *etcdv1alpha1.EtcdBackup) etcdv1alpha1.BackupDestination {
	if b.Status.Path == "" {
		return b.Spec.Destination
	}
	return WithPath(b.Spec.Destination, b.Status.Path)
}

// VerifyJobName is the Job that verifies a restore's snapshot.
func VerifyJobName(r *etcdv1alpha1.EtcdRestore) string { return jobName(r.Name, "-verify") }

// VerifyJob runs `steward-agent verify`: it reads the stored snapshot of backup to the end and checks it against
// the backup's size and sha256 and etcd's own checksum, before a restore touches anything.
func VerifyJob(r *etcdv1alpha1.EtcdRestore, b *etcdv1alpha1.EtcdBackup, agentImage string) *batchv1.Job {
	args := append([]string{"verify"}, sourceArgs(StoredDestination(b))...)
	args = append(args, expectedArgs(b)...)
	job := oneShotJob(r.Namespace, VerifyJobName(r), map[string]string{LabelRestore: r.Name},
		*metav1.NewControllerRef(r, etcdv1alpha1.GroupVersion.WithKind("EtcdRestore")), b.Spec.Destination, true, agentImage, args)
	withCodec(job, b.Spec.Compression, nil, b.Spec.Encryption)
	return job
}

func expectedArgs(b *etcdv1alpha1.EtcdBackup) []string {
	args := []string{"--size=" + strconv.FormatInt(b.Status.SizeBytes, 10), "--sha256=" + b.Status.SHA256}
	if b.Status.SnapshotSizeBytes > 0 {
		args = append(args, "--snapshot-size="+strconv.FormatInt(b.Status.SnapshotSizeBytes, 10))
	}
	return args
}

// restoreInitContainers fetch, verify and restore the snapshot into member m's data dir before etcd starts.
// The restore runs in the member's own etcd image, so the snapshot is restored by the etcdutl of the release the
// member runs. A data dir that already holds a member is left alone (a re-created Pod of a restored member).
func restoreInitContainers(cluster *etcdv1alpha1.EtcdCluster, m Member, image string, o Options) ([]corev1.Container, []corev1.Volume) {
	src := m.Restore
	env, volumes, mounts := destinationAccess(src.Backup.Spec.Destination, true)
	install, tools, toolsVol := agentInstall(o.AgentImage)
	volumes = append(volumes, toolsVol)
	args := append([]string{"restore",
		"--data-dir=" + dataDir,
		"--etcdutl=/usr/local/bin/etcdutl",
		"--name=" + m.Name,
		"--initial-cluster=" + FormatInitialCluster(m.InitialCluster),
		"--initial-cluster-token=" + string(cluster.UID),
		"--initial-advertise-peer-urls=" + PeerURLWith(cluster, m.Name, SchemeOf(MemberTLSOf(cluster, m)), o),
	}, sourceArgs(StoredDestination(src.Backup))...)
	args = append(args, expectedArgs(src.Backup)...)
	codecArgs, codecVolumes, codecMounts := codecAccess(src.Backup.Spec.Compression, nil, src.Backup.Spec.Encryption)
	args = append(args, codecArgs...)
	volumes, mounts = append(volumes, codecVolumes...), append(mounts, codecMounts...)
	if src.BumpRevision > 0 {
		args = append(args, "--bump-revision="+strconv.FormatUint(src.BumpRevision, 10))
	}
	containers := []corev1.Container{
		install,
		{
			Name:                     RestoreContainer,
			Image:                    image,
			ImagePullPolicy:          corev1.PullIfNotPresent,
			Command:                  append([]string{toolsMount + "/steward-agent"}, args...),
			Env:                      env,
			VolumeMounts:             append([]corev1.VolumeMount{{Name: dataVolume, MountPath: dataMount}, tools}, mounts...),
			TerminationMessagePath:   corev1.TerminationMessagePathDefault,
			TerminationMessagePolicy: corev1.TerminationMessageReadFile,
			SecurityContext:          restrictedContainer(),
			Resources:                agentResources(),
		},
	}
	return containers, volumes
}

// agentImageVolume is the agent image as a read-only volume (Options.AgentImageVolume).
func agentImageVolume(agentImage string) corev1.Volume {
	return corev1.Volume{Name: agentImageVolumeName, VolumeSource: corev1.VolumeSource{
		Image: &corev1.ImageVolumeSource{Reference: agentImage, PullPolicy: corev1.PullIfNotPresent}}}
}

// agentInstall is the init container that copies steward-agent into the tools volume, so that a container of
// another image (a member's etcd image, which has no shell) can run it as toolsMount/steward-agent; with the
// mount and the volume that container needs.
func agentInstall(agentImage string) (corev1.Container, corev1.VolumeMount, corev1.Volume) {
	tools := corev1.VolumeMount{Name: toolsVolume, MountPath: toolsMount}
	return corev1.Container{
			Name:            InstallContainer,
			Image:           agentImage,
			ImagePullPolicy: corev1.PullIfNotPresent,
			Command:         []string{agentImagePath, "install", "--to=" + toolsMount + "/steward-agent"},
			VolumeMounts:    []corev1.VolumeMount{tools},
			SecurityContext: restrictedContainer(),
			Resources:       agentResources(),
		}, tools,
		corev1.Volume{Name: toolsVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}
}
