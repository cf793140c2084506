// Package resources builds the Kubernetes objects of an etcd cluster from its EtcdCluster: member Pods and
// PVCs, the headless peer Service, the client Service and the PodDisruptionBudget. Builders are pure (no client,
// no clock): the controller creates what they return, and tests use them as the expected objects. Names and
// labels defined here are how the controller finds a cluster's objects again.
package resources

import (
	"fmt"
	"maps"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/plan"
)

// Ports etcd listens on in every member Pod.
const (
	ClientPort  = 2379
	PeerPort    = 2380
	MetricsPort = 2381
	// ProbePort is where a member's `steward-agent run-etcd` answers the readiness and liveness probes for etcd,
	// passing them on to etcd's endpoints on MetricsPort (plain HTTP too), answering a starting etcd's readiness as
	// soon as etcd passes and its liveness within StartGrace.
	ProbePort = 2382
)

// StartGrace is how long a member's etcd may take to start (a member replaying a large log takes a while) before
// its liveness probe goes by etcd's /livez.
const StartGrace = 5 * time.Minute

// LivenessKillGrace is the termination grace, in seconds, of a member whose liveness probe failed (the Pod's own
// grace, 30 s, is for deletions and drains).
const LivenessKillGrace int64 = 5

// Labels and annotations Steward puts on the objects it owns.
const (
	LabelCluster = "etcd.steward.dev/cluster"
	LabelMember  = "etcd.steward.dev/member"
	// AnnotationInitialCluster records the --initial-cluster a member was created with. It is how a restarted
	// operator finishes a bootstrap with the same member names instead of starting a second cluster identity.
	AnnotationInitialCluster = "etcd.steward.dev/initial-cluster"
	// AnnotationInitialClusterState is "new" (bootstrap) or "existing" (joined later).
	AnnotationInitialClusterState = "etcd.steward.dev/initial-cluster-state"
	// AnnotationVersion is the etcd version a member Pod is set to run (a custom image may not say). On a PVC it
	// is the version the member's data was last started with, and AnnotationImage that release's image: a Pod
	// re-created on the volume starts on them, because the data may be in a format only that release reads.
	AnnotationVersion = "etcd.steward.dev/version"
	AnnotationImage   = "etcd.steward.dev/image"
	// AnnotationRolledTo is on a member Pod: the images (comma-separated) its etcd container was switched to in
	// place. The kubelet counts the container it stops for such a switch as a restart and keeps a crash back-off
	// per container spec, so switching the Pod back to one of them would start etcd only after that back-off (10 s,
	// then 20 s, ...): a roll to one of them re-creates the Pod instead (RollNeedsNewPod).
	AnnotationRolledTo = "etcd.steward.dev/rolled-to"
	// AnnotationTLS is the TLS provider a member Pod was created for: "Steward", "Secrets" or "CertManager"
	// (certificates) or "None" (plaintext). A Pod without it was created by a Steward without TLS, so it runs
	// plaintext.
	AnnotationTLS = "etcd.steward.dev/tls"
	// AnnotationTLSListeners is "plaintext" on a member Pod of a TLS provider that still listens in plaintext: a
	// member in the middle of a switch between plaintext and TLS (MemberTLSBridge).
	AnnotationTLSListeners = "etcd.steward.dev/tls-listeners"
	// AnnotationTLSMode is on a member's PVC: the TLS mode (MemberTLSPlaintext, MemberTLSBridge, MemberTLSOn) its
	// last Pod was created in. A Pod re-created while etcd gives no member list (whose peer URL would say) listens
	// as its volume records.
	AnnotationTLSMode = "etcd.steward.dev/tls-mode"
	// AnnotationPeerIdentity is on a member Pod created holding a certificate that carries the cluster's peer
	// identity (PeerIdentity, the value): a member whose certificate files need no look to know they carry it.
	AnnotationPeerIdentity = "etcd.steward.dev/peer-identity"
	// AnnotationTrust is "ClusterCA" on a member Pod that trusts only the cluster's own CA (provider CertManager:
	// the intermediate of TrustSecretName, not the user's issuer's CA). Its etcd loaded that CA when it started
	// and keeps it until the Pod is re-created.
	AnnotationTrust = "etcd.steward.dev/trust"
	// AnnotationRemovedMember is on the PVC of a member Steward removed from etcd, written before its Pod is
	// deleted: the etcd member ID. Its volume is a leftover, never brought back as a member, even when no member
	// list says so.
	AnnotationRemovedMember = "etcd.steward.dev/removed-member"
	// AnnotationLastDefragmentation is on a member's PVC: when Steward last defragmented the member and by how
	// many bytes its database file shrank, "<RFC 3339 time> <bytes>" (status.members[].lastDefragmentation),
	// followed by " <revision>" when the revision the cluster was compacted to then is known (a NOSPACE
	// recovery defragments each member once after its compaction).
	AnnotationLastDefragmentation = "etcd.steward.dev/last-defragmentation"
	// AnnotationHasRun is on a member's PVC: the etcd member ID (hex) the member has run under, written once
	// Steward sees it started (for a volume from before Steward wrote it, once status or the bootstrap shows it
	// ran). Its data dir held the member, and only its volume holds that data: the record lives beside the data,
	// not in it, so an emptied data dir leaves it, and a Pod re-created on the volume refuses to start etcd on an
	// empty data dir (--guard-has-run) even when no member list says the member has run.
	AnnotationHasRun = "etcd.steward.dev/has-run"

	// EtcdContainer is the name of the etcd container in a member Pod.
	EtcdContainer = "etcd"

	dataVolume = "data"
	dataMount  = "/var/lib/etcd"
	// dataDir is etcd's --data-dir on the data volume, for etcd and for the init containers that look at it.
	dataDir = dataMount + "/data"
	// nonRootID is the UID and GID etcd runs as; the volume is group-owned by it (fsGroup).
	nonRootID = 65532
)

