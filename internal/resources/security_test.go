package resources

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/pitr"
)

// TestEveryContainerIsRestricted: every Pod Steward creates (member Pods of every storage kind, backup and
// delete Jobs of every destination) meets Pod Security "restricted" and more: non-root, read-only root file
// system, no privilege escalation, all capabilities dropped, the runtime's default seccomp profile, no service
// account token, no service links. Checked per container with the Pod's settings as fallback, the way the
// kubelet applies them, so that a container added later (an init container, a sidecar) cannot slip through.
func TestEveryContainerIsRestricted(t *testing.T) {
	pvcBackup := &etcdv1alpha1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "b1", UID: "uid-b"},
		Spec: etcdv1alpha1.EtcdBackupSpec{ClusterName: "db", Destination: etcdv1alpha1.BackupDestination{
			PVC: &etcdv1alpha1.PVCDestination{ClaimName: "backups", Path: "db/1.db"}}}}
	s3Backup := &etcdv1alpha1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "b2", UID: "uid-b2"},
		Spec: etcdv1alpha1.EtcdBackupSpec{ClusterName: "db", Destination: etcdv1alpha1.BackupDestination{
			S3: &etcdv1alpha1.S3Destination{Endpoint: "s3:9000", Bucket: "bkt", Key: "k", CredentialsSecret: &etcdv1alpha1.SecretReference{Name: "creds"}}}}}
	restore := &etcdv1alpha1.EtcdRestore{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "r1", UID: "uid-r"},
		Spec: etcdv1alpha1.EtcdRestoreSpec{ClusterName: "db", BackupName: "b1"}}
	schedule := &etcdv1alpha1.EtcdBackupSchedule{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "s1", UID: "uid-s"},
		Spec: etcdv1alpha1.EtcdBackupScheduleSpec{ClusterName: "db", Destination: pvcBackup.Spec.Destination}}
	pitBackup := pvcBackup.DeepCopy()
	pitBackup.Spec.PointInTime = &etcdv1alpha1.PointInTimeSource{Revision: 42}
	pitJob, err := PointInTimeJob(pitBackup, schedule, []pitr.Candidate{{Name: "b0", Path: "db/0.db", Revision: 7}}, "c1", "etcd:v3.6.16", "agent")
	if err != nil {
		t.Fatal(err)
	}
	pods := map[string]corev1.PodSpec{
		"member on a PVC":          MemberPod(testCluster(), boot, opts).Spec,
		"ephemeral member":         MemberPod(testCluster(func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Storage.Ephemeral = true }), boot, opts).Spec,
		"member with user options": MemberPod(testCluster(userPodOptions), boot, opts).Spec,
		"bootstrap member waiting for its peers in DNS": MemberPod(testCluster(), boot, func() Options {
			o := opts
			o.AgentImage, o.AgentCurrent = "agent", true
			return o
		}()).Spec,
		"backup Job to a PVC": BackupJob(pvcBackup, []string{"m=https://m:2379"}, "agent", AgentAccess{ClientSecret: "db-client", CredentialsSecret: "db-operator-credentials"}).Spec.Template.Spec, //nolint:gosec // Secret names
		"backup Job to S3":    BackupJob(s3Backup, []string{"m=http://m:2379"}, "agent", AgentAccess{}).Spec.Template.Spec,
		"delete Job on a PVC": DeleteJob(pvcBackup, "agent").Spec.Template.Spec,
		"delete Job on S3":    DeleteJob(s3Backup, "agent").Spec.Template.Spec,
		"member restored from a PVC backup": MemberPod(testCluster(), func() Member {
			m := boot
			m.Restore = &RestoreSource{Restore: "r1", Backup: pvcBackup}
			return m
		}(), opts).Spec,
		"member re-seeded from an S3 backup": MemberPod(testCluster(), func() Member {
			m := boot
			m.Restore = &RestoreSource{Restore: "r1", Backup: s3Backup, BumpRevision: ReseedBumpRevision}
			return m
		}(), opts).Spec,
		"restore verify Job on a PVC": VerifyJob(restore, pvcBackup, "agent").Spec.Template.Spec,
		"restore verify Job on S3":    VerifyJob(restore, s3Backup, "agent").Spec.Template.Spec,
		"continuous-backup follower":  FollowerDeployment(schedule, testCluster(), AgentAccessFor(testCluster()), opts).Spec.Template.Spec,
		"point-in-time Job":           pitJob.Spec.Template.Spec,
		"standby applier":             StandbyApplierDeployment(standbyCluster(), "abc", AgentAccessFor(standbyCluster()), opts).Spec.Template.Spec,
		"standby seed Job": StandbySeedJob(&etcdv1alpha1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "dr-standby-seed"},
			Spec: etcdv1alpha1.EtcdBackupSpec{ClusterName: "dr", StandbySeed: &etcdv1alpha1.StandbySeedSource{ClusterName: "main"},
				Destination: etcdv1alpha1.BackupDestination{PVC: &etcdv1alpha1.PVCDestination{ClaimName: "shared", Path: "prod"}}}}, "etcd", "agent").Spec.Template.Spec,
	}
	for name, spec := range pods {
		t.Run(name, func(t *testing.T) {
			if ptr.Deref(spec.AutomountServiceAccountToken, true) {
				t.Error("the Pod mounts a service account token; Steward's Pods never talk to the API server")
			}
			if ptr.Deref(spec.EnableServiceLinks, true) {
				t.Error("service links enabled: every Service of the namespace would land in the environment")
			}
			if spec.HostNetwork || spec.HostPID || spec.HostIPC {
				t.Error("the Pod shares a host namespace")
			}
			for _, v := range spec.Volumes {
				if v.HostPath != nil {
					t.Errorf("volume %s is a hostPath", v.Name)
				}
			}
			psc := spec.SecurityContext
			if psc == nil {
				psc = &corev1.PodSecurityContext{}
			}
			var containers []corev1.Container
			containers = append(containers, spec.InitContainers...)
			containers = append(containers, spec.Containers...)
			if len(containers) == 0 {
				t.Fatal("no containers")
			}
			for _, c := range containers {
				sc := c.SecurityContext
				if sc == nil {
					sc = &corev1.SecurityContext{}
				}
				runAsNonRoot := sc.RunAsNonRoot
				if runAsNonRoot == nil {
					runAsNonRoot = psc.RunAsNonRoot
				}
				user := sc.RunAsUser
				if user == nil {
					user = psc.RunAsUser
				}
				seccomp := sc.SeccompProfile
				if seccomp == nil {
					seccomp = psc.SeccompProfile
				}
				switch {
				case !ptr.Deref(runAsNonRoot, false):
					t.Errorf("container %s may run as root (runAsNonRoot unset)", c.Name)
				case user == nil || *user == 0:
					t.Errorf("container %s has no non-zero runAsUser", c.Name)
				}
				if !ptr.Deref(sc.ReadOnlyRootFilesystem, false) {
					t.Errorf("container %s has a writable root file system", c.Name)
				}
				if ptr.Deref(sc.AllowPrivilegeEscalation, true) {
					t.Errorf("container %s allows privilege escalation", c.Name)
				}
				if ptr.Deref(sc.Privileged, false) {
					t.Errorf("container %s is privileged", c.Name)
				}
				if sc.Capabilities == nil || len(sc.Capabilities.Add) > 0 || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" {
					t.Errorf("container %s capabilities %+v, want drop [ALL] and nothing added", c.Name, sc.Capabilities)
				}
				if seccomp == nil || seccomp.Type != corev1.SeccompProfileTypeRuntimeDefault {
					t.Errorf("container %s seccomp profile %+v, want RuntimeDefault", c.Name, seccomp)
				}
				// No BestEffort Pod: it is the first evicted under memory pressure, and starved of CPU by the Pods
				// beside it that request some (limits alone make Kubernetes request as much).
				for _, res := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
					request, limit := c.Resources.Requests[res], c.Resources.Limits[res]
					if request.IsZero() && limit.IsZero() {
						t.Errorf("container %s requests no %s", c.Name, res)
					}
				}
				for _, e := range c.Env {
					if e.Value != "" && (e.Name == "STEWARD_S3_ACCESS_KEY_ID" || e.Name == "STEWARD_S3_SECRET_ACCESS_KEY") {
						t.Errorf("container %s carries credential %s as a literal value", c.Name, e.Name)
					}
				}
				for _, p := range c.Ports {
					if p.HostPort != 0 {
						t.Errorf("container %s binds host port %d", c.Name, p.HostPort)
					}
				}
			}
		})
	}
}

// userPodOptions sets everything a user controls of member Pods; none of it may weaken their security.
func userPodOptions(c *etcdv1alpha1.EtcdCluster) {
	c.Spec.Pod = etcdv1alpha1.PodTemplate{
		Labels:            map[string]string{"team": "storage"},
		Annotations:       map[string]string{"note": "x"},
		NodeSelector:      map[string]string{"disk": "ssd"},
		Tolerations:       []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}},
		PriorityClassName: "high",
	}
}
