package resources

import (
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
)

// Labels of backup objects.
const (
	// LabelBackup is on a backup's Jobs: the EtcdBackup they belong to.
	LabelBackup = "etcd.steward.dev/backup"
	// LabelSchedule is on EtcdBackups a schedule created: the EtcdBackupSchedule's name.
	LabelSchedule = "etcd.steward.dev/schedule"

	// AgentContainer is the name of the container of backup Jobs.
	AgentContainer = "agent"
	// backupMount is where a PVC destination is mounted in the agent's container.
	backupMount  = "/backup"
	backupVolume = "destination"
	// BackupJobDeadline bounds a backup Job: a snapshot that has not finished by then is given up (the Job
	// fails, the EtcdBackup reports JobFailed).
	BackupJobDeadline = 30 * 60
)

// BackupJobName is the Job that takes backup's snapshot; DeleteJobName the one that deletes its stored data.
// Job names become label values (at most 63 characters), so a long backup name is cut.
func BackupJobName(b *etcdv1alpha1.EtcdBackup) string { return jobName(b.Name, "") }

// DeleteJobName is the Job that deletes backup's stored snapshot.
func DeleteJobName(b *etcdv1alpha1.EtcdBackup) string { return jobName(b.Name, "-delete") }

func jobName(name, suffix string) string {
	const max = 63
	if len(name)+len(suffix) > max {
		name = strings.TrimRight(name[:max-len(suffix)], "-.")
	}
	return name + suffix
}

// BackupJob runs `steward-agent snapshot` against members (name=clientURL, in order of preference), with the
// cluster's access (AgentAccessFor): the Secrets it mounts to authenticate to members.
func BackupJob(b *etcdv1alpha1.EtcdBackup, members []string, agentImage string, access AgentAccess) *batchv1.Job {
	args := []string{"snapshot"}
	for _, m := range members {
		args = append(args, "--member="+m)
	}
	job := agentJob(b, BackupJobName(b), agentImage, nil)
	spec := &job.Spec.Template.Spec
	spec.Containers[0].Args = append(access.addTo(args, spec), destinationArgs(b)...)
	withCodec(job, b.Spec.Compression, b.Spec.Encryption, nil)
	return job
}

// DeleteJob runs `steward-agent delete` on backup's destination.
func DeleteJob(b *etcdv1alpha1.EtcdBackup, agentImage string) *batchv1.Job {
	return agentJob(b, DeleteJobName(b), agentImage, append([]string{"delete"}, destinationArgs(b)...))
}

func destinationArgs(b *etcdv1alpha1.EtcdBackup) []string { return sourceArgs(b.Spec.Destination) }

// sourceArgs are the agent flags that address a backup's stored snapshot.
func sourceArgs(d etcdv1alpha1.BackupDestination) []string {
	switch {
	case d.PVC != nil:
		return []string{"--pvc-root=" + backupMount, "--pvc-claim=" + d.PVC.ClaimName, "--path=" + d.PVC.Path}
	case d.GCS != nil:
		return gcsArgs(d.GCS)
	case d.Azure != nil:
		return azureArgs(d.Azure)
	}
	args := []string{"--s3-endpoint=" + d.S3.Endpoint, "--s3-bucket=" + d.S3.Bucket, "--path=" + d.S3.Key}
	if d.S3.Region != "" {
		args = append(args, "--s3-region="+d.S3.Region)
	}
	if d.S3.ForcePathStyle {
		args = append(args, "--s3-path-style")
	}
	if d.S3.Insecure {
		args = append(args, "--s3-insecure")
	}
	return args
}

// destinationAccess is what a container needs to reach a backup destination: the S3, GCS or Azure credentials as
// environment variables from the Secret (they never pass through Steward), or the PVC mounted at backupMount.
func destinationAccess(d etcdv1alpha1.BackupDestination, readOnly bool) (env []corev1.EnvVar, volumes []corev1.Volume, mounts []corev1.VolumeMount) {
	if s3 := d.S3; s3 != nil && s3.CredentialsSecret != nil {
		ref := func(key string) *corev1.EnvVarSource {
			return &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: s3.CredentialsSecret.Name}, Key: key}}
		}
		env = []corev1.EnvVar{
			{Name: "STEWARD_S3_ACCESS_KEY_ID", ValueFrom: ref(etcdv1alpha1.S3AccessKeyIDKey)},
			{Name: "STEWARD_S3_SECRET_ACCESS_KEY", ValueFrom: ref(etcdv1alpha1.S3SecretAccessKeyKey)},
		}
	}
	if s3 := d.S3; s3 != nil {
		if s3.CABundle != "" {
			// Public certificates, from the spec: an environment variable, not a volume.
			env = append(env, corev1.EnvVar{Name: "STEWARD_S3_CA_BUNDLE", Value: s3.CABundle})
		}
	}
	if g := d.GCS; g != nil {
		env = gcsEnv(g)
	}
	if a := d.Azure; a != nil {
		env = azureEnv(a)
	}
	if pvc := d.PVC; pvc != nil {
		volumes = []corev1.Volume{{Name: backupVolume, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: pvc.ClaimName, ReadOnly: readOnly}}}}
		mounts = []corev1.VolumeMount{{Name: backupVolume, MountPath: backupMount, ReadOnly: readOnly}}
	}
	return env, volumes, mounts
}