// Options are operator-wide settings the builders need.
type Options struct {
	// ImageRepository is prefixed to ":v<version>" when the spec has no image.
	ImageRepository string
	// ClusterDomain is the cluster's DNS domain, for member FQDNs.
	ClusterDomain string
	// AgentImage is the image of steward-agent, which restores snapshots into new members' data dirs.
	AgentImage string
	// AgentCurrent: AgentImage is of this release, so it has the commands member Pods run from it: await-dns
	// (awaitDNSContainer, for bootstrap members) and run-etcd (guardedEtcdCommand, etcd's entrypoint). An older
	// agent lacks them, and a member would then never start: with one, bootstrap members do not wait for DNS and
	// etcd starts directly, as before.
	AgentCurrent bool
	// AgentImageVolume: member Pods mount AgentImage as an image volume and run the agent from it, instead of an
	// init container copying it into the tools volume (--agent-delivery=image-volume). That saves the init
	// container's start and the kubelet's noticing its end on every member Pod's start, but needs Kubernetes 1.35
	// or newer (image volumes on by default) and a runtime that mounts them (containerd 2.1, CRI-O 1.31). A
	// restored member's Pod installs the agent still: its restore container runs it from the tools volume.
	AgentImageVolume bool
	// AgentDeliveryAuto (--agent-delivery=auto on Kubernetes 1.35 or newer): AgentImageVolume is decided for each
	// member Pod as it is created, from the nodes' runtimes (ImageVolumesOnNodes). A Pod keeps how it was made:
	// a change of choice restarts no member.
	AgentDeliveryAuto bool
	// UpgradeVia are the releases, one per minor, a cluster passes through when its spec.version is more than
	// one minor ahead (--upgrade-via, checked by plan.ParseUpgradeVia).
	UpgradeVia []string
}

// agentRunsEtcd: member Pods start etcd through `steward-agent run-etcd` (guardedEtcdCommand), installed by an
// init container, and their probes ask it.
func (o Options) agentRunsEtcd() bool { return o.AgentImage != "" && o.AgentCurrent }

// agentFromImageVolume: member m's etcd container runs the agent from the agent image mounted as a volume
// (Options.AgentImageVolume), not from the tools volume.
func (o Options) agentFromImageVolume(m Member) bool {
	return o.agentRunsEtcd() && o.AgentImageVolume && m.Restore == nil
}

// DefaultUpgradeVia is --upgrade-via's default: the newest 3.6 release Steward is tested with, which etcd lets a
// cluster leave for 3.7 (3.6.11 or later).
const DefaultUpgradeVia = "3.6.16"

// Member is what a member Pod is started with.
type Member struct {
	Name string
	// InitialCluster is the --initial-cluster list: member name to peer URL.
	InitialCluster map[string]string
	// State is "new" for members of the bootstrap, "existing" for members that join a running cluster.
	State string
	// Version and Image the member runs; empty means the spec's version and image.
	Version string
	Image   string
	// Restore, when set, is the snapshot the member's data dir is restored from before etcd first starts.
	Restore *RestoreSource
	// HasRun: the member has started before (a Pod re-created on its volume), so its data dir must hold it.
	HasRun bool
	// TLS is how the member runs TLS (MemberTLSPlaintext, MemberTLSBridge, MemberTLSOn) and TLSProvider whose
	// certificates it holds; empty means as the spec says (MemberTLSOf).
	TLS         string
	TLSProvider string
	// PeerCheck: the member serving TLS accepts on its peer port only certificates carrying the cluster's peer
	// identity (PeerIdentity), and checks that its peers' carry it.
	PeerCheck bool
	// ClusterCA: the member holding certificates of provider CertManager trusts only the cluster's own CA
	// (TrustSecretName's ca.crt), not the ca.crt cert-manager wrote into its Secret.
	ClusterCA bool
	// Certificates is CertificatesDigest of the TLS Secrets the pass saw or wrote, by name: the new Pod's
	// AnnotationCertificates comes from it, so that the Pod is not annotated again right after its creation.
	Certificates map[string]string
}

// release is the version and image member m runs.
func release(cluster *etcdv1alpha1.EtcdCluster, m Member, o Options) (version, image string) {
	version, image = m.Version, m.Image
	if version == "" {
		version = cluster.Spec.Version
	}
	if image == "" {
		image = ImageFor(cluster, version, o)
	}
	return version, image
}

// ClusterLabels select every object of a cluster.
func ClusterLabels(cluster *etcdv1alpha1.EtcdCluster) map[string]string {
	return map[string]string{
		"app.kubernetes.io/name":       "etcd",
		"app.kubernetes.io/instance":   cluster.Name,
		"app.kubernetes.io/managed-by": "steward",
		LabelCluster:                   cluster.Name,
	}
}

// MemberLabels select one member's Pod and PVC.
func MemberLabels(cluster *etcdv1alpha1.EtcdCluster, member string) map[string]string {
	l := ClusterLabels(cluster)
	l[LabelMember] = member
	return l
}

// PeerServiceName is the headless Service that gives members their DNS names.
func PeerServiceName(cluster *etcdv1alpha1.EtcdCluster) string { return cluster.Name + "-peer" }

// ClientServiceName is the Service clients connect to.
func ClientServiceName(cluster *etcdv1alpha1.EtcdCluster) string { return cluster.Name }

// PVCName is a member's data volume claim.
func PVCName(member string) string { return member + "-data" }

// MemberHost is a member's stable DNS name, served by the peer Service.
func MemberHost(cluster *etcdv1alpha1.EtcdCluster, member string, o Options) string {
	return fmt.Sprintf("%s.%s.%s.svc.%s", member, PeerServiceName(cluster), cluster.Namespace, o.ClusterDomain)
}

// PeerURL is a member's advertised peer URL as the spec has it (https with TLS).
func PeerURL(cluster *etcdv1alpha1.EtcdCluster, member string, o Options) string {
	return PeerURLWith(cluster, member, Scheme(cluster), o)
}

// PeerURLWith is a member's peer URL with the given scheme: during a switch between plaintext and TLS a member's
// peer URL is http or https whatever the spec says.
func PeerURLWith(cluster *etcdv1alpha1.EtcdCluster, member, scheme string, o Options) string {
	return fmt.Sprintf("%s://%s:%d", scheme, MemberHost(cluster, member, o), PeerPort)
}

// MemberNameFromPeerURL returns the member name in a peer URL this cluster's members advertise, so a member
// added to etcd but not yet started (etcd knows only its peer URL) is recognised by name.
func MemberNameFromPeerURL(cluster *etcdv1alpha1.EtcdCluster, url string, o Options) (string, bool) {
	suffix := fmt.Sprintf(".%s.%s.svc.%s:%d", PeerServiceName(cluster), cluster.Namespace, o.ClusterDomain, PeerPort)
	// Either scheme: members switching between plaintext and TLS have both.
	rest, ok := strings.CutPrefix(url, "https://")
	if !ok {
		if rest, ok = strings.CutPrefix(url, "http://"); !ok {
			return "", false
		}
	}
	name, ok := strings.CutSuffix(rest, suffix)
	// The list comes from etcd, which anyone able to reach it can change: only a name Steward could have given
	// (a DNS label: it is the Pod's hostname) under this cluster's prefix is taken as one of its members.
	if !ok || !strings.HasPrefix(name, cluster.Name+"-") || len(validation.IsDNS1123Label(name)) > 0 {
		return "", false
	}
	return name, true
}

// ClientURL is a member's advertised client URL when it runs in TLS mode mode (MemberTLSOn: https).
func ClientURL(cluster *etcdv1alpha1.EtcdCluster, member, mode string, o Options) string {
	return fmt.Sprintf("%s://%s:%d", SchemeOf(mode), MemberHost(cluster, member, o), ClientPort)
}

// ClientEndpoint is the client Service's URL.
func ClientEndpoint(cluster *etcdv1alpha1.EtcdCluster, o Options) string {
	return fmt.Sprintf("%s://%s:%d", Scheme(cluster), ClientServiceHost(cluster, o), ClientPort)
}

// ClientServiceHost is the client Service's fully qualified DNS name.
func ClientServiceHost(cluster *etcdv1alpha1.EtcdCluster, o Options) string {
	return fmt.Sprintf("%s.%s.svc.%s", ClientServiceName(cluster), cluster.Namespace, o.ClusterDomain)
}

// Image is the etcd image members of spec.version run.
func Image(cluster *etcdv1alpha1.EtcdCluster, o Options) string {
	return ImageFor(cluster, cluster.Spec.Version, o)
}

// ImageFor is the image of etcd version: the spec's image when it is set and for that version, else the
// operator's repository tagged v<version>.
func ImageFor(cluster *etcdv1alpha1.EtcdCluster, version string, o Options) string {
	if cluster.Spec.Image != "" && version == cluster.Spec.Version {
		return cluster.Spec.Image
	}
	return fmt.Sprintf("%s:v%s", o.ImageRepository, version)
}

// FormatInitialCluster renders name=url pairs sorted by name, as etcd's --initial-cluster expects.
func FormatInitialCluster(peers map[string]string) string {
	names := make([]string, 0, len(peers))
	for n := range peers {
		names = append(names, n)
	}
	sort.Strings(names)
	parts := make([]string, 0, len(names))
	for _, n := range names {
		parts = append(parts, n+"="+peers[n])
	}
	return strings.Join(parts, ",")
}