func agentJob(b *etcdv1alpha1.EtcdBackup, name, image string, args []string) *batchv1.Job {
	// Not LabelCluster: the cluster's controller finds its member Pods by that label, and an agent Pod is not
	// a member.
	return oneShotJob(b.Namespace, name, map[string]string{LabelBackup: b.Name},
		*metav1.NewControllerRef(b, etcdv1alpha1.GroupVersion.WithKind("EtcdBackup")), b.Spec.Destination, false, image, args)
}

// oneShotJob is a Job of one agent container, run once, that reports through its termination message.
func oneShotJob(namespace, name string, labels map[string]string, owner metav1.OwnerReference, d etcdv1alpha1.BackupDestination,
	readOnly bool, image string, args []string) *batchv1.Job {
	env, volumes, mounts := destinationAccess(d, readOnly)
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: namespace, Labels: labels,
			OwnerReferences: []metav1.OwnerReference{owner},
		},
		Spec: batchv1.JobSpec{
			// The agent already tries every member it was given; a retry of the Pod would only repeat that, and
			// one Pod keeps one termination message to read.
			BackoffLimit:          ptr.To[int32](0),
			ActiveDeadlineSeconds: ptr.To[int64](BackupJobDeadline),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: destinationPodLabels(d, labels)},
				Spec: corev1.PodSpec{
					RestartPolicy:                corev1.RestartPolicyNever,
					ServiceAccountName:           DestinationServiceAccount(d),
					EnableServiceLinks:           ptr.To(false),
					AutomountServiceAccountToken: ptr.To(false),
					SecurityContext:              restrictedPod(),
					Containers: []corev1.Container{{
						Name:                     AgentContainer,
						Image:                    image,
						ImagePullPolicy:          corev1.PullIfNotPresent,
						Command:                  []string{"/usr/local/bin/steward-agent"},
						Args:                     args,
						Env:                      env,
						VolumeMounts:             mounts,
						TerminationMessagePath:   corev1.TerminationMessagePathDefault,
						TerminationMessagePolicy: corev1.TerminationMessageReadFile,
						SecurityContext:          restrictedContainer(),
						Resources:                agentResources(),
					}},
					Volumes: volumes,
				},
			},
		},
	}
}

// Where a container finds the keys of a backup's stored format.
const (
	encryptionKeyVolume = "encryption-key"
	encryptionKeyMount  = "/etc/steward/encryption-key"
	decryptionKeyVolume = "decryption-key"
	decryptionKeyMount  = "/etc/steward/decryption-key"
)

// codecAccess is what a container needs to write and read a backup's stored format: the compression, the
// encryption key Secret (write: new objects are encrypted to its first key, and stored ones read with all) and
// the key Secret of what it only reads (read, nil for none; a point-in-time backup reads its schedule's
// snapshots and segments). Both Secrets are mounted read-only; only the key age.key is projected.
func codecAccess(compression etcdv1alpha1.BackupCompression, write, read *etcdv1alpha1.BackupEncryption) (args []string, volumes []corev1.Volume, mounts []corev1.VolumeMount) {
	if compression == "" {
		compression = etcdv1alpha1.CompressionZstd
	}
	args = []string{"--compression=" + string(compression)}
	add := func(enc *etcdv1alpha1.BackupEncryption, volume, mount, flag string) {
		if enc == nil {
			return
		}
		v := secretVolume(volume, enc.KeySecret.Name)
		v.Secret.Items = []corev1.KeyToPath{{Key: etcdv1alpha1.EncryptionKeySecretKey, Path: etcdv1alpha1.EncryptionKeySecretKey}}
		volumes = append(volumes, v)
		mounts = append(mounts, corev1.VolumeMount{Name: volume, MountPath: mount, ReadOnly: true})
		args = append(args, flag+"="+mount+"/"+etcdv1alpha1.EncryptionKeySecretKey)
	}
	add(write, encryptionKeyVolume, encryptionKeyMount, "--encryption-key-file")
	if read != nil && (write == nil || read.KeySecret != write.KeySecret) {
		add(read, decryptionKeyVolume, decryptionKeyMount, "--decryption-key-file")
	}
	return args, volumes, mounts
}

// withCodec adds codecAccess to the Job's one container.
func withCodec(job *batchv1.Job, compression etcdv1alpha1.BackupCompression, write, read *etcdv1alpha1.BackupEncryption) {
	args, volumes, mounts := codecAccess(compression, write, read)
	spec := &job.Spec.Template.Spec
	c := &spec.Containers[0]
	c.Args = append(c.Args, args...)
	c.VolumeMounts = append(c.VolumeMounts, mounts...)
	spec.Volumes = append(spec.Volumes, volumes...)
}