// ParseInitialCluster is the inverse of FormatInitialCluster.
func ParseInitialCluster(s string) (map[string]string, error) {
	peers := map[string]string{}
	if s == "" {
		return nil, fmt.Errorf("empty initial cluster")
	}
	for _, part := range strings.Split(s, ",") {
		name, url, ok := strings.Cut(part, "=")
		if !ok || name == "" || url == "" {
			return nil, fmt.Errorf("malformed initial cluster entry %q", part)
		}
		if _, dup := peers[name]; dup {
			return nil, fmt.Errorf("member %q listed twice in initial cluster", name)
		}
		peers[name] = url
	}
	return peers, nil
}

// Room etcd needs on a member's volume beside its database, and the quota that leaves (the same numbers are in
// the CEL rules on EtcdClusterSpec, which refuse a volume or a quota that cannot fit):
//   - WAL: etcd keeps up to 5 segments (--max-wals) of 64 MiB, preallocated, plus the one it is writing: 384 MiB;
//   - snapshots (--max-snapshots 5, small) and slack: 64 MiB;
//   - the database twice: a defragmentation writes a compacted copy next to it before replacing it, and a
//     member that falls behind receives the leader's whole database as a file beside its own.
//
// So the quota is at most (volume - 448 MiB) / 2, and never more than 8 GiB, etcd's own advice for the largest
// database. A disk that filled before the database reached its quota would crash the member instead of letting
// etcd raise its NOSPACE alarm and stay readable.
const (
	volumeReserveBytes = 448 << 20
	maxQuotaBytes      = 8 << 30
	// MinVolumeBytes is the smallest volume admission accepts: the reserve and a 32 MiB quota.
	MinVolumeBytes = volumeReserveBytes + 2*(32<<20)
)

// QuotaBackendBytes is the --quota-backend-bytes members run with: SpecQuotaBackendBytes, or the quota Steward
// raised it to after a NOSPACE alarm (status.raisedQuotaBackendBytes) where that is larger, at most the spec's
// maximum (spec.maintenance.recoverFromNoSpace.maxQuotaBackendBytes; without one, no raise stands).
func QuotaBackendBytes(cluster *etcdv1alpha1.EtcdCluster) int64 {
	q := SpecQuotaBackendBytes(cluster)
	if raised := min(cluster.Status.RaisedQuotaBackendBytes, MaxQuotaBackendBytes(cluster)); raised > q {
		return raised
	}
	return q
}

// MaxQuotaBackendBytes is the most Steward may raise the quota to (spec.maintenance.recoverFromNoSpace
// .maxQuotaBackendBytes), 0 when it may not.
func MaxQuotaBackendBytes(cluster *etcdv1alpha1.EtcdCluster) int64 {
	if m := cluster.Spec.Maintenance; m != nil && m.RecoverFromNoSpace != nil && m.RecoverFromNoSpace.MaxQuotaBackendBytes != nil {
		return m.RecoverFromNoSpace.MaxQuotaBackendBytes.Value()
	}
	return 0
}

// SpecQuotaBackendBytes is the quota the spec asks for: spec.etcd.quotaBackendBytes, else the most the volume
// (or the emptyDir's size limit) holds with room for the WAL, snapshots and a second copy of the database (see
// volumeReserveBytes); 0 (etcd's default) when there is no size to go by. A volume below MinVolumeBytes
// (admission refuses it; a cluster created before the rule may have one) gets a quarter of its size: no quota
// fits it with the full reserve, and a small one at least keeps the database from filling it.
func SpecQuotaBackendBytes(cluster *etcdv1alpha1.EtcdCluster) int64 {
	if q := cluster.Spec.Etcd.QuotaBackendBytes; q != nil {
		return q.Value()
	}
	size := cluster.Spec.Storage.Size.Value()
	if size < MinVolumeBytes {
		return size / 4
	}
	return min((size-volumeReserveBytes)/2, maxQuotaBytes)
}

// etcdInitialState is the --initial-cluster-state etcd is started with: the member's own, except for a member of
// a one-member initial cluster whose data dir already holds it (restored from a snapshot by its init container
// before etcd first starts, or a Pod re-created on its volume), which starts "existing". etcd ignores the flag
// while the data dir holds the member; it matters when the data dir is emptied and the container restarts. A
// member of a bootstrap of several then finds that its peers know it has run ("has already been bootstrapped")
// and refuses to start, which Steward reads as lost data; so it keeps "new". A member that bootstrapped alone has
// no peer to ask: with "new" it would silently start an empty cluster under the cluster's old identity, the only
// member etcd then lists, the members holding the data looking removed; with "existing" it finds no peer to join
// and refuses to start. Its first Pod, whose data dir starts empty, needs "new": Steward restarts that Pod once
// the cluster has grown (plan, RestartingLoneBootstrapMember). The recorded state (AnnotationInitialClusterState)
// stays the member's own.
func etcdInitialState(m Member) string {
	if m.State == "new" && len(m.InitialCluster) == 1 && (m.Restore != nil || m.HasRun) {
		return "existing"
	}
	return m.State
}

// EtcdMark is where steward-agent run-etcd records, on the Pod's tools volume (an emptyDir, which outlives the
// container's restarts but not the Pod), that etcd's data dir has held the member in this Pod.
const EtcdMark = toolsMount + "/etcd-data-dir-held-member"

// guardedEtcdCommand is the etcd container's command (with an agent of this release, Options.AgentCurrent):
// etcd's, started by `steward-agent run-etcd` (at path agent), which
// refuses to start it on a data dir that holds no member once the member has run (emptied under it): in this Pod
// (the mark), or before it (m.HasRun: a Pod re-created on the member's volume). etcd alone would let such a member
// rejoin under its old identity (a member that joined a running cluster, after one crash, by a snapshot from the
// leader) or start an empty cluster (a member that bootstrapped alone). It answers the readiness and liveness
// probes too (ProbePort).
func guardedEtcdCommand(m Member, agent string, etcd []string) []string {
	cmd := []string{agent, "run-etcd", "--guard-data-dir=" + dataDir, "--guard-mark=" + EtcdMark,
		"--exit-report=" + corev1.TerminationMessagePathDefault,
		fmt.Sprintf("--probe-listen=0.0.0.0:%d", ProbePort), fmt.Sprintf("--probe-etcd=http://127.0.0.1:%d", MetricsPort),
		"--probe-start-grace=" + StartGrace.String()}
	if m.HasRun {
		cmd = append(cmd, "--guard-has-run")
	}
	if before := bootstrapsAfter(m); len(before) > 0 {
		cmd = append(cmd, "--bootstrap-after="+strings.Join(before, ","))
	}
	return append(append(cmd, "--"), etcd...)
}

// bootstrapsAfter are the peer URLs of the members of a new cluster ranked (by name) before m, which m's first
// start waits to serve (`run-etcd --bootstrap-after`): etcd bootstrapping a new cluster asks
// every other member whether it has been bootstrapped, a second's timeout each, and members started together find
// each other's listeners open and silent. A restored member's data dir holds it, so etcd asks nobody.
func bootstrapsAfter(m Member) []string {
	if m.State != "new" || len(m.InitialCluster) < 2 || m.Restore != nil {
		return nil
	}
	var before []string
	for _, name := range slices.Sorted(maps.Keys(m.InitialCluster)) {
		if name < m.Name {
			before = append(before, m.InitialCluster[name])
		}
	}
	return before
}

// PodBootstrapsAlone reports whether a member Pod starts etcd to bootstrap a one-member cluster
// (--initial-cluster-state=new, itself alone in --initial-cluster): the first Pod of a cluster created with one
// replica. Were its data dir emptied while it runs, etcd would start an empty cluster under the old identity
// (etcdInitialState).
func PodBootstrapsAlone(pod *corev1.Pod) bool {
	var isNew bool
	peers := -1
	for _, a := range etcdCommand(pod) {
		if v, ok := strings.CutPrefix(a, "--initial-cluster-state="); ok {
			isNew = v == "new"
		}
		if v, ok := strings.CutPrefix(a, "--initial-cluster="); ok {
			peers = len(strings.Split(v, ","))
		}
	}
	return isNew && peers == 1
}

// etcdArgs are the etcd flags of a member. The --initial-* flags only take effect on the first start with an
// empty data dir; afterwards etcd reads membership from its data.
func etcdArgs(cluster *etcdv1alpha1.EtcdCluster, m Member, o Options) []string {
	mode := MemberTLSOf(cluster, m)
	scheme := SchemeOf(mode)
	args := []string{
		"--name=" + m.Name,
		"--data-dir=" + dataDir,
		fmt.Sprintf("--listen-client-urls=%s://0.0.0.0:%d", scheme, ClientPort),
		"--advertise-client-urls=" + ClientURL(cluster, m.Name, mode, o),
		fmt.Sprintf("--listen-peer-urls=%s://0.0.0.0:%d", scheme, PeerPort),
		"--initial-advertise-peer-urls=" + PeerURLWith(cluster, m.Name, scheme, o),
		fmt.Sprintf("--listen-metrics-urls=http://0.0.0.0:%d", MetricsPort),
		"--initial-cluster=" + FormatInitialCluster(m.InitialCluster),
		"--initial-cluster-state=" + etcdInitialState(m),
		// The cluster's UID keeps two clusters of the same name (deleted and re-created) from ever joining.
		"--initial-cluster-token=" + string(cluster.UID),
	}
	peerHost := ""
	if m.PeerCheck {
		peerHost = PeerIdentity(cluster, o)
	}
	args = append(args, tlsArgs(mode, ClientCertAuth(cluster), peerHost)...)
	t := cluster.Spec.Etcd
	if q := QuotaBackendBytes(cluster); q > 0 {
		args = append(args, "--quota-backend-bytes="+strconv.FormatInt(q, 10))
	}
	if t.AutoCompactionMode != "" {
		args = append(args, "--auto-compaction-mode="+t.AutoCompactionMode)
	}
	if t.AutoCompactionRetention != "" {
		args = append(args, "--auto-compaction-retention="+t.AutoCompactionRetention)
	}
	if t.HeartbeatIntervalMillis != nil {
		args = append(args, fmt.Sprintf("--heartbeat-interval=%d", *t.HeartbeatIntervalMillis))
	}
	if t.ElectionTimeoutMillis != nil {
		args = append(args, fmt.Sprintf("--election-timeout=%d", *t.ElectionTimeoutMillis))
	}
	if t.SnapshotCount != nil {
		args = append(args, fmt.Sprintf("--snapshot-count=%d", *t.SnapshotCount))
	}
	if t.MaxRequestBytes != nil {
		args = append(args, "--max-request-bytes="+strconv.FormatInt(t.MaxRequestBytes.Value(), 10))
	}
	if EtcdChecksEnabled(cluster) {
		version, _ := release(cluster, m, o)
		args = append(args, corruptionCheckArgs(version)...)
	}
	return args
}

func ownerRef(cluster *etcdv1alpha1.EtcdCluster) metav1.OwnerReference {
	return *metav1.NewControllerRef(cluster, etcdv1alpha1.GroupVersion.WithKind("EtcdCluster"))
}

// MemberPod is the Pod of one member. It stays one function over 80 lines because most of it is the Pod spec,
// one literal best read top to bottom beside the values gathered for it just above.
func MemberPod(cluster *etcdv1alpha1.EtcdCluster, m Member, o Options) *corev1.Pod {
	labels := map[string]string{}
	for k, v := range cluster.Spec.Pod.Labels {
		labels[k] = v
	}
	for k, v := range MemberLabels(cluster, m.Name) {
		labels[k] = v
	}
	if m.Restore != nil && m.Restore.Backup != nil {
		labels = destinationPodLabels(m.Restore.Backup.Spec.Destination, labels)
	}
	annotations := map[string]string{}
	for k, v := range cluster.Spec.Pod.Annotations {
		annotations[k] = v
	}
	annotations[AnnotationInitialCluster] = FormatInitialCluster(m.InitialCluster)
	annotations[AnnotationInitialClusterState] = m.State
	version, image := release(cluster, m, o)
	annotations[AnnotationVersion] = version
	var (
		initContainers []corev1.Container
		extraVolumes   []corev1.Volume
	)
	awaitDNS, waitsForDNS := awaitDNSContainer(cluster, m, o)
	switch {
	case m.Restore != nil:
		// The wait for the peers' names goes first: after a restore the data dir holds a member, and the agent
		// takes that for a restarted member that needs no wait, so a restored cluster would meet the cached
		// "no such host" it exists to avoid.
		if waitsForDNS {
			initContainers = append(initContainers, awaitDNS)
		}
		annotations[AnnotationRestore] = m.Restore.Restore
		restore, volumes := restoreInitContainers(cluster, m, image, o)
		initContainers, extraVolumes = append(initContainers, restore...), volumes
	case o.agentFromImageVolume(m):
		// The agent comes with its image's volume; the tools volume keeps run-etcd's mark only.
		if waitsForDNS {
			initContainers = append(initContainers, awaitDNS)
		}
		_, _, toolsVol := agentInstall(o.AgentImage)
		extraVolumes = []corev1.Volume{toolsVol, agentImageVolume(o.AgentImage)}
	case o.agentRunsEtcd():
		// The agent is etcd's entrypoint (guardedEtcdCommand); a restore's init containers install it already.
		install, tools, toolsVol := agentInstall(o.AgentImage)
		if waitsForDNS {
			// One container installs the agent and then waits: each init container costs its start and the
			// kubelet's noticing its end (0.8 s on the test bed), on every bootstrap member's start.
			awaitDNS.Command = append(awaitDNS.Command, "--install-to="+toolsMount+"/steward-agent")
			awaitDNS.VolumeMounts = append(awaitDNS.VolumeMounts, tools)
			install = awaitDNS
		}
		initContainers, extraVolumes = append(initContainers, install), []corev1.Volume{toolsVol}
	}
	command := append([]string{"/usr/local/bin/etcd"}, etcdArgs(cluster, m, o)...)
	mounts := []corev1.VolumeMount{{Name: dataVolume, MountPath: dataMount}}
	if o.agentRunsEtcd() {
		agent := toolsMount + "/steward-agent"
		if o.agentFromImageVolume(m) {
			agent = agentImageMount + agentImagePath
			mounts = append(mounts, corev1.VolumeMount{Name: agentImageVolumeName, MountPath: agentImageMount, ReadOnly: true})
		}
		command = guardedEtcdCommand(m, agent, command)
		mounts = append(mounts, corev1.VolumeMount{Name: toolsVolume, MountPath: toolsMount})
	}
	mode := MemberTLSOf(cluster, m)
	annotations[AnnotationTLS] = memberTLSProvider(cluster, m)
	if mode == MemberTLSBridge {
		annotations[AnnotationTLSListeners] = "plaintext"
	}
	delete(annotations, AnnotationPeerIdentity) // Steward's to say, never spec.pod.annotations'
	delete(annotations, AnnotationTrust)
	delete(annotations, AnnotationCertificates)
	delete(annotations, AnnotationVolumeCapacity)
	if trustsClusterCA(cluster, m) {
		annotations[AnnotationTrust] = TrustClusterCA
	}
	if mode != MemberTLSPlaintext && memberCertsCarryIdentity(cluster, memberTLSProvider(cluster, m)) {
		annotations[AnnotationPeerIdentity] = PeerIdentity(cluster, o)
	}

	data := corev1.Volume{Name: dataVolume}
	if cluster.Spec.Storage.Ephemeral {
		var limit = cluster.Spec.Storage.Size
		data.EmptyDir = &corev1.EmptyDirVolumeSource{SizeLimit: &limit}
	} else {
		data.PersistentVolumeClaim = &corev1.PersistentVolumeClaimVolumeSource{ClaimName: PVCName(m.Name)}
	}
	// A probe's window is period x failures. Readiness is probed every second because every member step waits
	// for it (the next member of a roll, a learner's successor, Available); the windows are what they were at 2 s,
	// so a loaded member is not marked unready or killed any sooner. With the agent as etcd's entrypoint, the
	// probes ask it (ProbePort), which gives a starting etcd the startup probe's 5 minutes itself: the kubelet runs
	// no probe when it notices a container, so a startup probe's next tick delayed Ready by up to a second.
	probe := func(path string, port, period, failures int32) *corev1.Probe {
		return &corev1.Probe{
			ProbeHandler:     corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromInt32(port)}},
			PeriodSeconds:    period,
			TimeoutSeconds:   2,
			FailureThreshold: failures,
		}
	}
	readiness, liveness := probe("/readyz", MetricsPort, 1, 6), probe("/livez", MetricsPort, 2, 15)
	startup := probe("/livez", MetricsPort, 1, int32(StartGrace/time.Second))
	if o.agentRunsEtcd() {
		readiness, liveness, startup = probe("/readyz", ProbePort, 1, 6), probe("/livez", ProbePort, 2, 15), nil
	}
	// A member the liveness probe gives up on has answered nothing for 30 s: it cannot hand its leadership over or
	// act on SIGTERM (a hung disk, a stopped process), so the Pod's 30 s grace would only double its time down.
	// etcd needs no clean stop to keep its data (every write is in its fsynced WAL); deletions and drains keep the
	// Pod's grace.
	liveness.TerminationGracePeriodSeconds = ptr.To(LivenessKillGrace)
	volumes := append(append([]corev1.Volume{data}, memberTLSVolumes(cluster, m)...), extraVolumes...)
	if v := certificatesOf(volumes, m.Certificates); v != "" {
		annotations[AnnotationCertificates] = v
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:            m.Name,
			Namespace:       cluster.Namespace,
			Labels:          labels,
			Annotations:     annotations,
			OwnerReferences: []metav1.OwnerReference{ownerRef(cluster)},
		},
		Spec: corev1.PodSpec{
			Hostname:                     m.Name,
			Subdomain:                    PeerServiceName(cluster),
			ServiceAccountName:           restoreServiceAccount(m),
			EnableServiceLinks:           ptr.To(false),
			AutomountServiceAccountToken: ptr.To(false),
			NodeSelector:                 cluster.Spec.Pod.NodeSelector,
			Affinity:                     cluster.Spec.Pod.Affinity,
			Tolerations:                  cluster.Spec.Pod.Tolerations,
			TopologySpreadConstraints:    MemberSpread(cluster),
			PriorityClassName:            cluster.Spec.Pod.PriorityClassName,
			SecurityContext:              restrictedPod(),
			InitContainers:               initContainers,
			Containers: []corev1.Container{{
				Name:            EtcdContainer,
				Image:           image,
				ImagePullPolicy: corev1.PullIfNotPresent,
				Command:         command,
				Env:             tlsEnv(mode, version),
				Ports: []corev1.ContainerPort{
					{Name: "client", ContainerPort: ClientPort},
					{Name: "peer", ContainerPort: PeerPort},
					{Name: "metrics", ContainerPort: MetricsPort},
				},
				Resources: MemberResources(cluster),
				// /readyz: serving and part of a cluster with quorum. /livez: the process is not wedged; lenient,
				// because a member that restarts during a slow disk loses more than it gains.
				ReadinessProbe:           readiness,
				LivenessProbe:            liveness,
				StartupProbe:             startup,
				SecurityContext:          restrictedContainer(),
				VolumeMounts:             append(mounts, memberTLSMounts(mode)...),
				TerminationMessagePath:   corev1.TerminationMessagePathDefault,
				TerminationMessagePolicy: etcdTerminationMessage(o),
			}},
			Volumes: volumes,
		},
	}
}

// etcdTerminationMessage is where the etcd container's termination message comes from. With the agent as etcd's
// entrypoint, only from the file it writes its plan.ExitReport to: the evidence the controller reads to tell a
// data dir emptied or corrupted on an intact volume (plan.DataLossEvidence) from a crash that a restart fixes, which
// must never be etcd's log, where a client's keys appear. Without the agent, the tail of etcd's log on an error,
// for humans (kubectl describe); the controller finds no report in it.
func etcdTerminationMessage(o Options) corev1.TerminationMessagePolicy {
	if o.agentRunsEtcd() {
		return corev1.TerminationMessageReadFile
	}
	return corev1.TerminationMessageFallbackToLogsOnError
}

// MemberPVC is the data volume claim of one member. It records the member's initial cluster too, because during
// a bootstrap the PVCs are created before any Pod.
func MemberPVC(cluster *etcdv1alpha1.EtcdCluster, m Member, o Options) *corev1.PersistentVolumeClaim {
	version, image := release(cluster, m, o)
	annotations := map[string]string{
		AnnotationInitialCluster:      FormatInitialCluster(m.InitialCluster),
		AnnotationInitialClusterState: m.State,
		AnnotationVersion:             version,
		AnnotationImage:               image,
		AnnotationTLSMode:             MemberTLSOf(cluster, m),
	}
	if m.Restore != nil {
		annotations[AnnotationRestore] = m.Restore.Restore
	}
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{
			Name:            PVCName(m.Name),
			Namespace:       cluster.Namespace,
			Labels:          MemberLabels(cluster, m.Name),
			Annotations:     annotations,
			OwnerReferences: []metav1.OwnerReference{ownerRef(cluster)},
		},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: cluster.Spec.Storage.StorageClassName,
			Resources: corev1.VolumeResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceStorage: cluster.Spec.Storage.Size},
			},
		},
	}
}

// PeerService is the headless Service behind members' DNS names. It publishes members before they are ready,
// because a member must be resolvable by its peers to become ready at all.
func PeerService(cluster *etcdv1alpha1.EtcdCluster) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Name: PeerServiceName(cluster), Namespace: cluster.Namespace, Labels: ClusterLabels(cluster),
			OwnerReferences: []metav1.OwnerReference{ownerRef(cluster)},
		},
		Spec: corev1.ServiceSpec{
			ClusterIP:                corev1.ClusterIPNone,
			PublishNotReadyAddresses: true,
			Selector:                 ClusterLabels(cluster),
			Ports: []corev1.ServicePort{
				{Name: "peer", Port: PeerPort, TargetPort: intstr.FromInt32(PeerPort)},
				{Name: "client", Port: ClientPort, TargetPort: intstr.FromInt32(ClientPort)},
			},
		},
	}
}

// PodDisruptionBudget keeps a quorum of members available through voluntary disruptions (drains, evictions).
// For a one-member cluster that means no voluntary disruption at all.
func PodDisruptionBudget(cluster *etcdv1alpha1.EtcdCluster) *policyv1.PodDisruptionBudget {
	minAvailable := intstr.FromInt32(int32(plan.Quorum(int(cluster.Spec.Replicas)))) //nolint:gosec // at most a few members
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{
			Name: cluster.Name, Namespace: cluster.Namespace, Labels: ClusterLabels(cluster),
			OwnerReferences: []metav1.OwnerReference{ownerRef(cluster)},
		},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: &minAvailable,
			Selector:     &metav1.LabelSelector{MatchLabels: ClusterLabels(cluster)},
		},
	}
}

// restrictedPod runs a Pod's processes as the non-root user, group-owning its volumes (fsGroup), under the
// runtime's default seccomp profile: what Pod Security "restricted" asks for. Member Pods and backup Jobs use it.
func restrictedPod() *corev1.PodSecurityContext {
	return &corev1.PodSecurityContext{
		RunAsNonRoot:   ptr.To(true),
		RunAsUser:      ptr.To[int64](nonRootID),
		RunAsGroup:     ptr.To[int64](nonRootID),
		FSGroup:        ptr.To[int64](nonRootID),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

// AwaitDNSContainer is the init container of a bootstrap member that waits for its peers' names in DNS.
const AwaitDNSContainer = "await-dns"

// awaitDNSContainer holds a bootstrap member of a cluster of more than one back until the cluster DNS has a record
// for every member of its --initial-cluster (at most a minute; it never fails): the members of a new cluster start
// together, and a peer looked up before its Pod has an address is "no such host" from the DNS cache for the
// SOA's minimum TTL (5 s with CoreDNS's defaults, 30 s with kubeadm's), however soon it is up. It asks in a way
// that leaves no such answer in the cache (see steward-agent's await-dns). A member that joins a running cluster
// needs none: its peers have long had records. Only with an agent of this release (Options.AgentCurrent).
func awaitDNSContainer(cluster *etcdv1alpha1.EtcdCluster, m Member, o Options) (corev1.Container, bool) {
	if m.State != "new" || len(m.InitialCluster) < 2 || !o.AgentCurrent || o.AgentImage == "" {
		return corev1.Container{}, false
	}
	args := []string{agentImagePath, "await-dns", "--data-dir=" + dataDir, "--timeout=1m"}
	for _, name := range slices.Sorted(maps.Keys(m.InitialCluster)) {
		if u, err := url.Parse(m.InitialCluster[name]); err == nil && u.Hostname() != "" {
			args = append(args, "--host="+u.Hostname())
		}
	}
	return corev1.Container{
		Name:                     AwaitDNSContainer,
		Image:                    o.AgentImage,
		ImagePullPolicy:          corev1.PullIfNotPresent,
		Command:                  args,
		VolumeMounts:             []corev1.VolumeMount{{Name: dataVolume, MountPath: dataMount, ReadOnly: true}},
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		SecurityContext:          restrictedContainer(),
		Resources:                agentResources(),
	}, true
}

// restrictedContainer is a container without privilege escalation, capabilities or a writable root file system.
func restrictedContainer() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false),
		ReadOnlyRootFilesystem:   ptr.To(true),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
}

// PodReady reports the Pod's Ready condition. A member Pod's readiness probe is etcd's /readyz, which passes
// only while the member has a leader: Ready member Pods are the kubelet's view of a serving cluster.
func PodReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
